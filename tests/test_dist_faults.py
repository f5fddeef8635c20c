"""Distributed faults through tools/dist_train.sh (gloo on CPU; the same code path serves nccl: nothing here
uses the process group): a killed launcher takes every rank along, SIGTERM ends every rank, a dead rank
is named with its exit code, a stopped (hung) rank is named after MMPOSMLP_STALL_TIMEOUT, and a taken
port is retried or reported in one sentence.

In-process (no launcher): the watchdog's line naming a stalled rank is out before that rank is ended and
before the exit, and the node guard records why it kills a worker before it does."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from toolcfg import RESNET18_CLS, repo_path, write_cfg

FAULT_HOOK = '''
import os, signal, time
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class FaultHook(Hook):
    """FAULT=<what>:<iteration>; what: pause (every rank writes its pid and sleeps), kill1 (rank 1
    SIGKILLs itself), stop1 (rank 1 SIGSTOPs itself)."""
    def before_train_iter(self, runner, batch_idx, data_batch=None):
        from mmengine.dist import get_rank
        what, at = os.environ['FAULT'].split(':')
        if runner.iter + 1 != int(at):
            return
        rank = get_rank()
        with open(os.path.join(os.environ['PID_DIR'], f'rank{rank}'), 'w') as f:
            f.write(str(os.getpid()))
        if what == 'pause':
            time.sleep(600)
        elif what == 'kill1' and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        elif what == 'stop1' and rank == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
'''


@pytest.fixture
def fault_cfg(toy_data, tmp_path):
    (tmp_path / 'fault_hook.py').write_text(FAULT_HOOK)
    return write_cfg(tmp_path / 'cfg.py', RESNET18_CLS, toy_data, iters=6, extra="""
        custom_imports = dict(imports=['fault_hook'], allow_failed_imports=False)
        # SIGTERM ends the ranks at once here (not the save on the signal that mmposmlp.Runner adds by default)
        custom_hooks = [dict(type='FaultHook'), dict(type='mmposmlp.PreemptionHook', signals=['SIGUSR2'])]
        """)


def _start(cfg, tmp_path, fault, **env):
    pid_dir = tmp_path / 'pids'
    pid_dir.mkdir(exist_ok=True)
    e = dict(os.environ, OMP_NUM_THREADS='1', FAULT=fault, PID_DIR=str(pid_dir),
             PYTHONPATH=os.pathsep.join([repo_path(), str(tmp_path)]))
    e['PATH'] = os.path.dirname(sys.executable) + os.pathsep + e.get('PATH', '')
    e.update(env)
    proc = subprocess.Popen(['bash', repo_path('tools', 'dist_train.sh'), cfg, '2', '--work-dir',
                             str(tmp_path / 'work')], cwd=repo_path(), env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    return proc, pid_dir


def _wait_for_pids(proc, pid_dir, n=2, timeout=240, settle=0.5):
    """The pids the fault hook wrote (rank order) once ``n`` ranks reached the fault point; ``proc`` is the
    job's launcher, or a list of them (one per node); ``settle`` seconds more pass before it returns."""
    t0 = time.time()
    while len(list(pid_dir.iterdir())) < n:
        for p in proc if isinstance(proc, list) else [proc]:
            if p.poll() is not None:
                out, err = p.communicate()
                pytest.fail(f'the job ended early ({p.returncode}): {(err or out or "")[-3000:]}')
        assert time.time() - t0 < timeout, 'the ranks never reached the fault point'
        time.sleep(0.2)
    time.sleep(settle)
    return [int((pid_dir / f).read_text()) for f in sorted(os.listdir(pid_dir))]


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split(')')[-1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def _wait_gone(pids, seconds):
    t0 = time.time()
    while any(_alive(p) for p in pids) and time.time() - t0 < seconds:
        time.sleep(0.2)
    return time.time() - t0


def _cleanup(pids):
    for p in pids:
        if _alive(p):
            os.kill(p, signal.SIGKILL)


def test_sigkill_to_the_launcher_process_group_ends_every_rank(fault_cfg, tmp_path):
    proc, pid_dir = _start(fault_cfg, tmp_path, 'pause:2')
    pids = _wait_for_pids(proc, pid_dir)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        took = _wait_gone(pids, 20)
        assert not any(_alive(p) for p in pids), f'ranks still running {took:.1f} s after the launcher was killed'
        print(f'every rank gone {took:.1f} s after SIGKILL to the launcher process group')
    finally:
        _cleanup(pids)


def test_sigterm_to_the_launcher_ends_every_rank(fault_cfg, tmp_path):
    """What `timeout` and Slurm send: the launcher stops every rank and says so in one line."""
    proc, pid_dir = _start(fault_cfg, tmp_path, 'pause:2')
    pids = _wait_for_pids(proc, pid_dir)
    try:
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert _wait_gone(pids, 20) < 20
        print(f'launcher and every rank gone {time.time() - t0:.1f} s after SIGTERM')
        assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
        assert 'ERROR: the launcher received SIGTERM: every rank was stopped.' in err
    finally:
        _cleanup(pids)


def test_a_dead_rank_ends_the_job_naming_rank_and_exit_code(fault_cfg, tmp_path):
    proc, pid_dir = _start(fault_cfg, tmp_path, 'kill1:2')
    pids = _wait_for_pids(proc, pid_dir)
    try:
        t0 = time.time()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err[-3000:]
        took = time.time() - t0
        assert took < 60
        print(f'job ended {took:.1f} s after rank 1 died')
        last = err.strip().splitlines()[-1]
        assert last.startswith('ERROR: rank 1 (local rank 1 on ') and \
            last.endswith('exited with code -9 (SIGKILL); the other ranks were stopped.'), err[-3000:]
        assert not any(_alive(p) for p in pids)
    finally:
        _cleanup(pids)


def test_a_stopped_rank_ends_the_job_naming_it(fault_cfg, tmp_path):
    """SIGSTOP = a hung rank: after MMPOSMLP_STALL_TIMEOUT seconds without its heartbeat the other rank
    ends the job with a sentence naming it (and torchrun then stops everyone)."""
    proc, pid_dir = _start(fault_cfg, tmp_path, 'stop1:2', MMPOSMLP_STALL_TIMEOUT='6')
    pids = _wait_for_pids(proc, pid_dir)
    try:
        t0 = time.time()
        _, err = proc.communicate(timeout=180)
        took = time.time() - t0
        assert proc.returncode == 1, err[-3000:]
        assert 'ERROR: rank 1 has stopped sending heartbeats for ' in err, err[-3000:]
        assert 'MMPOSMLP_STALL_TIMEOUT (now 6 s) sets this limit.' in err
        # the launcher then names the first rank torchrun saw end: the watcher (its own exit code) or the
        # stopped rank it SIGKILLed, whichever exit torchrun noticed first
        assert re.search(r'ERROR: rank (0 \(local rank 0 on .* exited with code|1 \(local rank 1 on .*SIGKILL)',
                         err), err[-3000:]
        assert _wait_gone(pids, 10) < 10
        # the watcher SIGKILLs the stopped rank on its own machine: the job does not sit out torchrun's 30 s
        # SIGTERM grace period (a limit with a wide margin over the 6 s timeout, not a timing benchmark)
        assert took < 6 + 25, f'the job took {took:.0f} s to end after the rank stopped'
        print(f'stalled rank detected and job ended after {took:.1f} s')
    finally:
        _cleanup(pids)


def test_stall_timeout_malformed_is_refused(monkeypatch):
    from mmposmlp.utils.dist import LaunchError, stall_timeout
    monkeypatch.setenv('MMPOSMLP_STALL_TIMEOUT', 'soon')
    with pytest.raises(LaunchError, match="MMPOSMLP_STALL_TIMEOUT='soon' is not a number of seconds"):
        stall_timeout()
    monkeypatch.setenv('MMPOSMLP_STALL_TIMEOUT', '0')
    assert stall_timeout() == 0
    monkeypatch.delenv('MMPOSMLP_STALL_TIMEOUT')
    assert 60 <= stall_timeout() <= 600  # "a few minutes"


@pytest.mark.parametrize('auto', [True, False])
def test_port_taken_between_check_and_launch(tmp_path, auto):
    """The race of two jobs picking the same port: the launcher retries a port it picked itself, and
    reports a port the user gave in one sentence (no traceback)."""
    script = tmp_path / 'hello.py'
    script.write_text('import os; print("rank", os.environ["RANK"], "port", os.environ["MASTER_PORT"])\n')
    env = dict(os.environ, PYTHONPATH=repo_path(), OMP_NUM_THREADS='1')
    if auto:
        env['MMPOSMLP_AUTO_PORT'] = '1'
    with socket.socket() as s:
        s.bind(('', 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = subprocess.run([sys.executable, '-m', 'mmposmlp.utils.launch', '--nproc_per_node=1',
                              f'--master_port={port}', str(script)], env=env, capture_output=True, text=True,
                             timeout=120)
    if auto:
        assert res.returncode == 0, res.stderr[-2000:]
        assert 'rank 0 port' in res.stdout and f'port {port}' not in res.stdout
    else:
        assert res.returncode == 1
        assert res.stderr.strip().splitlines()[-1] == (
            f'ERROR: PORT={port} is already in use on {socket.gethostname()} (another job took it): choose '
            'another PORT or unset it to pick a free one.')
        assert 'Traceback' not in res.stderr


# ---- the order in which a stalled rank ends the job, in-process: the line naming it, then its end, then exit ----
FAKE_PID = 4242424  # a process nobody signals: os.kill goes to the test


class _OsSeenByDist:
    """``os`` as :mod:`mmposmlp.utils.dist` sees it: ``kill`` and ``_exit`` go to the test, the rest to ``os``."""

    def __init__(self, kill, exit_):
        self.kill, self._exit = kill, exit_

    def __getattr__(self, name):
        return getattr(os, name)


class _Stderr:
    """``sys.stderr`` that records each write and flush in ``events`` (with ``probe()`` at that moment)."""

    def __init__(self, events, probe):
        self.events, self.probe = events, probe

    def write(self, text):
        self.events.append(('write', text, self.probe()))
        return len(text)

    def flush(self):
        self.events.append(('flush', None, self.probe()))


def _watch_stalled_peer(monkeypatch, identity, probe=lambda store: None):
    """Run rank 0's watchdog of a 2-rank job, in this thread, until it ends the process; rank 1 published
    ``identity`` and one heartbeat in a store of this test, then stopped. Returns the events, in order:
    ``(kind, detail, probe(store))`` for each stderr write and flush, each os.kill and the exit."""
    import datetime
    import threading

    import torch.distributed as tdist

    from mmposmlp.utils import dist
    store = tdist.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=5))
    dog = dist.RankWatchdog(0, 2, timeout=0.2, host='127.0.0.1', port=store.port, period=0.05)
    store.set(f'{dog.prefix}/1/process', identity)
    store.set(f'{dog.prefix}/1', '1')
    events = []

    def kill(pid, sig):
        events.append(('kill', (pid, sig), probe(store)))

    def exit_(code):
        events.append(('exit', code, probe(store)))
        raise SystemExit(code)

    monkeypatch.setattr(dist, 'os', _OsSeenByDist(kill=kill, exit_=exit_))
    monkeypatch.setattr(dist, 'STALLED_ACK_WAIT', 0.2)  # no node guard answers here
    monkeypatch.setattr(sys, 'stderr', _Stderr(events, lambda: probe(store)))
    dog._stop = threading.Event()
    with pytest.raises(SystemExit):
        dog._run()
    monkeypatch.undo()
    return events


def _line_flushed_before(events, index):
    """The text written to stderr before ``events[index]``, if a flush followed its last write, else None."""
    writes = [i for i, e in enumerate(events[:index]) if e[0] == 'write']
    if not writes or not any(e[0] == 'flush' for e in events[writes[-1]:index]):
        return None
    return ''.join(events[i][1] for i in writes)


def test_a_stalled_rank_on_this_machine_is_named_before_it_is_killed(monkeypatch):
    """Killing the stalled rank closes its connections, and this rank's main thread may then die in a collective
    before the watchdog gets on: the line naming the stalled rank must be out (flushed) before the SIGKILL, and
    the exit comes last."""
    from mmposmlp.utils.dist import STALL_EXIT_CODE, RankWatchdog
    host, boot, _ = RankWatchdog._identity().split()
    if boot == '-':
        pytest.skip('no boot id to tell this machine from another (/proc/sys/kernel/random/boot_id)')
    events = _watch_stalled_peer(monkeypatch, f'{host} {boot} {FAKE_PID}')
    kinds = [e[0] for e in events]
    assert kinds.count('kill') == 1 and kinds[-1] == 'exit', events
    assert events[kinds.index('kill')][1] == (FAKE_PID, signal.SIGKILL) and events[-1][1] == STALL_EXIT_CODE
    line = _line_flushed_before(events, kinds.index('kill'))
    assert line is not None and line.startswith('ERROR: rank 1 has stopped sending heartbeats for '), events
    assert line.endswith('MMPOSMLP_STALL_TIMEOUT (now 0.2 s) sets this limit.\n'), line


def test_a_stalled_rank_on_another_machine_is_named_before_its_node_is_asked_to_end_it(monkeypatch):
    """Same order when the stalled rank runs elsewhere: the line first, then the request to that node's
    launcher in the store, then the exit (nothing is signalled from here)."""
    from mmposmlp.utils.dist import STALL_EXIT_CODE, STALLED_KEY
    identity = f'node-elsewhere boot-elsewhere {FAKE_PID}'

    def request(store):
        return store.get(STALLED_KEY).decode() if store.check([STALLED_KEY]) else None

    events = _watch_stalled_peer(monkeypatch, identity, probe=request)
    kinds = [e[0] for e in events]
    assert 'kill' not in kinds and kinds[-1] == 'exit' and events[-1][1] == STALL_EXIT_CODE, events
    assert events[-1][2] == f'1 {identity}', events
    asked = next(i for i, e in enumerate(events) if e[2] is not None)
    line = _line_flushed_before(events, asked)
    assert line is not None and line.startswith('ERROR: rank 1 has stopped sending heartbeats for '), events


def test_node_guard_records_why_before_it_kills(monkeypatch):
    """The launcher explains a worker's SIGKILL from :attr:`NodeGuard.killed` as soon as it sees the worker end:
    the reason is recorded before the signal, and the request is confirmed after it."""
    import datetime
    import threading

    import torch.distributed as tdist

    from mmposmlp.utils import dist
    store = tdist.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=5))
    host, boot, _ = dist.RankWatchdog._identity().split()
    request = f'1 {host} {boot} {FAKE_PID}'
    store.set(dist.STALLED_KEY, request)
    guard = dist.NodeGuard('127.0.0.1', store.port, timeout=5.0, period=0.05)
    guard._stop = threading.Event()
    seen = []

    def kill(pid, sig):
        seen.append((pid, sig, dict(guard.killed), store.check([dist.STALLED_ACK_KEY])))
        guard._stop.set()

    monkeypatch.setattr(dist, '_child_pids', lambda: {FAKE_PID})
    monkeypatch.setattr(dist, 'os', _OsSeenByDist(kill=kill, exit_=None))
    guard._run()
    monkeypatch.undo()
    assert seen == [(FAKE_PID, signal.SIGKILL, {FAKE_PID: (1, 'stalled')}, False)]
    assert store.get(dist.STALLED_ACK_KEY).decode() == request
