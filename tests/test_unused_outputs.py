"""Backbone outputs that the consumer ignores are named after the first iteration (mmposmlp.UnusedOutputsHook):
a warning in one process; under a real two-process DDP run (gloo, tools/dist_train.sh) the job ends with that
sentence before torch's "Expected to have finished reduction" error. The shipped configs have no unused output."""
import glob
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config

from toolcfg import RETINANET, repo_path, write_cfg

ROOT = repo_path()

# a tiny PosMLP (output norms on every requested output) for RetinaNet at mmdet's own start_level=1
POSMLP_SMALL = ("arch=dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups=[2, 4, 8, 16], "
                "mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7])")
RETINANET_POSMLP = RETINANET.replace(
    "model = dict(backbone=dict(init_cfg=None, base_channels=8), "
    "neck=dict(in_channels=[8, 16, 32, 64], out_channels=32),",
    "model = dict(backbone=dict(_delete_=True, type='mmposmlp.PosMLP', out_indices={out_indices}, " + POSMLP_SMALL
    + "),\n             neck=dict(in_channels={in_channels}, start_level={start_level}, out_channels=32),")
assert RETINANET_POSMLP != RETINANET
IGNORED = dict(out_indices=(0, 1, 2, 3), in_channels=[16, 32, 64, 128], start_level=1)  # mmdet's RetinaNet
READ = dict(out_indices=(1, 2, 3), in_channels=[32, 64, 128], start_level=0)  # the fix the message names


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.norm0 = nn.LayerNorm(4)
        self.norm1 = nn.LayerNorm(4)
        self.out_indices = (0, 1)
        self.out_channels = [4, 4]

    def forward(self, x):
        y = self.stem(x)
        return self.norm0(y), self.norm1(y * 2)


class ReadsLast(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = TwoOutputs()
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.backbone(x)[-1]).sum()


def test_probe_finds_the_unread_output_and_its_parameters():
    from mmposmlp.engine.unused_outputs import GradientProbe, unused_message
    model = ReadsLast()
    probe = GradientProbe(model)
    model(torch.randn(2, 4)).backward()
    probe.close()
    assert probe.unused_outputs() == [0]
    assert probe.unused_parameters() == ['backbone.norm0.weight', 'backbone.norm0.bias']
    msg = unused_message(model, probe)
    assert msg.startswith('backbone output 0 (out_indices[0]=0, 4 channels) of TwoOutputs receives no gradient')
    assert "out_indices=(1,)" in msg and 'find_unused_parameters = True' in msg and msg.count('. ') == 0
    # the hooks are gone: a second backward adds nothing
    probe.reached.clear()
    model(torch.randn(2, 4)).backward()
    assert not probe.reached


def test_probe_says_nothing_when_every_parameter_learns():
    from mmposmlp.engine.unused_outputs import GradientProbe, unused_message
    model = ReadsLast()
    model.backbone.norm0.requires_grad_(False)  # frozen parameters are not asked for
    probe = GradientProbe(model)
    model(torch.randn(2, 4)).backward()
    probe.close()
    assert unused_message(model, probe) is None


def _retinanet_model(case):
    from mmposmlp.testing import build_model_from_cfg
    text = RETINANET_POSMLP.format(root='/nonexistent', batch=2, **case)
    cfg = Config.fromstring(text, '.py')
    return build_model_from_cfg(cfg)


def _first_iteration_message(model, scope, **batch):
    from mmposmlp.engine.unused_outputs import GradientProbe, unused_message
    from mmposmlp.testing import train_iterations
    probe = GradientProbe(model)
    train_iterations(model, scope, iters=1, **batch)
    probe.close()
    return unused_message(model, probe)


