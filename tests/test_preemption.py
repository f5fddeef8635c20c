"""A job told to stop (SIGTERM/SIGUSR1) saves where it is, exits with code 99, and ``--resume`` continues it
bit-identically to an uninterrupted run (mmposmlp.PreemptionHook).

Default suite: the narrow PosMLP toy classifier (drop path, Mixup/CutMix, EMA, a warm-up schedule),
``num_workers=0``, signalled three times in a row: SIGUSR1 in iteration 3, SIGTERM in the validation after
iteration 4, and in iteration 7 a signal followed by a second one while the checkpoint is being written (the
job ends at once; the interval checkpoint of iteration 6 stays the one to resume from); and with
``num_workers=2, persistent_workers=True`` signalled after the data's epoch boundary. ``slow``: two processes
through tools/dist_train.sh (SIGTERM to the launcher saves one checkpoint, every rank exits 99 and the resumed
job ends identical to an uninterrupted 2-process one), and a rank that dies instead of agreeing.
"""
import os
import os.path as osp
import re
import signal
import subprocess
import sys
import time

import pytest

from mmposmlp.utils.compat import safe_torch_load
from resume_harness import (ROOT, assert_same_run, launch, logged_scalars, sanity_check_training_moves, toy_cwd,
                            write_case)

ITERS = 8
PREEMPTED = 99
CLS_TOY = osp.join(ROOT, 'configs', 'posmlp', 'toy', 'posmlp-t_toy-in1k.py')
NARROW = """
model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=[32, 64, 128, 256], depths=[2, 2, 2, 2])),
             head=dict(in_channels=256))
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=8)]
custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), dict(type='KillAtHook'),
                dict(type='SignalAtHook'), dict(type='mmposmlp.PreemptionHook', grace_period={grace})]
"""

SIGNAL_HOOK = '''


def _signal_spec():
    spec = os.environ.get('SIGNAL_AT')  # KIND:N:SIGNAL[:second]
    if not spec:
        return None
    only = os.environ.get('SIGNAL_RANK')
    if only is not None:
        from mmengine.dist import get_rank
        if get_rank() != int(only):
            return None
    kind, n, sig, *second = spec.split(':')
    return kind, int(n), getattr(signal, sig), bool(second)


def _signal_again_halfway_through_the_next_file_write(sig):
    from mmengine.fileio.backends.local_backend import LocalBackend

    def put(self, obj, filepath):
        with open(filepath, 'wb') as f:
            f.write(obj[:len(obj) // 2])
            f.flush()
            os.fsync(f.fileno())
        os.kill(os.getpid(), sig)
        time.sleep(30)  # the handler ends the process before this returns

    LocalBackend.put = put


@HOOKS.register_module()
class SignalAtHook(Hook):
    """SIGNAL_AT=iter:N:SIG sends SIG to this process in iteration N (before its step); val:N:SIG in the validation
    after iteration N (after its second batch); a fourth field: a second SIG while the next checkpoint of the
    PreemptionHook is being written."""
    priority = 'HIGHEST'

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        spec = _signal_spec()
        if spec and spec[0] == 'iter' and runner.iter + 1 == spec[1]:
            if spec[3]:
                _signal_again_halfway_through_the_next_file_write(spec[2])
            with open(os.path.join(runner.work_dir, 'signalled_at'), 'w') as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), spec[2])

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        spec = _signal_spec()
        if spec and spec[0] == 'val' and runner.iter == spec[1] and batch_idx == 1:
            os.kill(os.getpid(), spec[2])
'''


