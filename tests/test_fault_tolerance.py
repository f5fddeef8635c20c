"""Training survives SIGKILL: atomic checkpoints, --resume picks the last complete one, and the resumed run
ends with the same weights and metrics as an uninterrupted one (issue 8, item 3)."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from toolcfg import RESNET18_CLS, repo_path, write_cfg

TRAIN = repo_path('tools', 'train.py')
ITERS, CKPT_EVERY, PAUSE_AT = 8, 2, 5

PAUSE_HOOK = '''
import os, time
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class PauseForKillHook(Hook):
    """With PAUSE_STAMP set: after iteration {at} (between two checkpoints) announce it and wait to be killed."""
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        stamp = os.environ.get('PAUSE_STAMP')
        if stamp and runner.iter + 1 == {at}:
            from mmengine.dist import get_rank
            if get_rank() == 0:
                open(stamp, 'w').close()
            time.sleep(600)
'''.format(at=PAUSE_AT)


def _cfg(tmp_path, toy_data, name='ft.py'):
    (tmp_path / 'pause_hook.py').write_text(PAUSE_HOOK)
    return write_cfg(tmp_path / name, RESNET18_CLS, toy_data, iters=ITERS, ckpt=CKPT_EVERY, val=True,
                     extra="""
                     custom_imports = dict(imports=['pause_hook'], allow_failed_imports=False)
                     custom_hooks = [dict(type='PauseForKillHook')]
                     """)


def _top1(log):
    found = re.findall(r'accuracy/top1: ([0-9.]+)', log)
    assert found, log[-2000:]
    return found[-1]


def _launch(cmd, tmp_path, stamp=None):
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(tmp_path))
    if stamp:
        env['PAUSE_STAMP'] = str(stamp)
    return subprocess.Popen(cmd, cwd=repo_path(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _kill_when_paused(proc, stamp, timeout=240):
    t0 = time.time()
    while not stamp.exists():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() - t0 < timeout, 'training never reached the pause point'
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole process group: launcher and every rank
    proc.wait(timeout=30)
    assert proc.returncode != 0


def _run_and_resume(cmd_train, cmd_resume, tmp_path):
    work = tmp_path / 'killed'
    stamp = tmp_path / 'paused'
    _kill_when_paused(_launch(cmd_train + ['--work-dir', str(work)], tmp_path, stamp), stamp)
    assert (work / f'iter_{PAUSE_AT - 1}.pth').is_file() and not (work / f'iter_{ITERS}.pth').exists()
    resumed = _launch(cmd_resume + ['--work-dir', str(work), '--resume'], tmp_path)
    out = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, out[-3000:]
    assert f'iter_{PAUSE_AT - 1}.pth' in out  # resumed from the last complete checkpoint
    return work, out


def _assert_same(work_a, log_a, work_b, log_b):
    from mmposmlp.utils.compat import safe_torch_load
    a = safe_torch_load(str(work_a / f'iter_{ITERS}.pth'))
    b = safe_torch_load(str(work_b / f'iter_{ITERS}.pth'))
    assert a['meta']['iter'] == b['meta']['iter'] == ITERS
    assert a['state_dict'].keys() == b['state_dict'].keys()
    for k in a['state_dict']:
        assert torch.equal(a['state_dict'][k], b['state_dict'][k]), k
    assert _top1(log_a) == _top1(log_b)


@pytest.mark.slow  # ~26 s; in the default suite: test_exact_resume.py (stochastic PosMLP killed mid-iteration,
# mid-write and mid-validation) and test_dist_faults.py (SIGKILL to a launcher's process group)
def test_sigkill_then_resume_equals_uninterrupted(toy_data, tmp_path):
    cfg = _cfg(tmp_path, toy_data)
    cmd = [sys.executable, TRAIN, cfg]
    ref = _launch(cmd + ['--work-dir', str(tmp_path / 'ref')], tmp_path)
    ref_log = ref.communicate(timeout=300)[0]
    assert ref.returncode == 0, ref_log[-3000:]
    work, log = _run_and_resume(cmd, cmd, tmp_path)
    assert not list(work.glob('*.tmp'))
    _assert_same(tmp_path / 'ref', ref_log, work, log)


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted_distributed(toy_data, tmp_path):
    cfg = _cfg(tmp_path, toy_data)
    cmd = ['bash', repo_path('tools', 'dist_train.sh'), cfg, '2']
    env_path = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']
    os.environ['PATH'] = env_path
    ref = _launch(cmd + ['--work-dir', str(tmp_path / 'ref')], tmp_path)
    ref_log = ref.communicate(timeout=400)[0]
    assert ref.returncode == 0, ref_log[-3000:]
    work, log = _run_and_resume(cmd, cmd, tmp_path)
    _assert_same(tmp_path / 'ref', ref_log, work, log)


class _Unpicklable:
    def __reduce__(self):
        raise RuntimeError('simulated crash in the middle of torch.save')


def test_checkpoint_never_half_written_and_last_complete_is_found(tmp_path):
    from mmposmlp.engine.checkpoint import find_last_complete_checkpoint, is_complete_checkpoint
    from mmposmlp.engine.checkpoint import save_checkpoint_atomically as save
    good = tmp_path / 'iter_2.pth'
    save({'state_dict': {'w': torch.ones(1000)}}, str(good))
    (tmp_path / 'last_checkpoint').write_text(str(good))
    bad = tmp_path / 'iter_4.pth'
    with pytest.raises(RuntimeError, match='simulated crash'):
        save({'state_dict': {'w': torch.ones(1000)}, 'z': _Unpicklable()}, str(bad))
    assert not bad.exists()  # only the temporary file may be left behind
    assert is_complete_checkpoint(str(good))
    assert find_last_complete_checkpoint(str(tmp_path)) == str(good)
    # a truncated newer file and an empty pointer (a crash of some other writer): still the complete one
    time.sleep(0.01)
    bad.write_bytes(good.read_bytes()[:500])
    (tmp_path / 'last_checkpoint').write_text('')
    assert not is_complete_checkpoint(str(bad))
    assert find_last_complete_checkpoint(str(tmp_path)) == str(good)