def test_retinanet_start_level_1_is_named_with_its_fix():
    model, scope = _retinanet_model(IGNORED)
    msg = _first_iteration_message(model, scope, shape=(67, 93))
    assert msg.startswith('backbone output 0 (out_indices[0]=0, 16 channels) of PosMLP receives no gradient '
                          "because the neck FPN's start_level=1, so its parameters backbone.norm0.weight, "
                          'backbone.norm0.bias are unused'), msg
    assert msg.endswith("request only the outputs that are read (the backbone's out_indices=(1, 2, 3) with the "
                        "neck's start_level=0 and in_channels=[32, 64, 128]) or set `find_unused_parameters = "
                        'True` in the config (DDP then searches the graph every iteration).'), msg
    model, scope = _retinanet_model(READ)
    assert _first_iteration_message(model, scope, shape=(67, 93)) is None


def test_deeplabv3plus_in_index_is_named_with_its_fix():
    from mmposmlp.testing import build_model_from_cfg
    cfg = Config.fromstring(
        "_base_ = 'mmseg::deeplabv3plus/deeplabv3plus_r50-d8_4xb4-80k_ade20k-512x512.py'\n"
        "model = dict(pretrained=None, data_preprocessor=dict(size=(67, 93)),\n"
        "    backbone=dict(_delete_=True, type='mmposmlp.PosMLP', out_indices=(0, 1, 2, 3), "
        + POSMLP_SMALL + "),\n"
        "    decode_head=dict(in_channels=128, c1_in_channels=16, channels=16, c1_channels=8, num_classes=3,\n"
        "                     dilations=(1, 2)),\n"
        "    auxiliary_head=dict(in_channels=64, channels=8, num_classes=3))\n", '.py')
    model, scope = build_model_from_cfg(cfg)
    from mmengine.model.utils import revert_sync_batchnorm
    model = revert_sync_batchnorm(model)
    msg = _first_iteration_message(model, scope, shape=(67, 93))
    assert msg.startswith('backbone output 1 (out_indices[1]=1, 32 channels) of PosMLP receives no gradient '
                          "because decode_head DepthwiseSeparableASPPHead's in_index=3 (its c1 branch reads output "
                          "0) and auxiliary_head FCNHead's in_index=2"), msg
    assert "(the backbone's out_indices=(0, 2, 3) with decode_head.in_index=2, auxiliary_head.in_index=1)" in msg


def _sh(args, timeout=420):
    env = dict(os.environ, OMP_NUM_THREADS='1', MMPOSMLP_STALL_TIMEOUT='0')
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
    return subprocess.run(['bash'] + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_ddp_two_processes_end_with_the_sentence_before_torchs_reduction_error(toy_data, tmp_path):
    """Real DDP (2 processes, gloo) under tools/dist_train.sh, which adds the hook to every run (mmposmlp.Runner's
    plugin hooks): iteration 1 runs, the job ends before iteration 2's forward pass."""
    cfg = write_cfg(tmp_path / 'retina.py', RETINANET_POSMLP, toy_data, iters=3, batch=1,
                    **{k: repr(v) for k, v in IGNORED.items()})
    res = _sh([repo_path('tools', 'dist_train.sh'), cfg, '2', '--work-dir', str(tmp_path / 'w')])
    log = res.stdout + res.stderr
    assert res.returncode != 0, log[-3000:]
    assert 'ERROR: Backbone output 0 (out_indices[0]=0, 16 channels) of PosMLP receives no gradient because ' \
           "the neck FPN's start_level=1" in res.stderr, log[-3000:]
    assert 'Expected to have finished reduction' not in log
    assert 'Iter(train) [2/3]' not in log  # it stopped after iteration 1


@pytest.mark.slow
def test_ddp_with_find_unused_parameters_warns_and_trains(toy_data, tmp_path):
    """DDP that searches for unused parameters copes: the sentence is a warning, the job finishes."""
    cfg = write_cfg(tmp_path / 'retina.py', RETINANET_POSMLP, toy_data, iters=3, batch=1,
                    extra='find_unused_parameters = True\n', **{k: repr(v) for k, v in IGNORED.items()})
    res = _sh([repo_path('tools', 'dist_train.sh'), cfg, '2', '--work-dir', str(tmp_path / 'w')])
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-3000:]
    assert 'WARNING - Backbone output 0 (out_indices[0]=0, 16 channels) of PosMLP receives no gradient' in log
    assert 'Iter(train) [3/3]' in log


