"""Two nodes, really: each node is its own network namespace on this machine (a veth pair with private
addresses, created here and removed afterwards; the ranks talk only over it), and tools/dist_train.sh
runs 1 process per node with NNODES=2 / NODE_RANK / MASTER_ADDR / PORT, gloo. Both ranks end with the
same weights; a run whose node 0 is killed (SIGKILL to its launcher) ends on both nodes and, resumed
with --resume, ends bit-identical to the uninterrupted 2-node run. Skipped with a reason where network
namespaces cannot be created (not root, no `ip`).

A rank stopped on node 1 under its own host name (a UTS namespace, so another machine to the watchdog)
ends both nodes' jobs soon after MMPOSMLP_STALL_TIMEOUT: node 1's launcher kills it on request
(:class:`mmposmlp.utils.dist.NodeGuard`).

The same through Slurm (``slow``, ~4 min): .dev_scripts/slurm_cluster.sh with NODES=2 runs one slurmd per
namespace, tools/slurm_train.sh runs 2 nodes x 1 task of the stochastic PosMLP-T toy; rank 1 is SIGKILLed
mid-run and --resume ends bit-identical to the uninterrupted 2-node run."""
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest
import torch

from mmposmlp.utils.compat import safe_torch_load

from test_dist_faults import _alive, _wait_for_pids, fault_cfg  # noqa: F401  (fault_cfg: a fixture)
from toolcfg import RESNET18_CLS, repo_path, write_cfg

ITERS = 6
PAUSE_HOOK = '''
import os, time
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class PauseAtHook(Hook):
    """PAUSE_AT=<iteration>: rank 0 writes PAUSE_STAMP before that iteration; every rank waits there."""
    def before_train_iter(self, runner, batch_idx, data_batch=None):
        at = os.environ.get('PAUSE_AT')
        if at and runner.iter + 1 == int(at):
            from mmengine.dist import get_rank
            if get_rank() == 0:
                open(os.environ['PAUSE_STAMP'], 'w').close()
            time.sleep(600)
'''


