"""An epoch-based run (mmdet's default: ``type='EpochBasedTrainLoop'`` with ``CheckpointHook(interval=1)``) told to
stop in the middle of an epoch saves there, exits 99, and ``--resume`` continues it at the next batch of that epoch,
bit-identical to an uninterrupted run: weights, EMA, optimizer, schedulers (an iteration warm-up and an epoch step),
random states, every logged loss, learning rate and metric, and the epoch/batch numbers hooks and logs see.

Default suite: the narrow PosMLP toy classifier (drop path, Mixup/CutMix, EMA), 3 epochs of 6 batches, with
``num_workers=0`` signalled three times in a row (after the last batch of epoch 1, in the middle of epoch 2, in
the validation after epoch 2), with ``num_workers=2`` signalled once in the middle of epoch 2, and with persistent
workers signalled after the last batch of epoch 1 and in the middle of epoch 2; persistent workers also resumed
from an epoch's end. ``slow``: a toy config of every family (Mask R-CNN
PosMLP-T as mmdet's default, PosMLP-Video, Wave-MLP RetinaNet, PVT+PEG FPN, CPVT, IMLP), 2 epochs of 4 batches
signalled in the middle of epoch 2, with ``num_workers`` 0, 2 and 2 persistent.
"""
import os
import os.path as osp
import re

import pytest
from mmengine.config import Config

from mmposmlp.utils.compat import safe_torch_load
from resume_harness import ROOT, _tensors_equal, launch, logged_scalars, toy_cwd, write_case
from test_preemption import PREEMPTED, SIGNAL_HOOK, _case, _preempted_record, _signalled

EPOCHS, BATCHES = 3, 6  # 24 toy images, batch 4
EPOCH_SCHEDULE = """
train_cfg = dict(_delete_=True, type='EpochBasedTrainLoop', max_epochs=3, val_interval=1)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=-1),
                     logger=dict(type='LoggerHook', interval=1))
log_processor = dict(by_epoch=True, window_size=1)
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=8),
                   dict(type='MultiStepLR', by_epoch=True, milestones=[2], gamma=0.5)]
"""


def assert_same_epoch_run(ref_dir, work_dir):
    a, b = (safe_torch_load(osp.join(d, f'epoch_{EPOCHS}.pth')) for d in (ref_dir, work_dir))
    assert a['meta']['iter'] == b['meta']['iter'] == EPOCHS * BATCHES
    for k in ('state_dict', 'ema_state_dict', 'optimizer', 'param_schedulers', 'resume_state'):
        _tensors_equal(a[k], b[k], k)
    sa, sb = logged_scalars(ref_dir), logged_scalars(work_dir)
    assert sa.keys() == sb.keys(), sorted(set(sa) ^ set(sb))
    assert sum(mode == 'train' for mode, _ in sa) == EPOCHS * BATCHES
    assert sum(mode == 'val' for mode, _ in sa) == EPOCHS
    for k in sa:
        assert sa[k] == sb[k], (k, sa[k], sb[k])


def _train_positions(log):
    """``[(epoch, batch), ...]`` of the training log lines (``Epoch(train) [2][4/6]``)."""
    return [(int(e), int(b)) for e, b in re.findall(r'Epoch\(train\)\s*\[(\d+)\]\[\s*(\d+)/\d+\]', log)]


# persistent workers (mmdet's base configs): their random streams run on across epochs
PERSISTENT = "train_dataloader['persistent_workers'] = True\n"


@pytest.fixture(scope='module', params=[(0, ''), (2, ''), (2, PERSISTENT)],
                ids=['workers0', 'workers2', 'workers2-persistent'])
def epoch_case(request, toy_data, tmp_path_factory):
    workers, extra = request.param
    root = tmp_path_factory.mktemp(f'preempt_epoch{workers}')
    cwd, cfg = _case(root, toy_data, workers=workers, extra=EPOCH_SCHEDULE + extra)
    yield _reference(workers, cwd, cfg)
    _remove_checkpoints(root)


def _reference(workers, cwd, cfg):
    ref = osp.join(cwd, 'ref')
    rc, log = launch(cfg, ref, cwd)
    assert rc == 0, log[-4000:]
    assert _train_positions(log)[:BATCHES + 1] == [(1, b) for b in range(1, BATCHES + 1)] + [(2, 1)], log[-3000:]
    first = safe_torch_load(osp.join(ref, 'epoch_1.pth'))['state_dict']
    last = safe_torch_load(osp.join(ref, f'epoch_{EPOCHS}.pth'))['state_dict']
    assert any(not first[k].equal(last[k]) for k in first if first[k].is_floating_point())
    return workers, cwd, cfg, ref