def test_single_process_warns_and_trains_on(toy_data, tmp_path):
    from toolcfg import run_tool
    cfg = write_cfg(tmp_path / 'retina.py', RETINANET_POSMLP, toy_data, iters=2, batch=1,
                    **{k: repr(v) for k, v in IGNORED.items()})
    res = run_tool([repo_path('tools', 'train.py'), cfg, '--work-dir', str(tmp_path / 'w')], cwd=ROOT)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-3000:]
    assert 'WARNING - Backbone output 0 (out_indices[0]=0, 16 channels) of PosMLP receives no gradient' in log
    assert log.count('receives no gradient') == 1 and 'Iter(train) [2/2]' in log


def test_stock_train_entry_warns_through_the_runner(toy_data, tmp_path, monkeypatch, capsys):
    """A library's own tools/train.py builds ``RUNNERS.build(cfg)`` for a config with a runner_type: the hook is
    one of mmposmlp.Runner's plugin hooks, so the stock entry point says the same sentence."""
    from mmengine.registry import RUNNERS
    cfg_path = write_cfg(tmp_path / 'retina.py', RETINANET_POSMLP, toy_data, iters=1, batch=1,
                         extra="runner_type = 'mmposmlp.Runner'\n", **{k: repr(v) for k, v in IGNORED.items()})
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(cfg_path)
    cfg.work_dir = str(tmp_path / 'w')
    runner = RUNNERS.build(cfg)
    assert 'UnusedOutputsHook' in {type(h).__name__ for h in runner.hooks}
    runner.train()
    out = capsys.readouterr()
    assert 'Backbone output 0 (out_indices[0]=0, 16 channels) of PosMLP receives no gradient' in out.out + out.err


# ---------------------------------------------------------------------------------------------------------------
# the shipped configs: one training step on a small input, every trainable parameter must get a gradient
# ---------------------------------------------------------------------------------------------------------------

def shipped_configs():
    out = []
    for p in sorted(glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)):
        rel = osp.relpath(p, osp.join(ROOT, 'configs'))
        if not {'_base_', 'toy'} & set(rel.split(osp.sep)):
            out.append(rel)
    return out


# RetinaNet's FPN skips the stride-4 level (a config requesting it leaves that output's norm unused); every other
# shipped config is `slow` (full-size models, 15-40 s each)
REPRESENTATIVE = {'posmlp/retinanet_posmlp-t_1x_coco.py', 'wavemlp/retinanet_wavemlp-t_fpn_1x_coco.py'}


def first_step_unused(rel):
    """``unused_message`` of one training step of a shipped config's model (None: every parameter learned)."""
    from mmengine.model.utils import revert_sync_batchnorm

    from mmposmlp.engine.unused_outputs import GradientProbe, unused_message
    from mmposmlp.testing import build_model_from_cfg, train_iterations
    model, scope = build_model_from_cfg(osp.join(ROOT, 'configs', rel))
    model = revert_sync_batchnorm(model)
    kwargs = dict(shape=(64, 96))
    if scope == 'mmaction':
        two_d = type(model).__name__ == 'Recognizer2D'
        kwargs = dict(shape=(64, 64), video_format='NCHW' if two_d else 'NCTHW', clip_len=3 if two_d else 8)
    size = getattr(model.backbone, 'img_size', None)
    if size is not None:  # gMLP, Wave-MLP with fixed grids: the size they were built for
        kwargs['shape'] = tuple(size) if isinstance(size, (tuple, list)) else (size, size)
    probe = GradientProbe(model)
    try:
        train_iterations(model, scope, iters=1, **kwargs)
    finally:
        probe.close()
    return unused_message(model, probe)


@pytest.mark.parametrize('rel', [pytest.param(r, marks=[] if r in REPRESENTATIVE else [pytest.mark.slow])
                                 for r in shipped_configs()])
def test_shipped_config_leaves_no_output_unused(rel):
    assert first_step_unused(rel) is None


def test_representative_configs_exist():
    assert REPRESENTATIVE <= set(shipped_configs())