def _ip(*args):
    return subprocess.run(['ip'] + list(args), capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_nodes():
    """{'names': (ns0, ns1), 'ifaces': (...), 'addrs': (...)}; everything removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip('network namespaces need root')
    if shutil.which('ip') is None:
        pytest.skip('the `ip` tool (iproute2) is not installed')
    tag = uuid.uuid4().hex[:6]
    names = (f'mmpm{tag}0', f'mmpm{tag}1')
    ifaces = (f'mv{tag}0', f'mv{tag}1')
    octet = 16 + int(tag[:2], 16) % 200
    addrs = (f'10.{octet}.77.1', f'10.{octet}.77.2')
    made = []
    try:
        for n in names:
            res = _ip('netns', 'add', n)
            if res.returncode:
                pytest.skip(f'cannot create network namespaces here: {res.stderr.strip()}')
            made.append(n)
        steps = [('link', 'add', ifaces[0], 'type', 'veth', 'peer', 'name', ifaces[1])]
        for n, i, a in zip(names, ifaces, addrs):
            steps += [('link', 'set', i, 'netns', n), ('-n', n, 'addr', 'add', f'{a}/24', 'dev', i),
                      ('-n', n, 'link', 'set', i, 'up'), ('-n', n, 'link', 'set', 'lo', 'up')]
        for s in steps:
            res = _ip(*s)
            if res.returncode:
                pytest.skip(f'cannot set up the veth pair (ip {" ".join(s)}): {res.stderr.strip()}')
        yield dict(names=names, ifaces=ifaces, addrs=addrs)
    finally:
        for n in made:
            _ip('netns', 'del', n)  # removes the veth pair with it
        assert not any(n in _ip('netns', 'list').stdout for n in names)


def _node(two_nodes, rank, cfg, work, tmp_path, port, resume=False, pause_at=None):
    ns, iface = two_nodes['names'][rank], two_nodes['ifaces'][rank]
    env = dict(os.environ, OMP_NUM_THREADS='1', NNODES='2', NODE_RANK=str(rank), MASTER_ADDR=two_nodes['addrs'][0],
               PORT=str(port), GLOO_SOCKET_IFNAME=iface, PYTHONPATH=os.pathsep.join([repo_path(), str(tmp_path)]),
               MMPOSMLP_STALL_TIMEOUT='60', PAUSE_STAMP=str(tmp_path / 'paused'))
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
    if pause_at:
        env['PAUSE_AT'] = str(pause_at)
    cmd = ['ip', 'netns', 'exec', ns, 'bash', repo_path('tools', 'dist_train.sh'), cfg, '1', '--work-dir', str(work)]
    if resume:
        cmd.append('--resume')
    return subprocess.Popen(cmd, cwd=repo_path(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _both(two_nodes, cfg, work, tmp_path, port, **kw):
    procs = [_node(two_nodes, r, cfg, work, tmp_path, port, **kw) for r in (0, 1)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def test_two_nodes_in_network_namespaces_agree_and_resume_exactly(two_nodes, toy_data, tmp_path):
    (tmp_path / 'pause_hook.py').write_text(PAUSE_HOOK)
    cfg = write_cfg(tmp_path / 'cfg.py', RESNET18_CLS, toy_data, iters=ITERS, ckpt=2, extra="""
        custom_imports = dict(imports=['pause_hook'], allow_failed_imports=False)
        custom_hooks = [dict(type='mmposmlp.SaveRankWeightsHook'), dict(type='PauseAtHook')]
        """)
    ref = tmp_path / 'ref'
    outs = _both(two_nodes, cfg, ref, tmp_path, 29611)
    assert 'world_size: 2' in outs[0] or "'world_size': 2" in outs[0] or 'Distributed launcher: pytorch' in outs[0]
    r0, r1 = (torch.load(ref / f'rank{r}_final.pth', weights_only=True)['params'] for r in (0, 1))
    assert len(r0) > 10 and all(torch.equal(v, r1[k]) for k, v in r0.items())

    # node 0's launcher is killed in iteration 5 (after the checkpoint of iteration 4): both nodes end
    work = tmp_path / 'killed'
    procs = [_node(two_nodes, r, cfg, work, tmp_path, 29612, pause_at=5) for r in (0, 1)]
    t0 = time.time()
    while not (tmp_path / 'paused').exists():
        assert all(p.poll() is None for p in procs), [p.communicate()[0][-2000:] for p in procs]
        assert time.time() - t0 < 300
        time.sleep(0.2)
    os.killpg(procs[0].pid, signal.SIGKILL)
    t1 = time.time()
    out1 = procs[1].communicate(timeout=240)[0]
    procs[0].wait(timeout=30)
    assert procs[1].returncode != 0, out1[-2000:]
    print(f'node 1 ended {time.time() - t1:.1f} s after node 0 was killed')
    assert (work / 'iter_4.pth').is_file() and not (work / f'iter_{ITERS}.pth').exists()
    _both(two_nodes, cfg, work, tmp_path, 29613, resume=True)
    a = safe_torch_load(str(ref / f'iter_{ITERS}.pth'))
    b = safe_torch_load(str(work / f'iter_{ITERS}.pth'))
    for k in a['state_dict']:
        assert torch.equal(a['state_dict'][k], b['state_dict'][k]), k
    assert len(b['resume_state']['rng']) == 2


# ---- the same 2-node job through Slurm: two slurmd nodes, each in its own network namespace ----------------------
SLURM_ITERS = 6
WHERE_HOOK = '''


@HOOKS.register_module()
class WhereHook(Hook):
    """Each rank writes where it ran: rank, Slurm node name and its address on the cluster network."""
    def before_train(self, runner):
        import socket
        from mmengine.dist import get_rank
        ifname = os.environ.get('GLOO_SOCKET_IFNAME', '')
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((os.environ['MASTER_ADDR'], 9))  # no packet is sent: only picks the route's source address
        with open(os.path.join(runner.work_dir, f'where_rank{get_rank()}.txt'), 'w') as f:
            f.write(f"{os.environ.get('SLURMD_NODENAME')} {s.getsockname()[0]} {ifname}")
        s.close()
'''


@pytest.fixture(scope='module')
def slurm_two_nodes():
    """A throw-away 2-node Slurm cluster (.dev_scripts/slurm_cluster.sh with NODES=2): slurmctld here, one slurmd
    per network namespace. Yields the env a job needs; everything is removed afterwards."""
    from slurm_harness import throwaway_slurm_cluster
    with throwaway_slurm_cluster(nodes=2) as (base, stdout):
        exports = dict(line[len('export '):].split('=', 1) for line in stdout.splitlines()
                       if line.startswith('export '))
        assert exports.keys() == {'SLURM_CONF', 'GLOO_SOCKET_IFNAME'}, stdout
        exports['PATH'] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', '')
        yield exports
    assert not os.path.exists(base)


def _slurm_job(cluster, cwd, cfg, work, job, resume=False, kill_at=None):
    env = dict(os.environ, OMP_NUM_THREADS='1', GPUS='2', GPUS_PER_NODE='1', CPUS_PER_TASK='1',
               PYTHONPATH=os.pathsep.join([repo_path(), os.path.dirname(cfg)]), **cluster)
    for k in ('KILL_AT', 'KILL_RANK', 'MASTER_ADDR', 'MASTER_PORT'):
        env.pop(k, None)
    if kill_at:
        env.update(KILL_AT=kill_at, KILL_RANK='1')
    cmd = ['bash', repo_path('tools', 'slurm_train.sh'), 'debug', job, cfg, str(work)]
    cmd += ['--resume'] if resume else []
    t0 = time.time()
    res = subprocess.run(['timeout', '540'] + cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return res.returncode, res.stdout + res.stderr, time.time() - t0


@pytest.mark.slow  # ~4 min on 2 shared cores: three 2-process PosMLP-T runs
@pytest.mark.timeout(1800)
@pytest.mark.slurm
def test_two_slurm_nodes_agree_and_resume_exactly_after_a_rank_is_killed(slurm_two_nodes, toy_data, tmp_path):
    """tools/slurm_train.sh, 2 nodes x 1 task, gloo, the stochastic PosMLP-T toy (drop path, Mixup/CutMix, EMA):
    both ranks run on different nodes and end with the same weights; rank 1 killed with SIGKILL in iteration 5
    ends the job, and --resume (from iter_4) ends bit-identical to the uninterrupted 2-node run."""
    from resume_harness import ROOT, assert_same_run, toy_cwd, write_case
    cwd = toy_cwd(tmp_path, toy_data)
    extra = """
custom_imports = dict(imports=['mmposmlp.models', 'kill_hook'], allow_failed_imports=False)
custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), dict(type='KillAtHook'),
                dict(type='mmposmlp.SaveRankWeightsHook'), dict(type='WhereHook')]