def _case(root, toy_data, workers=0, grace=60, iters=ITERS, extra=''):
    cwd = toy_cwd(root, toy_data)
    cfg = write_case(str(root / 'cfg'), CLS_TOY, NARROW.format(grace=grace) + extra, iters=iters, workers=workers)
    with open(root / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write('import time\n' + SIGNAL_HOOK)
    return cwd, cfg


def _signalled(cfg, work, cwd, spec, monkeypatch, resume, **kw):
    monkeypatch.setenv('SIGNAL_AT', spec)
    try:
        return launch(cfg, work, cwd, resume=resume, **kw)
    finally:
        monkeypatch.delenv('SIGNAL_AT')


def _preempted_record(work):
    with open(osp.join(work, 'preempted')) as f:
        return dict(p.split('=', 1) for p in f.read().split())


@pytest.fixture(scope='module')
def narrow(toy_data, tmp_path_factory):
    root = tmp_path_factory.mktemp('preempt_narrow')
    cwd, cfg = _case(root, toy_data)
    ref = osp.join(cwd, 'ref')
    rc, log = launch(cfg, ref, cwd)
    assert rc == 0, log[-4000:]
    sanity_check_training_moves(ref, ITERS)
    return cwd, cfg, ref


def test_signalled_three_times_resumes_bit_identically(narrow, monkeypatch):
    """SIGUSR1 in iteration 3 -> iter_3.pth (no interval checkpoint there); SIGTERM in the validation after
    iteration 4 -> iter_4.pth with that validation run again on resume; a signal in iteration 7 and a second one
    halfway through writing iter_7.pth -> the job ends at once, iter_6.pth (interval) stays; then to the end."""
    cwd, cfg, ref = narrow
    work = osp.join(cwd, 'signalled')
    rc, log = _signalled(cfg, work, cwd, 'iter:3:SIGUSR1', monkeypatch, resume=False)
    assert rc == PREEMPTED, log[-4000:]
    assert 'SIGUSR1: saved' in log and 'stopping after iteration 3 with exit code 99' in log, log[-3000:]
    assert _preempted_record(work)['iter'] == '3' and _preempted_record(work)['signal'] == 'SIGUSR1'
    ckpt = safe_torch_load(osp.join(work, 'iter_3.pth'))
    assert ckpt['meta']['iter'] == 3 and ckpt['resume_state']['world_size'] == 1
    assert 'partial' not in ckpt['resume_state'] and 'ema_state_dict' in ckpt
    with open(osp.join(work, 'last_checkpoint')) as f:
        assert f.read().strip().endswith('iter_3.pth')

    rc, log = _signalled(cfg, work, cwd, 'val:4:SIGTERM', monkeypatch, resume=True)
    assert rc == PREEMPTED, log[-4000:]
    assert 'iter_3.pth' in log and 'stopping after iteration 4' in log
    assert _preempted_record(work)['signal'] == 'SIGTERM'

    rc, log = _signalled(cfg, work, cwd, 'iter:7:SIGTERM:second', monkeypatch, resume=True)
    assert rc == 128 + signal.SIGTERM, log[-4000:]
    assert 'did not finish before the run stopped' in log  # the validation after iteration 4, again
    assert 'a second SIGTERM arrived before the checkpoint was written' in log
    assert not osp.exists(osp.join(work, 'iter_7.pth')) and osp.isfile(osp.join(work, 'iter_7.pth.tmp'))

    rc, log = launch(cfg, work, cwd, resume=True)
    assert rc == 0, log[-4000:]
    assert 'iter_6.pth' in log
    assert_same_run(ref, work, ITERS, with_ema=True)



# ---- persistent data workers with an iteration-based loop ------------------------------------------------------
PERSISTENT_ITERS = 10  # 24 toy images, batch 4: 6 batches per epoch of the data, so the stop is in its second


def test_persistent_workers_iteration_loop_signalled_resumes_bit_identically(toy_data, tmp_path, monkeypatch):
    """``IterBasedTrainLoop`` with ``num_workers=2, persistent_workers=True``: the workers' random streams run on over
    the data's epoch boundary after batch 6. SIGUSR1 in iteration 9 -> iter_9.pth; ``--resume`` loads and drops the 9
    trained batches with the same workers, replaying their streams, and iteration 10 ends bit-identical to the
    uninterrupted run (weights, EMA, optimizer, schedulers, random states, every logged value)."""
    cwd, cfg = _case(tmp_path, toy_data, workers=2, iters=PERSISTENT_ITERS,
                     extra="train_dataloader['persistent_workers'] = True\n")
    from mmengine.config import Config
    loader = Config.fromfile(cfg, import_custom_modules=False).train_dataloader
    assert (loader.num_workers, loader.persistent_workers, loader.sampler.type) == (2, True, 'DefaultSampler')
    ref = osp.join(cwd, 'ref')
    rc, log = launch(cfg, ref, cwd)
    assert rc == 0, log[-4000:]
    assert log.count('Reach the end of the dataloader') == 1, log[-3000:]  # the workers crossed an epoch
    sanity_check_training_moves(ref, PERSISTENT_ITERS)
    work = osp.join(cwd, 'signalled')
    rc, log = _signalled(cfg, work, cwd, 'iter:9:SIGUSR1', monkeypatch, resume=False)
    assert rc == PREEMPTED, log[-4000:]
    assert _preempted_record(work)['iter'] == '9'
    rc, log = launch(cfg, work, cwd, resume=True)
    assert rc == 0, log[-4000:]
    assert 'iter_9.pth' in log and 'Advance dataloader 9 steps' in log, log[-3000:]
    assert_same_run(ref, work, PERSISTENT_ITERS, with_ema=True)


def test_a_signal_outside_training_does_what_it_did_before(tmp_path):
    """Built but not training (e.g. tools/test.py with the hook in custom_hooks): SIGTERM still ends the process."""
    script = tmp_path / 'idle.py'
    script.write_text(f'''
import sys, time
sys.path.insert(0, {ROOT!r})
from mmposmlp.engine.preemption import PreemptionHook
hook = PreemptionHook()
print('ready', flush=True)
time.sleep(60)
''')
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'ready'
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM


def test_unknown_signal_and_bad_grace_are_refused():
    from mmposmlp.engine.preemption import PreemptionHook, parse_signals
    assert parse_signals(['USR1', 'SIGTERM']) == (signal.SIGUSR1, signal.SIGTERM)
    with pytest.raises(ValueError, match="unknown signal 'SIGUSR3'; use some of SIGTERM, SIGUSR1"):
        parse_signals(['SIGUSR3'])
    with pytest.raises(ValueError, match='grace_period=0 must be a positive number of seconds'):
        PreemptionHook(grace_period=0)


# ---- two processes through tools/dist_train.sh ---------------------------------------------------------------
DIST = ['bash', osp.join(ROOT, 'tools', 'dist_train.sh')]
PAUSE_HOOK = '''


@HOOKS.register_module()
class MarkIterHook(Hook):
    """Each rank writes <work_dir>/at_rank<r> (its pid) when iteration MARK_AT begins, then trains on."""
    def before_train_iter(self, runner, batch_idx, data_batch=None):
        from mmengine.dist import get_rank
        if runner.iter + 1 == int(os.environ.get('MARK_AT', '0')):
            with open(os.path.join(runner.work_dir, f'at_rank{get_rank()}'), 'w') as f:
                f.write(str(os.getpid()))
            # HOLD=1: wait here until a stop signal has reached this rank (a test may take minutes to send it)
            hook = [h for h in runner.hooks if type(h).__name__ == 'PreemptionHook']
            while os.environ.get('HOLD') == '1' and hook and hook[0]._received is None:
                time.sleep(0.1)
'''


def _dist_case(root, toy_data, iters=6, extra=''):
    cwd, cfg = _case(root, toy_data, iters=iters, extra="""
custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), dict(type='KillAtHook'),
                dict(type='MarkIterHook'), dict(type='mmposmlp.PreemptionHook', grace_period=60)]
""" + extra)
    with open(root / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write(PAUSE_HOOK)
    return cwd, cfg


def _start_dist(cfg, work, cwd, mark_at, resume=False, **env):
    e = dict(os.environ, OMP_NUM_THREADS='1', MARK_AT=str(mark_at),
             PYTHONPATH=os.pathsep.join([ROOT, osp.dirname(cfg), os.environ.get('PYTHONPATH', '')]))
    e['PATH'] = osp.dirname(sys.executable) + os.pathsep + e.get('PATH', '')
    e.update(env)
    cmd = DIST + [cfg, '2', '--work-dir', work] + (['--resume'] if resume else [])
    return subprocess.Popen(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_marks(proc, work, n=2, timeout=300):
    t0 = time.time()
    while sum(osp.isfile(osp.join(work, f'at_rank{r}')) for r in range(n)) < n:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f'the job ended early ({proc.returncode}): {(err or out)[-3000:]}')
        assert time.time() - t0 < timeout, 'the ranks never reached the mark'
        time.sleep(0.05)


@pytest.mark.slow
def test_two_processes_sigterm_to_the_launcher_saves_once_and_resumes_exactly(toy_data, tmp_path):
    """SIGTERM to tools/dist_train.sh while both ranks are in iteration 3: one checkpoint of the iteration the
    ranks agreed on (4 or 5: the signalled ranks propose their finished iteration + 1, the first proposal wins),
    both ranks exit 99, the launcher says so in one line; --resume ends identical to an uninterrupted run."""
    cwd, cfg = _dist_case(tmp_path, toy_data)
    ref = osp.join(cwd, 'ref')
    p = _start_dist(cfg, ref, cwd, mark_at=0)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-4000:]
    work = osp.join(cwd, 'work')
    p = _start_dist(cfg, work, cwd, mark_at=3)
    _wait_marks(p, work)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=300)
    assert p.returncode == PREEMPTED, (out[-2000:], err[-4000:])
    stop = int(_preempted_record(work)['iter'])
    assert 3 <= stop <= 5
    last = err.strip().splitlines()[-1]
    saved = osp.join(work, f'iter_{stop}.pth')
    assert last == (f'the launcher received SIGTERM: every rank stopped after iteration {stop} and '
                    f'{saved} was saved (exit code 99: continue with --resume).'), err[-3000:]
    ckpt = safe_torch_load(osp.join(work, f'iter_{stop}.pth'))
    assert ckpt['resume_state']['world_size'] == 2 and len(ckpt['resume_state']['rng']) == 2
    p = _start_dist(cfg, work, cwd, mark_at=0, resume=True)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-4000:]
    assert_same_run(ref, work, 6, with_ema=True)


