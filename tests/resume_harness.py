"""Kill a toy training run with SIGKILL at chosen moments, resume it, and compare it with an uninterrupted run.

A kill point is ``KIND:N``:

* ``iter:N``  - in iteration N, after its batch was loaded and before the step (mid-iteration);
* ``val:N``   - in the validation that follows iteration N, after its second batch;
* ``write:N`` - while the checkpoint of iteration N is being written (half its bytes are on disk).

With ``KILL_RANK=R`` in the environment only rank R of a distributed run kills itself.

``run_chain`` runs the config once per kill point (each resuming the previous one with ``--resume``) and
a last time to the end. :func:`assert_same_run` compares final weights, EMA weights, optimizer and
scheduler state, the random states in the final checkpoint and every logged loss and metric.
"""
import glob
import json
import os
import os.path as osp
import subprocess
import sys
import textwrap

import torch

from mmposmlp.utils.compat import safe_torch_load

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TRAIN = osp.join(ROOT, 'tools', 'train.py')

KILL_HOOK = '''
import os, signal
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


def _spec():
    spec = os.environ.get('KILL_AT')
    if not spec:
        return None, None
    only = os.environ.get('KILL_RANK')  # distributed runs: only this rank dies, the others must notice
    if only is not None:
        from mmengine.dist import get_rank
        if get_rank() != int(only):
            return None, None
    kind, n = spec.split(':')
    return kind, int(n)


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def _die_halfway_through_the_next_file_write():
    """The next checkpoint file written dies with half its bytes on disk (wherever it is written)."""
    from mmengine.fileio.backends.local_backend import LocalBackend

    def put(self, obj, filepath):
        with open(filepath, 'wb') as f:
            f.write(obj[:len(obj) // 2])
            f.flush()
            os.fsync(f.fileno())
        _die()

    LocalBackend.put = put


@HOOKS.register_module()
class KillAtHook(Hook):
    priority = 'HIGHEST'

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        kind, n = _spec()
        if kind == 'iter' and runner.iter + 1 == n:
            _die()

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        kind, n = _spec()
        if kind == 'val' and runner.iter == n and batch_idx == 1:
            _die()

    def before_save_checkpoint(self, runner, checkpoint):
        kind, n = _spec()
        if kind == 'write' and checkpoint['meta']['iter'] == n:
            _die_halfway_through_the_next_file_write()
'''

SCHEDULE = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={iters}, val_interval={val})
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval={ckpt}, max_keep_ckpts=-1),
                     logger=dict(type='LoggerHook', interval=1))