"""
    cfg = write_case(str(tmp_path / 'cfg'), os.path.join(ROOT, 'configs', 'posmlp', 'toy', 'posmlp-t_toy-in1k.py'),
                     extra, iters=SLURM_ITERS)
    with open(tmp_path / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write(WHERE_HOOK)

    ref = tmp_path / 'ref'
    rc, log, took = _slurm_job(slurm_two_nodes, cwd, cfg, ref, 'mmposmlp-2n-ref')
    assert rc == 0, log[-4000:]
    print(f'uninterrupted 2-node Slurm run: {took:.1f} s')
    assert 'Distributed launcher: slurm' in log
    where = sorted((ref / f'where_rank{r}.txt').read_text().split() for r in (0, 1))
    assert [w[0] for w in where] == ['node0', 'node1'], where  # one task per node
    assert where[0][1] != where[1][1] and all(w[2] == slurm_two_nodes['GLOO_SOCKET_IFNAME'] for w in where), where
    r0, r1 = (torch.load(ref / f'rank{r}_final.pth', weights_only=True)['params'] for r in (0, 1))
    assert len(r0) > 10 and r0.keys() == r1.keys() and all(torch.equal(v, r1[k]) for k, v in r0.items())

    work = tmp_path / 'killed'
    rc, log, took = _slurm_job(slurm_two_nodes, cwd, cfg, work, 'mmposmlp-2n-kill', kill_at='iter:5')
    print(f'run whose rank 1 was killed in iteration 5 ended after {took:.1f} s')
    assert rc != 0, log[-4000:]
    assert (work / 'iter_4.pth').is_file() and not (work / f'iter_{SLURM_ITERS}.pth').exists(), os.listdir(work)
    rc, log, took = _slurm_job(slurm_two_nodes, cwd, cfg, work, 'mmposmlp-2n-resume', resume=True)
    assert rc == 0, log[-4000:]
    assert 'iter_4.pth' in log
    assert_same_run(str(ref), str(work), SLURM_ITERS, with_ema=True)
    assert len(safe_torch_load(str(work / f'iter_{SLURM_ITERS}.pth'))['resume_state']['rng']) == 2


def test_a_stopped_rank_on_another_node_ends_the_job(two_nodes, fault_cfg, tmp_path):
    """Rank 1 runs on node 1 under its own host name (a UTS namespace: to the watchdog it is another machine)
    and SIGSTOPs itself; rank 0's watchdog cannot signal it. Both nodes' jobs still end soon after
    MMPOSMLP_STALL_TIMEOUT, naming the stalled rank."""
    cfg = fault_cfg
    pid_dir = tmp_path / 'pids'
    pid_dir.mkdir()
    procs = []
    for rank in (0, 1):
        ns, iface = two_nodes['names'][rank], two_nodes['ifaces'][rank]
        env = dict(os.environ, OMP_NUM_THREADS='1', NNODES='2', NODE_RANK=str(rank),
                   MASTER_ADDR=two_nodes['addrs'][0], PORT='29614', GLOO_SOCKET_IFNAME=iface,
                   PYTHONPATH=os.pathsep.join([repo_path(), str(tmp_path)]), MMPOSMLP_STALL_TIMEOUT='6',
                   FAULT='stop1:2', PID_DIR=str(pid_dir))
        env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
        script = f'hostname mmposmlp-node{rank} && exec bash "$@"'
        cmd = ['ip', 'netns', 'exec', ns, 'unshare', '--uts', 'bash', '-c', script, 'node',
               repo_path('tools', 'dist_train.sh'), cfg, '1', '--work-dir', str(tmp_path / 'work')]
        procs.append(subprocess.Popen(cmd, cwd=repo_path(), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True))
    pids = _wait_for_pids(procs, pid_dir, timeout=300, settle=0)
    t1 = time.time()
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
        took = time.time() - t1
        print(f'both nodes ended {took:.1f} s after rank 1 stopped (timeout 6 s)')
        assert [p.returncode for p in procs] == [1, 1], [o[-2000:] for o in outs]
        assert 'ERROR: rank 1 has stopped sending heartbeats for ' in outs[0], outs[0][-3000:]
        last = [o.strip().splitlines()[-1] for o in outs]
        assert last[0].startswith('ERROR: rank 0 (local rank 0 on mmposmlp-node0, '), last[0]
        assert last[1].startswith('ERROR: rank 1 (local rank 0 on mmposmlp-node1, pid ') and last[1].endswith(
            'exited with code -9 (SIGKILL: a rank on another node found it stalled and this node ended it); the '
            'other ranks were stopped.'), last[1]
        # without the node guard node 1 never ended (its launcher only watches its own, stopped, worker); a
        # deadline with a wide margin over the 6 s timeout, not a timing benchmark
        assert took < 6 + 25, f'the job took {took:.0f} s to end on both nodes after rank 1 stopped'
        assert not any(_alive(p) for p in pids)
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


NODE_GUARD_STORE_LOST = r"""
import datetime, os, subprocess, sys, time
import torch.distributed as tdist
from mmposmlp.utils.dist import NodeGuard
port = int(sys.argv[1])
store = tdist.TCPStore('127.0.0.1', port, is_master=True, wait_for_workers=False,
                       timeout=datetime.timedelta(seconds=5))
worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
finished = subprocess.Popen([sys.executable, '-c', 'pass'])
finished.wait()
guard = NodeGuard('127.0.0.1', port, timeout=2.0, period=0.2).start()
time.sleep(1.5)
assert worker.poll() is None and not guard.killed, 'killed while the store answered'
del store  # node 0's launcher, which hosts the store, is gone
t0 = time.time()
while worker.poll() is None and time.time() - t0 < 30:
    time.sleep(0.1)
print(worker.returncode, round(time.time() - t0, 1), sorted(r for r, _ in guard.killed.values()),
      sorted(w for _, w in guard.killed.values()))
"""


def test_node_guard_ends_workers_left_running_after_the_store_is_gone(tmp_path):
    """A node whose launcher can no longer reach the rendezvous store (node 0 ended the job) SIGKILLs the
    workers still running after the stall timeout, and only those."""
    from mmposmlp.utils.dist import find_free_port
    script = tmp_path / 'guard.py'
    script.write_text(NODE_GUARD_STORE_LOST)
    res = subprocess.run([sys.executable, str(script), str(find_free_port())], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=repo_path()))
    assert res.returncode == 0, res.stderr[-3000:]
    code, took, ranks, why = res.stdout.split(maxsplit=3)
    assert code == '-9' and why.strip() == "['store lost']", res.stdout
    assert 2.0 <= float(took) < 20, res.stdout  # not before the timeout; a wide margin after it


@pytest.mark.slow  # ~1 min: one 2-node job started and cancelled
@pytest.mark.timeout(600)
@pytest.mark.slurm
def test_scancel_ends_a_two_node_slurm_job_on_both_nodes(slurm_two_nodes, fault_cfg, tmp_path):
    """tools/slurm_train.sh, 2 nodes x 1 task, both ranks paused in iteration 2; `scancel` of the job ends the
    rank on each node and srun, within Slurm's KillWait (2 s in this cluster) plus a few seconds."""
    cfg = fault_cfg
    pid_dir = tmp_path / 'pids'
    pid_dir.mkdir()
    job = f'mmposmlp-2n-scancel-{uuid.uuid4().hex[:6]}'
    env = dict(os.environ, OMP_NUM_THREADS='1', GPUS='2', GPUS_PER_NODE='1', CPUS_PER_TASK='1', FAULT='pause:2',
               PID_DIR=str(pid_dir), PYTHONPATH=os.pathsep.join([repo_path(), str(tmp_path)]), **slurm_two_nodes)
    for k in ('MASTER_ADDR', 'MASTER_PORT'):
        env.pop(k, None)
    proc = subprocess.Popen(['bash', repo_path('tools', 'slurm_train.sh'), 'debug', job, cfg, str(tmp_path / 'work')],
                            cwd=repo_path(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    pids = []
    try:
        pids = _wait_for_pids(proc, pid_dir, timeout=300)
        where = [os.readlink(f'/proc/{p}/ns/net') for p in pids]
        assert where[0] != where[1], where  # the two ranks run on the two nodes (network namespaces)
        t1 = time.time()
        res = subprocess.run(['scancel', '--name', job], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        out = proc.communicate(timeout=120)[0]
        while any(_alive(p) for p in pids) and time.time() - t1 < 60:
            time.sleep(0.2)
        took = time.time() - t1
        print(f'job and both ranks gone {took:.1f} s after scancel')
        assert proc.returncode != 0, out[-3000:]
        assert not any(_alive(p) for p in pids), f'ranks still running {took:.0f} s after scancel'
        assert took < 2 + 30, took  # KillWait 2 s, then SIGKILL; a wide margin, not a benchmark
        assert not (tmp_path / 'work' / f'iter_{ITERS}.pth').exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run(['scancel', '--name', job], env=env, capture_output=True, timeout=60)
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