@pytest.mark.slow
def test_a_rank_that_dies_instead_of_agreeing_is_named(toy_data, tmp_path):
    """Rank 1 is SIGKILLed right after the signal reaches rank 0: the job ends with the launcher's one line naming
    rank 1, no checkpoint of the stop is written and the interval checkpoint stays the last complete one."""
    cwd, cfg = _dist_case(tmp_path, toy_data)
    work = osp.join(cwd, 'work')
    p = _start_dist(cfg, work, cwd, mark_at=3)
    _wait_marks(p, work)
    pids = [int(open(osp.join(work, f'at_rank{r}')).read()) for r in (0, 1)]
    os.kill(pids[1], signal.SIGKILL)
    os.kill(pids[0], signal.SIGUSR1)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith('ERROR: rank 1 (local rank 1 on ') and 'exited with code -9 (SIGKILL)' in last, err[-3000:]
    assert not osp.exists(osp.join(work, 'preempted'))
    from mmposmlp.engine.checkpoint import find_last_complete_checkpoint
    assert find_last_complete_checkpoint(work).endswith('iter_2.pth')



STUCK_HOOK = '''


@HOOKS.register_module()
class StuckAtHook(Hook):
    """STUCK_AT=N, STUCK_RANK=R: rank R sleeps for an hour after iteration N (a rank that stops taking part)."""
    priority = 'HIGHEST'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        from mmengine.dist import get_rank
        if runner.iter + 1 == int(os.environ.get('STUCK_AT', '0')) and get_rank() == int(os.environ['STUCK_RANK']):
            time.sleep(3600)
'''


