"""A run killed with SIGKILL at any moment and resumed with ``--resume`` ends bit-identical to an
uninterrupted run: weights, EMA weights, optimizer and scheduler state, random states and every logged
loss and metric. Stochastic models on purpose (drop path, Mixup/CutMix, random augmentations, EMA).

The default suite runs the PosMLP toy classifier (its recipe: drop path, Mixup/CutMix, plus EMA; a narrow
backbone of 8 blocks with 32-256 channels: one run takes ~15 s instead of ~40 s) with ``num_workers=0``
killed three times in a row: mid-iteration, while the checkpoint of iteration 6 is being written, then in
the final validation. Marked ``slow``: the PosMLP-T toy killed four times (mid-iteration, mid-validation,
mid-checkpoint-write, final validation), with
``num_workers=2`` across an epoch boundary of the data, the control that shows the comparison fails without
the saved random states, and the matrix of a toy config of every family and task x ``num_workers`` 0/2.
"""
import os
import os.path as osp
import signal
import subprocess
import sys

import pytest
import torch

from mmposmlp.utils.compat import safe_torch_load
from resume_harness import (ROOT, assert_same_run, launch, run_chain, sanity_check_training_moves, toy_cwd,
                            write_case)

ITERS = 8
CLS_TOY = osp.join(ROOT, 'configs', 'posmlp', 'toy', 'posmlp-t_toy-in1k.py')
# EMA (a fast one, so 8 iterations move it), a warm-up schedule whose state matters
CLS_EXTRA = """
custom_hooks = [dict(type='EMAHook', momentum=0.1, priority='ABOVE_NORMAL'), dict(type='KillAtHook')]
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=8)]
"""
KILLS_FOUR = ['iter:3', 'val:4', 'write:8', 'val:8']
# the default test's backbone: the toy's PosMLP (gates, windows, drop path) with 8 narrow blocks
NARROW = """
model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=[32, 64, 128, 256], depths=[2, 2, 2, 2])),
             head=dict(in_channels=256))
"""


@pytest.fixture(scope='module')
def cls_cases(toy_data, tmp_path_factory):
    """{num_workers: (cwd, config)} for the PosMLP-T toy classifier; reference runs are made once, on demand."""
    out = {}
    for workers in (0, 2):
        d = tmp_path_factory.mktemp(f'cls_w{workers}')
        cwd = toy_cwd(d, toy_data)
        out[workers] = (cwd, write_case(str(d / 'cfg'), CLS_TOY, CLS_EXTRA, iters=ITERS, workers=workers))
    return out


@pytest.fixture(scope='module')
def narrow_case(toy_data, tmp_path_factory):
    d = tmp_path_factory.mktemp('cls_narrow')
    return toy_cwd(d, toy_data), write_case(str(d / 'cfg'), CLS_TOY, CLS_EXTRA + NARROW, iters=ITERS)


def _reference(case):
    cwd, cfg = case
    ref = osp.join(cwd, 'ref')
    if not osp.isfile(osp.join(ref, f'iter_{ITERS}.pth')):
        rc, log = launch(cfg, ref, cwd)
        assert rc == 0, log[-4000:]
        sanity_check_training_moves(ref, ITERS)
    return ref


def test_posmlp_classifier_killed_three_times_resumes_bit_identically(narrow_case):
    """Killed in iteration 3 (resumes from iter_2), while iter_6.pth is being written (resumes from iter_4),
    then in the final validation (resumes from iter_8 and runs that validation, which plain mmengine skips)."""
    cwd, cfg = narrow_case
    ref = _reference(narrow_case)
    work = osp.join(cwd, 'killed_three_times')
    logs = run_chain(cfg, work, cwd, ['iter:3', 'write:6', 'val:8'])
    assert 'iter_2.pth' in logs[1] and 'iter_4.pth' in logs[2] and 'iter_8.pth' in logs[3]
    assert 'did not finish before the run stopped' in logs[3]
    assert not [f for f in os.listdir(work) if f.endswith('.tmp')]
    assert_same_run(ref, work, ITERS, with_ema=True)


