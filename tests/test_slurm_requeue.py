"""``tools/slurm_train.sh --requeue`` on a real (throw-away, single-node) Slurm cluster: a job signalled with
``scancel --signal=USR1`` (to the tasks) or ``scancel --batch --signal=USR1`` (to the batch shell, as
``--signal=B:USR1@GRACE`` does before the time limit), or a time limit moved to 3-4 minutes ahead (Slurm
sends the signal itself, ``--grace=240`` before it) saves one checkpoint on every rank, requeues itself, and the
requeued job resumes and ends with the weights, optimizer, schedulers, EMA, random states and logged losses and
metrics of an uninterrupted run. Marked ``slurm`` and ``slow`` (three 2-process runs of the toy classifier).

Slurm holds a requeued job for about two minutes (its BeginTime) before it may start again; the test moves it
to now (``scontrol update StartTime=now``, root) instead of waiting.
"""
import os
import os.path as osp
import subprocess
import time

import pytest

from resume_harness import ROOT, assert_same_run
from test_multinode import slurm_two_nodes  # noqa: F401  (a fixture: the 2-node cluster)
from test_preemption import ITERS, _case, _preempted_record, PAUSE_HOOK

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# The time-limit case: slurmctld checks time limits every 30 s (PERIODIC_TIMEOUT) and sends the --signal at the
# first check that finds at most GRACE + 30 s left. A limit moved to 3-4 min ahead with GRACE = 240 s is signalled at
# the next check, leaving the job at least 150 s to finish two iterations (the one in flight and the agreed margin)
# and write the checkpoint; a limit 1-2 min ahead would leave as little as 30 s, which a loaded 2-core machine may
# overrun (the job then ends TIMEOUT instead of requeued).
TIME_LIMIT_GRACE = 240
MARKED = """
custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), dict(type='MarkIterHook'),
                dict(type='mmposmlp.PreemptionHook', grace_period=60)]
"""