def cfg_text(cfg):
    with open(cfg) as f:
        return f.read()


def test_mid_epoch_signals_resume_bit_identically(epoch_case, monkeypatch):
    workers, cwd, cfg, ref = epoch_case
    work = osp.join(cwd, 'signalled')
    persistent = PERSISTENT in cfg_text(cfg)
    stops = (['iter:6:SIGTERM', 'iter:9:SIGUSR1'] if persistent else ['iter:9:SIGUSR1'] if workers
             else ['iter:6:SIGTERM', 'iter:9:SIGUSR1', 'val:12:SIGTERM'])
    for i, spec in enumerate(stops):
        rc, log = _signalled(cfg, work, cwd, spec, monkeypatch, resume=i > 0)
        assert rc == PREEMPTED, log[-4000:]
        n = int(spec.split(':')[1])
        assert _preempted_record(work)['iter'] == str(n)
        ckpt = safe_torch_load(osp.join(work, f'iter_{n}.pth'))
        assert ckpt['meta']['iter'] == n
        rng = ckpt['resume_state']['rng'][0]
        if spec.startswith('iter:'):
            assert ckpt['meta']['epoch'] == (n - 1) // BATCHES and not ckpt['resume_state']['at_epoch_end']
        else:
            assert ckpt['meta']['epoch'] == n // BATCHES and ckpt['resume_state']['at_epoch_end']
        if n % BATCHES:  # batches of the epoch left: its start's states (the workers' among them), nothing else
            assert 'epoch_start' in rng and 'workers' not in rng
            assert ('workers' in rng['epoch_start']) == (persistent and n > BATCHES)
        else:  # the epoch's batches all trained: the persistent workers' latest states only
            assert 'epoch_start' not in rng and ('workers' in rng) == persistent
    rc, log = launch(cfg, work, cwd, resume=True)
    assert rc == 0, log[-4000:]
    assert f'iter_{n}.pth' in log
    if workers:  # resumed after batch 3 of epoch 2: the log goes on with batch 4, as the uninterrupted run's
        assert _train_positions(log)[0] == (2, 4), log[-3000:]
    else:
        assert 'did not finish before the run stopped' in log  # the validation after epoch 2, again
        assert _train_positions(log)[0] == (3, 1), log[-3000:]
    assert_same_epoch_run(ref, work)


def test_library_epoch_loops_become_the_exact_one():
    """Configs keep mmengine's name (or by_epoch=True); the Runner builds ExactEpochBasedTrainLoop for it."""
    from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop

    from mmposmlp.engine.loops import ExactEpochBasedTrainLoop, exact_epoch_loop_cfg
    for cfg in (dict(type='EpochBasedTrainLoop', max_epochs=2), dict(type='mmengine.EpochBasedTrainLoop'),
                dict(type=EpochBasedTrainLoop), dict(by_epoch=True, max_epochs=2)):
        out = exact_epoch_loop_cfg(cfg)
        assert out['type'] is ExactEpochBasedTrainLoop and 'by_epoch' not in out
    for cfg in (dict(type='IterBasedTrainLoop', max_iters=2), dict(type=IterBasedTrainLoop),
                dict(by_epoch=False, max_iters=2), dict(type='mmdet.CustomLoop')):
        assert exact_epoch_loop_cfg(cfg) == cfg




def test_persistent_workers_resume_an_epoch_end_checkpoint_bit_identically(epoch_case):
    """From the reference run's epoch-1 checkpoint: the persistent workers get the states they had after epoch 1,
    and epochs 2 and 3 train as in the uninterrupted run."""
    workers, cwd, cfg, ref = epoch_case
    if PERSISTENT not in cfg_text(cfg):
        pytest.skip('only the persistent-workers case: the others start their workers every epoch')
    first = safe_torch_load(osp.join(ref, 'epoch_1.pth'))['resume_state']
    assert first['at_epoch_end'] and set(first['rng'][0]['workers']) == {'0', '1'}
    work = osp.join(cwd, 'from_epoch_1')
    rc, log = launch(cfg, work, cwd, extra_args=('--resume', osp.join(ref, 'epoch_1.pth')))
    assert rc == 0, log[-4000:]
    assert _train_positions(log)[0] == (2, 1), log[-3000:]
    a, b = (safe_torch_load(osp.join(d, f'epoch_{EPOCHS}.pth')) for d in (ref, work))
    for k in ('state_dict', 'ema_state_dict', 'optimizer', 'param_schedulers', 'resume_state'):
        _tensors_equal(a[k], b[k], k)