@pytest.mark.slow
def test_posmlp_classifier_killed_four_times_resumes_bit_identically(cls_cases):
    cwd, cfg = cls_cases[0]
    ref = _reference(cls_cases[0])
    work = osp.join(cwd, 'killed')
    logs = run_chain(cfg, work, cwd, KILLS_FOUR)
    # resumed from the last complete checkpoint each time; the half-written iter_8 was never used
    assert 'iter_2.pth' in logs[1] and 'iter_4.pth' in logs[2] and 'iter_6.pth' in logs[3] and 'iter_8.pth' in logs[4]
    # the interrupted validations ran again (the one after iteration 4 and the final one)
    assert 'did not finish before the run stopped' in logs[2] and 'did not finish before the run stopped' in logs[4]
    assert not [f for f in os.listdir(work) if f.endswith('.pth.tmp') and f != 'iter_8.pth.tmp']
    assert_same_run(ref, work, ITERS, with_ema=True)


@pytest.mark.slow
def test_posmlp_classifier_with_workers_resumes_across_an_epoch_boundary(cls_cases):
    """num_workers=2: the augmentations run in worker processes; killed in iteration 7, the resumed run
    skips a whole epoch (6 batches) and starts the next one, as the uninterrupted run did."""
    cwd, cfg = cls_cases[2]
    ref = _reference(cls_cases[2])
    work = osp.join(cwd, 'killed')
    logs = run_chain(cfg, work, cwd, ['iter:7'])
    assert 'iter_6.pth' in logs[1]
    assert_same_run(ref, work, ITERS, with_ema=True)


@pytest.mark.slow
def test_resume_without_the_state_hook_would_diverge(cls_cases, tmp_path):
    """The comparison can fail: resuming with the random states removed from the checkpoint does not
    reproduce the uninterrupted run (drop path and Mixup/CutMix draw different numbers)."""
    cwd, cfg = cls_cases[0]
    ref = _reference(cls_cases[0])
    work = osp.join(cwd, 'stateless')
    rc, log = launch(cfg, work, cwd, kill_at='iter:7')
    assert rc != 0
    ckpt = osp.join(work, 'iter_6.pth')
    state = safe_torch_load(ckpt)
    del state['resume_state']
    torch.save(state, ckpt)
    rc, log = launch(cfg, work, cwd, resume=True)
    assert rc == 0, log[-3000:]
    assert 'has no random states' in log
    with pytest.raises(AssertionError):
        assert_same_run(ref, work, ITERS, with_ema=True)


def test_kill_in_the_middle_of_a_checkpoint_write_keeps_the_previous_one(tmp_path):
    """SIGKILL while torch.save is writing: the previous checkpoint stays, no file has the final name, and
    --resume picks the previous one. Fails if the save wrote straight to the final name."""
    script = tmp_path / 'writer.py'
    script.write_text(f'''
import os, signal, sys
sys.path.insert(0, {ROOT!r})
import torch
from mmengine.fileio.backends.local_backend import LocalBackend
from mmposmlp.engine.checkpoint import save_checkpoint_atomically

work = sys.argv[1]
save_checkpoint_atomically({{'state_dict': {{'w': torch.ones(1000)}}}}, os.path.join(work, 'iter_2.pth'))
with open(os.path.join(work, 'last_checkpoint'), 'w') as f:
    f.write(os.path.join(work, 'iter_2.pth'))


def put(self, obj, filepath):  # the machine dies with half of the file's bytes written
    with open(filepath, 'wb') as f:
        f.write(obj[:len(obj) // 2])
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


LocalBackend.put = put
save_checkpoint_atomically({{'state_dict': {{'w': torch.zeros(10 ** 6)}}}}, os.path.join(work, 'iter_4.pth'))
''')
    work = tmp_path / 'work'
    work.mkdir()
    res = subprocess.run([sys.executable, str(script), str(work)], capture_output=True, text=True, timeout=120)
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    assert not (work / 'iter_4.pth').exists()
    assert (work / 'iter_4.pth.tmp').stat().st_size > 10 ** 6  # half of the 4 MB file was written
    from mmposmlp.engine.checkpoint import find_last_complete_checkpoint
    assert find_last_complete_checkpoint(str(work)) == str(work / 'iter_2.pth')
    assert torch.equal(torch.load(work / 'iter_2.pth', weights_only=True)['state_dict']['w'], torch.ones(1000))