log_processor = dict(by_epoch=False, window_size=1)
randomness = dict(seed=0, deterministic=True)
custom_imports = dict(imports=['mmposmlp.models', 'kill_hook'], allow_failed_imports=False)
train_dataloader = dict(num_workers={workers}, persistent_workers=False)
"""


def write_case(dirpath, base_config, extra='', iters=8, ckpt=2, val=4, workers=0):
    """A config in ``dirpath`` that inherits ``base_config`` (absolute path) with the kill hook, an
    iteration-based schedule and ``extra`` (python config text, may set custom_hooks etc.)."""
    os.makedirs(dirpath, exist_ok=True)
    with open(osp.join(dirpath, 'kill_hook.py'), 'w') as f:
        f.write(KILL_HOOK)
    text = f"_base_ = '{base_config}'\n" + SCHEDULE.format(iters=iters, ckpt=ckpt, val=val, workers=workers)
    text += textwrap.dedent(extra)
    if 'custom_hooks' not in extra:
        text += "custom_hooks = [dict(type='KillAtHook')]\n"
    path = osp.join(dirpath, 'case.py')
    with open(path, 'w') as f:
        f.write(text)
    return path


def launch(config, work_dir, cwd, kill_at=None, resume=False, timeout=900, launcher_cmd=None, extra_args=(),
           kill_rank=None):
    """Run ``launcher_cmd`` (default: python tools/train.py) CONFIG [extra_args...] --work-dir WORK_DIR."""
    env = dict(os.environ, OMP_NUM_THREADS='1',
               PYTHONPATH=os.pathsep.join([ROOT, osp.dirname(config), os.environ.get('PYTHONPATH', '')]))
    env['PATH'] = osp.dirname(sys.executable) + os.pathsep + env.get('PATH', '')  # `python` of the shell launchers
    env.pop('KILL_AT', None)
    env.pop('KILL_RANK', None)
    if kill_at:
        env['KILL_AT'] = kill_at
    if kill_rank is not None:
        env['KILL_RANK'] = str(kill_rank)
    cmd = (launcher_cmd or [sys.executable, TRAIN]) + [config]
    if launcher_cmd:  # tools/dist_train.sh CONFIG GPUS ...: GPUS comes first
        cmd += list(extra_args)
    cmd += ['--work-dir', work_dir]
    if not launcher_cmd:
        cmd += list(extra_args)
    if resume:
        cmd.append('--resume')
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def run_chain(config, work_dir, cwd, kills, **kw):
    """Run with each kill point in turn (each resuming the last), then to the end; returns the logs."""
    logs = []
    for i, kill in enumerate(kills):
        rc, log = launch(config, work_dir, cwd, kill_at=kill, resume=i > 0, **kw)
        assert rc != 0, f'the run was not killed at {kill}:\n{log[-3000:]}'
        logs.append(log)
    rc, log = launch(config, work_dir, cwd, resume=bool(kills), **kw)
    assert rc == 0, log[-4000:]
    logs.append(log)
    return logs


def logged_scalars(work_dir):
    """{(mode, step): {key: value}} from every run's vis_data/scalars.json in ``work_dir``; a step logged
    again by a resumed run replaces the earlier entry. Timing keys are dropped."""
    out = {}
    for path in sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json'))):  # timestamped dirs
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                step = rec.pop('step')
                mode = 'train' if any(k.startswith('loss') for k in rec) else 'val'
                out[(mode, step)] = {k: v for k, v in rec.items()
                                     if k not in ('time', 'data_time', 'eta', 'memory', 'iter', 'epoch')}
    return out


def _tensors_equal(a, b, where):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f'{where}: max |diff| {(a.double() - b.double()).abs().max().item()}'
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, sorted(set(a) ^ set(b)))
        for k in a:
            _tensors_equal(a[k], b[k], f'{where}.{k}')
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _tensors_equal(x, y, f'{where}[{i}]')
    else:
        assert a == b, f'{where}: {a!r} != {b!r}'


def final_checkpoint(work_dir, iters):
    return safe_torch_load(osp.join(work_dir, f'iter_{iters}.pth'))


def assert_same_run(ref_dir, work_dir, iters, with_ema=False):
    a, b = final_checkpoint(ref_dir, iters), final_checkpoint(work_dir, iters)
    assert a['meta']['iter'] == b['meta']['iter'] == iters
    keys = ['state_dict', 'optimizer', 'param_schedulers', 'resume_state']
    if with_ema:
        assert 'ema_state_dict' in a
        keys.append('ema_state_dict')
    for k in keys:
        _tensors_equal(a[k], b[k], k)
    sa, sb = logged_scalars(ref_dir), logged_scalars(work_dir)
    assert sa.keys() == sb.keys(), sorted(set(sa) ^ set(sb))
    assert any(mode == 'val' for mode, _ in sa), 'no validation was logged'
    for k in sa:
        assert sa[k] == sb[k], (k, sa[k], sb[k])


def toy_cwd(tmp_path, toy_data):
    """A working directory whose data/toy is the generated toy data (the toy configs read data/toy/...)."""
    os.makedirs(tmp_path / 'data', exist_ok=True)
    if not (tmp_path / 'data' / 'toy').exists():
        os.symlink(toy_data, tmp_path / 'data' / 'toy')
    return str(tmp_path)


def sanity_check_training_moves(ref_dir, iters):
    """The reference run really trained (the weights left the first checkpoint)."""
    first = safe_torch_load(osp.join(ref_dir, 'iter_2.pth'))['state_dict']
    last = final_checkpoint(ref_dir, iters)['state_dict']
    assert any(not torch.equal(first[k], last[k]) for k in first if first[k].is_floating_point())