# ---- every family (slow): one toy config each, 2 epochs of 4 batches, signalled in the middle of epoch 2 ----
FAMILY_EPOCHS = """
train_cfg = dict(_delete_=True, type='EpochBasedTrainLoop', max_epochs=2, val_interval=2)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=1, max_keep_ckpts=-1),
                     logger=dict(type='LoggerHook', interval=1))
log_processor = dict(by_epoch=True, window_size=1)
train_dataloader.update(batch_size=2, sampler=dict(type='DefaultSampler', shuffle=True), dataset=dict(indices=8))
val_dataloader = dict(dataset=dict(indices=4))
"""  # update, not a new dict: the harness's num_workers / persistent_workers stay
FAMILY_HOOKS = {'cls': "custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), "
                       "dict(type='SignalAtHook')]\n",
                'other': "custom_hooks = [dict(type='SignalAtHook')]\n"}
FAMILY_CASES = {  # PosMLP (Mask R-CNN, mmdet's default), PosMLP-Video, Wave-MLP, PVT+PEG, CPVT, IMLP
    'posmlp_maskrcnn': 'posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py',
    'posmlp_video': 'posmlp_video/toy/posmlp-video-s_toy-k400.py',
    'wavemlp_retinanet': 'wavemlp/toy/retinanet_wavemlp-t_toy-coco.py',
    'pvt_peg_fpn': 'cpvt/toy/fpn_pvt-peg-t_toy-ade20k.py',
    'cpvt_cls': 'cpvt/toy/cpvt-ti_toy-in1k.py',
    'imlp_cls': 'imlp/toy/deit-ti-imlp_toy-in1k.py',
}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize('workers', [0, 2, 'persistent'])
@pytest.mark.parametrize('case', sorted(FAMILY_CASES))
def test_every_family_signalled_mid_epoch_resumes_bit_identically(case, workers, toy_data, tmp_path, monkeypatch):
    try:
        _family_case(case, workers, toy_data, tmp_path, monkeypatch)
    finally:  # checkpoints of dense models are hundreds of MB each
        _remove_checkpoints(tmp_path)


def _remove_checkpoints(root):
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(('.pth', '.pth.tmp')):
                os.remove(osp.join(dirpath, name))


def _family_case(case, workers, toy_data, tmp_path, monkeypatch):
    cls = case.endswith('_cls')
    cwd = toy_cwd(tmp_path, toy_data)
    extra = FAMILY_EPOCHS + FAMILY_HOOKS['cls' if cls else 'other'] + (PERSISTENT if workers == 'persistent' else '')
    cfg = write_case(str(tmp_path / 'cfg'), osp.join(ROOT, 'configs', FAMILY_CASES[case]), extra,
                     workers=2 if workers == 'persistent' else workers)
    loader = Config.fromfile(cfg, import_custom_modules=False).train_dataloader
    expected = (2, True) if workers == 'persistent' else (workers, False)
    assert (loader.num_workers, loader.persistent_workers) == expected
    with open(tmp_path / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write('import time\n' + SIGNAL_HOOK)
    ref = osp.join(cwd, 'ref')
    rc, log = launch(cfg, ref, cwd)
    assert rc == 0, log[-4000:]
    batches = safe_torch_load(osp.join(ref, 'epoch_1.pth'))['meta']['iter']
    first = safe_torch_load(osp.join(ref, 'epoch_1.pth'))['state_dict']
    a = safe_torch_load(osp.join(ref, 'epoch_2.pth'))
    assert a['meta']['iter'] == 2 * batches and batches >= 2
    assert any(not first[k].equal(a['state_dict'][k]) for k in first if first[k].is_floating_point())
    work = osp.join(cwd, 'signalled')
    stop = batches + batches // 2
    rc, log = _signalled(cfg, work, cwd, f'iter:{stop}:SIGUSR1', monkeypatch, resume=False)
    assert rc == PREEMPTED, log[-4000:]
    assert _preempted_record(work)['iter'] == str(stop)
    rc, log = launch(cfg, work, cwd, resume=True)
    assert rc == 0, log[-4000:]
    assert _train_positions(log)[0] == (2, batches // 2 + 1), log[-3000:]
    b = safe_torch_load(osp.join(work, 'epoch_2.pth'))
    keys = ['state_dict', 'optimizer', 'param_schedulers', 'resume_state'] + (['ema_state_dict'] if cls else [])
    for k in keys:
        _tensors_equal(a[k], b[k], k)
    sa, sb = logged_scalars(ref), logged_scalars(work)
    assert sa.keys() == sb.keys() and any(mode == 'val' for mode, _ in sa), sorted(set(sa) ^ set(sb))
    for k in sa:
        assert sa[k] == sb[k], (k, sa[k], sb[k])