def test_rng_state_round_trip_is_plain_data(tmp_path):
    """The saved random states load with weights_only=True and restore every stream exactly."""
    import random

    import numpy as np

    from mmposmlp.engine.resume_state import capture_rng_state, restore_rng_state
    torch.manual_seed(3)
    np.random.seed(4)
    random.seed(5)
    np.random.standard_normal()  # a cached gaussian is part of numpy's state
    state = capture_rng_state()
    torch.save({'rng': state}, tmp_path / 's.pth')
    loaded = torch.load(tmp_path / 's.pth', weights_only=True)['rng']
    expected = (torch.rand(5), np.random.standard_normal(5), np.random.rand(3), random.random())
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    restore_rng_state(loaded)
    got = (torch.rand(5), np.random.standard_normal(5), np.random.rand(3), random.random())
    assert torch.equal(expected[0], got[0])
    assert np.array_equal(expected[1], got[1]) and np.array_equal(expected[2], got[2])
    assert expected[3] == got[3]


def test_world_size_change_is_refused_in_one_sentence():
    from types import SimpleNamespace

    from mmposmlp.engine.resume_state import ExactResumeHook, ResumeStateError
    hook = ExactResumeHook()
    warnings = []
    runner = SimpleNamespace(resuming_from='iter_4.pth', cfg={}, logger=SimpleNamespace(warning=warnings.append))
    ckpt = {'resume_state': dict(world_size=2, iter=4, epoch=0, at_epoch_end=False, rng=[{}, {}])}
    with pytest.raises(ResumeStateError) as e:
        hook.after_load_checkpoint(runner, ckpt)
    assert str(e.value) == ('the checkpoint was written by 2 processes and this run has 1: resume with 2 '
                            'processes, or pass --resume-world-size-change (config key '
                            'resume_allow_world_size_change=True) to continue with 1 processes, not '
                            'bit-identically.')
    runner.cfg = {'resume_allow_world_size_change': True}
    hook.after_load_checkpoint(runner, ckpt)
    assert hook._resumed is None and hook._world_change == (2, 1)