@pytest.mark.slow
def test_a_stuck_rank_does_not_keep_the_others_from_agreeing(toy_data, tmp_path):
    """gloo, 2 processes: rank 1 stops taking part after iteration 3 (asleep, as a rank stuck elsewhere); rank 0,
    signalled in iteration 3, still agrees a stopping point through the store (iteration 4) with no collective,
    waits for that iteration, whose gradient all-reduce cannot finish, and ends the job when its grace period runs
    out, naming the point it waited for: no checkpoint of the stop, the interval checkpoint stays the last one."""
    grace = 20
    cwd, cfg = _dist_case(tmp_path, toy_data, extra=f"""
custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), dict(type='SignalAtHook'),
                dict(type='StuckAtHook'), dict(type='mmposmlp.PreemptionHook', grace_period={grace})]
""")
    with open(tmp_path / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write(STUCK_HOOK)
    work = osp.join(cwd, 'work')
    p = _start_dist(cfg, work, cwd, mark_at=0, SIGNAL_AT='iter:3:SIGUSR1', SIGNAL_RANK='0', STUCK_AT='3',
                    STUCK_RANK='1')
    out, err = p.communicate(timeout=600)  # bounded: a hang would end in the process group's 30 min timeout
    assert p.returncode == 1, (out[-2000:], err[-4000:])
    assert (f'ERROR: rank 0 could not stop and save within the grace period of {grace} s after SIGUSR1 (it waited '
            'for the end of iteration 4, the agreed stopping point)') in err, err[-4000:]
    last = err.strip().splitlines()[-1]
    assert re.search(r'^ERROR: rank [01] \(local rank [01] on .* exited with code', last), err[-3000:]
    assert not osp.exists(osp.join(work, 'preempted')) and not osp.exists(osp.join(work, 'iter_4.pth'))
    from mmposmlp.engine.checkpoint import find_last_complete_checkpoint
    assert find_last_complete_checkpoint(work).endswith('iter_2.pth')


def test_logged_scalars_helper_sees_validation(narrow):
    """The reference run logged its validations (the comparison above would be vacuous otherwise)."""
    _, _, ref = narrow
    assert any(mode == 'val' for mode, _ in logged_scalars(ref))


def test_every_mmposmlp_runner_gets_the_hook_once():
    """mmposmlp.Runner adds the hook to every run (PLUGIN_HOOKS); a configured one is kept with its options."""
    from mmengine.config import Config

    from mmposmlp.engine.runner import PLUGIN_HOOKS, add_plugin_hooks
    assert 'mmposmlp.PreemptionHook' in PLUGIN_HOOKS
    cfg = Config(dict(custom_hooks=[]))
    add_plugin_hooks(cfg)
    add_plugin_hooks(cfg)
    assert [h for h in cfg.custom_hooks if 'Preemption' in h['type']] == [dict(type='mmposmlp.PreemptionHook')]
    cfg = Config(dict(custom_hooks=[dict(type='mmposmlp.PreemptionHook', grace_period=5)]))
    add_plugin_hooks(cfg)
    assert [h for h in cfg.custom_hooks if 'Preemption' in h['type']] == [
        dict(type='mmposmlp.PreemptionHook', grace_period=5)]