def _env(cluster, cfg, **kw):
    env = dict(os.environ, OMP_NUM_THREADS='1', GPUS='2', GPUS_PER_NODE='2', CPUS_PER_TASK='1',
               PYTHONPATH=os.pathsep.join([ROOT, osp.dirname(cfg)]), SLURM_CONF=cluster['SLURM_CONF'],
               PATH=cluster['PATH'])
    for k in ('KILL_AT', 'KILL_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'SIGNAL_AT', 'MARK_AT'):
        env.pop(k, None)
    env.update(kw)
    return env


def _job_state(env, job):
    out = subprocess.run(['scontrol', 'show', 'job', '-o', str(job)], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    fields = dict(f.split('=', 1) for f in out.split() if '=' in f)
    return fields.get('JobState'), int(fields.get('Restarts', 0))


def _job_field(env, job, name):
    out = subprocess.run(['scontrol', 'show', 'job', '-o', str(job)], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    return dict(f.split('=', 1) for f in out.split() if '=' in f)[name]


def _wait_state(env, job, done, timeout=600, what=''):
    t0 = time.time()
    while True:
        state = _job_state(env, job)
        if done(state):
            return state
        assert state[0] != 'TIMEOUT', f'job {job} reached its time limit while waiting for {what}'
        assert time.time() - t0 < timeout, f'job {job} stuck in {state} waiting for {what}'
        time.sleep(0.5)


@pytest.fixture(scope='module')
def requeue_case(slurm_cluster, toy_data, tmp_path_factory):
    root = tmp_path_factory.mktemp('slurm_requeue')
    cwd, cfg = _case(root, toy_data, iters=ITERS, extra=MARKED)
    with open(root / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write(PAUSE_HOOK)
    ref = osp.join(cwd, 'ref')
    res = subprocess.run(['bash', osp.join(ROOT, 'tools', 'slurm_train.sh'), 'debug', 'ref', cfg, ref], cwd=cwd,
                         env=_env(slurm_cluster, cfg), capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    return cwd, cfg, ref


@pytest.mark.parametrize('to', ['tasks', 'batch', 'time_limit'])
def test_signalled_job_saves_requeues_and_resumes_exactly(requeue_case, slurm_cluster, to):
    cwd, cfg, ref = requeue_case
    work = osp.join(cwd, f'requeued_{to}')
    env = _env(slurm_cluster, cfg, MARK_AT='3', HOLD='1' if to == 'time_limit' else '0')
    grace = TIME_LIMIT_GRACE if to == 'time_limit' else 120
    res = subprocess.run(['bash', osp.join(ROOT, 'tools', 'slurm_train.sh'), '--requeue', f'--grace={grace}', 'debug',
                          f'rq-{to}', cfg, work], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    job = int(res.stdout.strip().splitlines()[-1])
    t0 = time.time()
    while not all(osp.isfile(osp.join(work, f'at_rank{r}')) for r in (0, 1)):
        state = _job_state(env, job)
        assert state[0] in ('PENDING', 'RUNNING', 'CONFIGURING'), (state, _output(work, job))
        assert time.time() - t0 < 600, 'the ranks never reached iteration 3'
        time.sleep(0.05)
    if to == 'time_limit':  # the limit moves to 3-4 min from now: Slurm sends USR1 (--grace=240) at once
        runtime = _job_field(env, job, 'RunTime').split(':')
        minutes = int(runtime[-2]) + 60 * int(runtime[-3] if len(runtime) > 2 else 0) + TIME_LIMIT_GRACE // 60
        subprocess.run(['scontrol', 'update', f'JobId={job}', f'TimeLimit={minutes}'], env=env, check=True,
                       timeout=30)
    else:
        cmd = ['scancel', '--signal=USR1'] + (['--batch'] if to == 'batch' else []) + [str(job)]
        subprocess.run(cmd, env=env, check=True, timeout=30)
    _wait_state(env, job, lambda s: s[1] >= 1 and s[0] == 'PENDING', what='the requeue')
    if to == 'time_limit':
        subprocess.run(['scontrol', 'update', f'JobId={job}', 'TimeLimit=UNLIMITED'], env=env, check=True,
                       timeout=30)
    stop, state, log = _release_the_requeued_job(env, job, work)
    shown = subprocess.run(['scontrol', 'show', 'job', str(job)], env=env, capture_output=True, text=True).stdout
    assert state == ('COMPLETED', 1), (shown, log[-4000:])
    assert f'requeueing job {job}' in log and f'iter_{stop}.pth' in log.split('(restart 1)')[1], log[-4000:]
    assert_same_run(ref, work, ITERS, with_ema=True)


def _release_the_requeued_job(env, job, work):
    """The requeued job, its checkpoint checked, started now and waited for: ``(stop, final state, its log)``."""
    stop = int(_preempted_record(work)['iter'])
    assert 3 <= stop <= 5 and osp.isfile(osp.join(work, f'iter_{stop}.pth'))
    subprocess.run(['scontrol', 'update', f'JobId={job}', 'StartTime=now'], env=env, check=True, timeout=30)
    state = _wait_state(env, job, lambda s: s[0] in ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT'),
                        what='the resumed run')
    return stop, state, _output(work, job)


def _output(work, job):
    path = osp.join(work, f'slurm-{job}.out')
    return open(path).read() if osp.isfile(path) else ''


@pytest.mark.timeout(1800)
def test_two_node_job_signalled_saves_requeues_and_resumes_exactly(slurm_two_nodes, toy_data, tmp_path):
    """The same on a 2-node cluster (one slurmd per network namespace, one task per node, gloo over the nodes'
    own addresses): ``scancel --signal=USR1`` in iteration 3 -> one checkpoint, requeued, resumed, equal to an
    uninterrupted 2-node run."""
    cwd, cfg = _case(tmp_path, toy_data, iters=ITERS, extra=MARKED)
    with open(tmp_path / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write(PAUSE_HOOK)
    two = slurm_two_nodes
    ref = osp.join(cwd, 'ref')
    env = _env(two, cfg, GPUS_PER_NODE='1', GLOO_SOCKET_IFNAME=two['GLOO_SOCKET_IFNAME'])
    res = subprocess.run(['bash', osp.join(ROOT, 'tools', 'slurm_train.sh'), 'debug', 'ref2n', cfg, ref], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    work = osp.join(cwd, 'requeued')
    env = _env(two, cfg, GPUS_PER_NODE='1', GLOO_SOCKET_IFNAME=two['GLOO_SOCKET_IFNAME'], MARK_AT='3', HOLD='0')
    res = subprocess.run(['bash', osp.join(ROOT, 'tools', 'slurm_train.sh'), '--requeue', '--grace=120', 'debug',
                          'rq-2n', cfg, work], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    job = int(res.stdout.strip().splitlines()[-1])
    t0 = time.time()
    while not all(osp.isfile(osp.join(work, f'at_rank{r}')) for r in (0, 1)):
        assert _job_state(env, job)[0] in ('PENDING', 'RUNNING', 'CONFIGURING'), _output(work, job)
        assert time.time() - t0 < 600, 'the ranks never reached iteration 3'
        time.sleep(0.05)
    assert _job_field(env, job, 'NumNodes') == '2' and _job_field(env, job, 'NodeList') == 'node[0-1]'
    subprocess.run(['scancel', '--signal=USR1', str(job)], env=env, check=True, timeout=30)
    _wait_state(env, job, lambda s: s[1] >= 1 and s[0] == 'PENDING', what='the requeue')
    stop, state, log = _release_the_requeued_job(env, job, work)
    assert state == ('COMPLETED', 1), log[-4000:]
    assert f'iter_{stop}.pth' in log.split('(restart 1)')[1], log[-4000:]
    assert_same_run(ref, work, ITERS, with_ema=True)