def _rank_stream(dataset_len, batch, world, rank, n_batches, drop_last=False, infinite=False):
    """The first ``n_batches`` batches rank ``rank`` of ``world`` draws, as (epoch, index) pairs, through a
    real DataLoader and mmengine's sampler (epochs advanced with set_epoch, as mmengine's loop does)."""
    from mmengine.dataset import DefaultSampler, InfiniteSampler
    from torch.utils.data import DataLoader
    data = list(range(dataset_len))
    cls = InfiniteSampler if infinite else DefaultSampler
    from unittest import mock
    with mock.patch('mmengine.dataset.sampler.get_dist_info', return_value=(rank, world)), \
            mock.patch('mmengine.dataset.sampler.sync_random_seed', return_value=0):
        sampler = cls(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=batch, sampler=sampler, drop_last=drop_last)
    out, epoch = [], 0
    while len(out) < n_batches:
        sampler.set_epoch(epoch) if not infinite else None
        for b in loader:
            if infinite:  # one endless stream of permutations: rank's j-th sample is at position rank + j * world
                j0 = len(out) * batch
                out.append([((rank + (j0 + k) * world) // dataset_len, int(i)) for k, i in enumerate(b)])
            else:
                out.append([(epoch, int(i)) for i in b])
            if len(out) == n_batches:
                break
        epoch += 1
    return out, loader


@pytest.mark.parametrize('n,batch,old,new,iters,drop_last,infinite', [
    (24, 4, 2, 1, 2, False, False), (24, 4, 2, 1, 5, False, False), (24, 4, 1, 2, 4, False, False),
    (30, 3, 2, 1, 7, False, False), (30, 4, 2, 1, 9, True, False), (30, 4, 2, 1, 2, True, False),
    (24, 4, 4, 2, 3, False, False), (24, 4, 2, 1, 5, False, True), (24, 4, 1, 2, 3, False, False)])
def test_world_size_change_skips_what_the_old_processes_consumed(n, batch, old, new, iters, drop_last, infinite):
    """Simulated with real DataLoaders and mmengine's samplers: after ``iters`` iterations of ``old`` processes,
    the ``new`` processes together skip exactly the samples the old ones consumed (when exact), and never a
    sample the old ones had not consumed."""
    from mmposmlp.engine.resume_state import batches_to_skip
    consumed = set()
    for r in range(old):
        consumed |= {s for b in _rank_stream(n, batch, old, r, iters, drop_last, infinite)[0] for s in b}
    _, loader = _rank_stream(n, batch, new, 0, 1, drop_last, infinite)
    skip, exact, count = batches_to_skip(loader, iters, old, new)
    skipped = set()
    for r in range(new):
        skipped |= {s for b in _rank_stream(n, batch, new, r, skip, drop_last, infinite)[0][:skip] for s in b}
    if exact:
        assert skipped == consumed
        assert count == len(consumed)
    else:  # per epoch, off by less than one step (rounding down, or drop_last dropping another tail)
        for e in {e for e, _ in consumed | skipped}:
            cur_c, cur_s = ({s for s in x if s[0] == e} for x in (consumed, skipped))
            assert len(cur_c ^ cur_s) < batch * max(old, new), e
    if (n, batch, old, new, iters) == (24, 4, 2, 1, 2):
        assert (skip, exact) == (4, True)  # mmengine alone would skip 2 batches: 8 samples, not the 16 consumed


# a toy config of every family and task; extra settings keep each case's stochastic parts on
FAMILY_CASES = {
    'posmlp_maskrcnn': ('posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py', ''),
    'posmlp_retinanet': ('posmlp/toy/retinanet_posmlp-t_1x_toy-coco.py', ''),
    'posmlp_fpn': ('posmlp/toy/fpn_posmlp-t_toy-ade20k.py', ''),
    'posmlp_upernet': ('posmlp/toy/upernet_posmlp-t_toy-ade20k.py', ''),
    'wavemlp_retinanet': ('wavemlp/toy/retinanet_wavemlp-t_toy-coco.py', ''),
    'pvt_peg_fpn': ('cpvt/toy/fpn_pvt-peg-t_toy-ade20k.py', ''),
    'cpvt_cls': ('cpvt/toy/cpvt-ti_toy-in1k.py', CLS_EXTRA),
    'imlp_cls': ('imlp/toy/deit-ti-imlp_toy-in1k.py', CLS_EXTRA),
    'cpvt_distilled_cls': ('cpvt/toy/cpvt-ti-distilled_toy-in1k.py', CLS_EXTRA),  # + a frozen teacher
    'posmlp_video': ('posmlp_video/toy/posmlp-video-s_toy-k400.py', ''),
}
DENSE_EXTRA = """
val_dataloader = dict(dataset=dict(indices=4))
"""


@pytest.mark.slow
@pytest.mark.timeout(3600)  # six 8-iteration runs; Mask R-CNN took over 15 min on the loaded 2-vCPU VM
@pytest.mark.parametrize('workers', [0, 2])
@pytest.mark.parametrize('case', sorted(FAMILY_CASES))
def test_every_family_killed_four_times_resumes_bit_identically(case, workers, toy_data, tmp_path):
    rel, extra = FAMILY_CASES[case]
    if not extra and ('coco' in rel or 'ade20k' in rel):
        extra = DENSE_EXTRA
    cwd = toy_cwd(tmp_path, toy_data)
    cfg = write_case(str(tmp_path / 'cfg'), osp.join(ROOT, 'configs', rel), extra, iters=ITERS, workers=workers)
    ref = osp.join(cwd, 'ref')
    rc, log = launch(cfg, ref, cwd)
    assert rc == 0, log[-4000:]
    sanity_check_training_moves(ref, ITERS)
    work = osp.join(cwd, 'killed')
    run_chain(cfg, work, cwd, KILLS_FOUR)
    assert_same_run(ref, work, ITERS, with_ema=bool(extra == CLS_EXTRA))


SAMPLES_HOOK = '''


@HOOKS.register_module()
class RecordSamplesHook(Hook):
    """Each rank appends '<iteration> <sample indices>' of every training batch to samples_rank<r>.txt."""
    def before_train_iter(self, runner, batch_idx, data_batch=None):
        from mmengine.dist import get_rank
        idx = [int(s.sample_idx) for s in data_batch['data_samples']]
        with open(os.path.join(runner.work_dir, f'samples_rank{get_rank()}.txt'), 'a') as f:
            f.write(f"{runner.iter + 1} {' '.join(map(str, idx))}\\n")
'''


def _recorded(work, rank):
    out = {}
    path = osp.join(work, f'samples_rank{rank}.txt')
    with open(path) as f:
        for line in f:
            it, *idx = map(int, line.split())
            out[it] = idx  # a resumed run's record replaces a killed run's
    return out


@pytest.mark.slow  # ~2 min on 2 shared cores
def test_two_process_checkpoint_resumed_with_one_process(toy_data, tmp_path):
    """tools/dist_train.sh, 2 processes (gloo), the stochastic PosMLP-T toy; killed in iteration 3. Resumed with
    1 process: refused in one sentence naming both sizes and the flag. With --resume-world-size-change: the one
    process skips the 16 samples the two consumed (4 batches, not mmengine's 2) and trains on the rest of the
    epoch: mmengine's own sampler order, no sample twice, none left out."""
    from mmengine.dataset import DefaultSampler
    cwd = toy_cwd(tmp_path, toy_data)
    extra = """
custom_hooks = [dict(type='KillAtHook'), dict(type='RecordSamplesHook')]
"""
    cfg = write_case(str(tmp_path / 'cfg'), CLS_TOY, extra, iters=4, ckpt=2, val=100)
    with open(tmp_path / 'cfg' / 'kill_hook.py', 'a') as f:
        f.write(SAMPLES_HOOK)
    work = osp.join(cwd, 'work')
    # rank 0 dies (rank 1 dying first could stop rank 0 while it still writes iter_2.pth)
    rc, log = launch(cfg, work, cwd, kill_at='iter:3', kill_rank=0,
                     launcher_cmd=['bash', osp.join(ROOT, 'tools', 'dist_train.sh')], extra_args=['2'])
    assert rc != 0 and osp.isfile(osp.join(work, 'iter_2.pth')), log[-3000:]
    assert safe_torch_load(osp.join(work, 'iter_2.pth'))['resume_state']['world_size'] == 2
    two = [_recorded(work, r) for r in (0, 1)]

    rc, log = launch(cfg, work, cwd, resume=True)
    assert rc != 0
    msg = [line for line in log.splitlines() if 'processes and this run has' in line]
    assert msg and msg[-1].endswith('the checkpoint was written by 2 processes and this run has 1: resume with 2 '
                                    'processes, or pass --resume-world-size-change (config key '
                                    'resume_allow_world_size_change=True) to continue with 1 processes, not '
                                    'bit-identically.'), log[-3000:]
    assert 'Traceback' not in log

    rc, log = launch(cfg, work, cwd, resume=True, extra_args=['--resume-world-size-change'])
    assert rc == 0, log[-4000:]
    assert 'skipping 4 batches per process, the 16 samples the 2 processes consumed' in log
    one = _recorded(work, 0)
    # mmengine's DefaultSampler order (seed 0, epoch 0) for 1 process; the 2 processes took positions r::2 of it
    order = list(DefaultSampler(list(range(24)), shuffle=True, seed=0))
    assert [two[0][i] for i in (1, 2)] == [order[0:8:2][:4], order[8:16:2][:4]]
    assert [two[1][i] for i in (1, 2)] == [order[1:8:2][:4], order[9:16:2][:4]]
    assert [one[3], one[4]] == [order[16:20], order[20:24]]
    seen = [i for rec in two for it in (1, 2) for i in rec[it]] + one[3] + one[4]
    assert sorted(seen) == list(range(24))  # the epoch exactly once

