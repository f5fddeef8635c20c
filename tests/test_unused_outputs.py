"""Backbone outputs that the consumer ignores are named after the first iteration (mmposmlp.UnusedOutputsHook):
a warning in one process; under a real two-process DDP run (gloo, tools/dist_train.sh) the job ends with that
sentence before torch's "Expected to have finished reduction" error. The shipped configs have no unused output."""
import copy
import functools
import glob
import inspect
import json
import multiprocessing
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
# the shipped configs: every backbone output they request is read, or has no parameters of its own
# ---------------------------------------------------------------------------------------------------------------

def shipped_configs():
    out = []
    for p in sorted(glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)):
        rel = osp.relpath(p, osp.join(ROOT, 'configs'))
        if not {'_base_', 'toy'} & set(rel.split(osp.sep)):
            out.append(rel)
    return out


def _model_of(rel):
    """``(scope, model dict)`` of a shipped config, with the top-level data preprocessor merged in as
    mmengine's Runner does (mmpretrain's recipes keep Mixup/CutMix and the number of classes there)."""
    cfg = Config.fromfile(osp.join(ROOT, 'configs', rel))
    model = cfg.model.to_dict()
    if cfg.get('data_preprocessor') is not None:
        model.setdefault('data_preprocessor', cfg.data_preprocessor.to_dict())
    return cfg.get('default_scope', 'mmpretrain'), model


@functools.lru_cache(maxsize=None)
def parsed_configs():
    """``{rel: (scope, model dict)}`` of every shipped config; parsed in two processes (mmengine reads every
    metafile of a library for each ``mmdet::``-style base: most of the time of this check)."""
    rels = shipped_configs()
    ctx = multiprocessing.get_context('fork')
    with ctx.Pool(2) as pool:
        return dict(zip(rels, pool.map(_model_of, rels, chunksize=8)))


def _backbone_cfg(model):
    backbone = dict(model['backbone'])
    backbone.pop('init_cfg', None)
    backbone.pop('pretrained', None)
    return backbone


def _build(cfg, scope):
    from mmengine.config import ConfigDict
    from mmengine.registry import DefaultScope

    from mmposmlp.testing import model_registry
    with DefaultScope.overwrite_default_scope(scope):
        return model_registry(scope).build(ConfigDict(cfg))


def _once_per_backbone(fn):
    """``fn(backbone, scope, ...)`` computed once per distinct backbone config (the 1x and 3x schedules of a
    detector share theirs)."""
    results = {}

    def cached(backbone, *args):
        key = (json.dumps(backbone, sort_keys=True, default=str), ) + tuple(map(str, args))
        if key not in results:
            results[key] = fn(backbone, *args)
        return results[key]
    return cached


@_once_per_backbone
def num_outputs(backbone: dict, scope: str) -> int:
    """How many outputs the backbone returns: one per ``out_indices`` entry (the class's default where the
    config gives none; built when the class takes it through ``**kwargs``); a wrapper returning one tensor, 1."""
    from mmengine.registry import DefaultScope

    from mmposmlp.testing import model_registry
    with DefaultScope.overwrite_default_scope(scope):
        cls = model_registry(scope).get(backbone['type'])
    if cls.__name__ == 'SingleTensorBackbone':
        return 1
    out_indices = backbone.get('out_indices', inspect.signature(cls).parameters.get('out_indices'))
    if isinstance(out_indices, inspect.Parameter):
        out_indices = out_indices.default
    if out_indices is None or out_indices is inspect.Parameter.empty:
        out_indices = _build(backbone, scope).out_indices
    return 1 if isinstance(out_indices, int) else len(out_indices)


def _reached(tensor) -> set:
    """ids of the leaf tensors (parameters) the autograd graph of ``tensor`` reaches: what its backward
    would give a gradient."""
    seen, leaves, stack = set(), set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if getattr(node, 'variable', None) is not None:
            leaves.add(id(node.variable))
        stack.extend(n for n, _ in node.next_functions)
    return leaves


def _input_shape(backbone_module, scope, model_type):
    if scope == 'mmaction' and model_type != 'Recognizer2D':
        return (1, 3, 8, 64, 64)
    size = getattr(backbone_module, 'img_size', None)  # gMLP, Wave-MLP with fixed grids: their own size
    if size is not None:
        return (1, 3) + (tuple(size) if isinstance(size, (tuple, list)) else (size, size))
    return (1, 3, 64, 96)


@_once_per_backbone
def parameters_only_of(backbone: dict, scope: str, model_type: str, outputs) -> list:
    """Trainable backbone parameters that reach only ``outputs`` (positions in what ``forward`` returns), from
    the autograd graph of one training-mode forward of the real backbone."""
    torch.manual_seed(0)
    module = _build(backbone, scope)
    module.train()
    outs = module(torch.zeros(_input_shape(module, scope, model_type)))
    outs = outs if isinstance(outs, (tuple, list)) else (outs, )
    reach = [_reached(o) if isinstance(o, torch.Tensor) and o.requires_grad else set() for o in outs]
    others = set().union(*(r for i, r in enumerate(reach) if i not in outputs))
    return [n for n, p in module.named_parameters()
            if p.requires_grad and id(p) in set().union(*(reach[i] for i in outputs)) - others]


def unused_outputs_of(scope, model):
    """``(unread outputs, backbone parameters that reach only them)`` of config ``model``: the outputs its
    consumers do not read, and the parameters that would get no gradient (none: every backbone parameter learns)."""
    from mmposmlp.engine.unused_outputs import outputs_read
    backbone = _backbone_cfg(model)
    num = num_outputs(backbone, scope)
    unread = sorted(set(range(num)) - set(outputs_read(model, num, scope)))
    return unread, parameters_only_of(backbone, scope, model['type'], unread) if unread else []


def test_every_shipped_config_leaves_no_backbone_output_unused():
    """Every shipped config (every family: image, detection, segmentation, video): the outputs its consumers do
    not read (the FPN's level range, the heads' in_index, a classifier's last output) own no parameter."""
    configs = parsed_configs()
    assert len(configs) == len(shipped_configs()) > 300
    found = {}
    for rel, (scope, model) in configs.items():
        unread, unused = unused_outputs_of(scope, model)
        if unused:
            found[rel] = f'outputs {unread} are not read, so {unused} get no gradient'
    assert not found, found


# the consumers of the shipped configs, each once: the reading rule and the parameter reach agree with one real
# training step under the GradientProbe
REPRESENTATIVE = [
    'cpvt/retinanet_pvt-peg-t_fpn_1x_coco.py',  # FPN start_level=1: output 0 unread, no parameters of its own
    'posmlp/retinanet_posmlp-t_1x_coco.py',  # FPN over outputs 1-3
    'posmlp/mask-rcnn_posmlp-t_1x_coco.py',  # two-stage detector, FPN over all four
    'posmlp/upernet_posmlp-t_8xb2-160k_ade20k-512x512.py',  # UPerHead in_index + auxiliary FCNHead in_index
    'posmlp/fpn_posmlp-t_4xb4-80k_ade20k-512x512.py',  # mmseg FPN neck
    'posmlp/tsn_posmlp-t_8xb32-1x1x3-100e_kinetics400-rgb.py',  # Recognizer2D through SingleTensorBackbone
    'posmlp_video/posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py',  # Recognizer3D
    'cpvt/pvt-peg-t-gap_8xb128_in1k.py',  # classifier with a GlobalAveragePooling neck
    'cpvt/cpvt-ti_8xb128_in1k.py',  # classifier without a neck
    'imlp/lvt-r1_8xb128_in1k.py',  # LVT's class-attention head
]


def _small_windows(sizes):
    return [tuple(min(w, 4) for w in size) if isinstance(size, (tuple, list)) else min(size, 4) for size in sizes]


def one_block_per_stage(backbone: dict, scope: str) -> dict:
    """The same backbone (type, widths, gates, out_indices) with one block per stage and windows of at most 4,
    for archs given by name or dict (PosMLP, PosMLP-Video; through wrappers): which outputs a consumer reads and
    which parameters reach them do not depend on depth or window size."""
    from mmengine.registry import DefaultScope

    from mmposmlp.testing import model_registry
    if isinstance(backbone.get('backbone'), dict):
        return dict(backbone, backbone=one_block_per_stage(backbone['backbone'], scope))
    with DefaultScope.overwrite_default_scope(scope):
        cls = model_registry(scope).get(backbone['type'])
    if not inspect.ismethod(getattr(cls, '_parse_arch', None)):  # a classmethod: the arch table without a build
        return backbone
    arch = cls._parse_arch(backbone.get('arch', inspect.signature(cls).parameters['arch'].default))
    arch = dict(arch, depths=[1] * len(arch['depths']))
    if 'window_sizes' in arch:
        arch['window_sizes'] = _small_windows(arch['window_sizes'])
    small = dict(backbone, arch=arch)
    if backbone.get('window_sizes') is not None:
        small['window_sizes'] = _small_windows(backbone['window_sizes'])
    return small


def representative(rel):
    scope, model = parsed_configs()[rel]
    return scope, dict(model, backbone=one_block_per_stage(model['backbone'], scope))


def mutant():
    """RetinaNet with PosMLP-T requesting all four stages while the FPN starts at stage 1 (mmdet's own RetinaNet
    setting): the stage-0 output norm gets no gradient."""
    scope, model = copy.deepcopy(representative('posmlp/retinanet_posmlp-t_1x_coco.py'))
    model['backbone']['out_indices'] = (0, 1, 2, 3)
    model['neck'].update(in_channels=[96] + list(model['neck']['in_channels']), start_level=1)
    return scope, model


def test_a_config_that_requests_an_unread_output_with_its_own_norm_is_found():
    assert unused_outputs_of(*mutant()) == ([0], ['norm0.weight', 'norm0.bias'])


def first_step_probe(scope, model):
    """The GradientProbe of one real training step of ``model`` on a small input (mmseg's padding to the crop
    size is left out: it changes the size of the maps, not which outputs are read)."""
    from mmengine.model.utils import revert_sync_batchnorm

    from mmposmlp.engine.unused_outputs import GradientProbe
    from mmposmlp.testing import train_iterations
    model = copy.deepcopy(model)
    torch.manual_seed(0)
    net = revert_sync_batchnorm(_build(model, scope))
    kwargs = dict(shape=_input_shape(net.backbone, scope, model['type'])[-2:])
    if scope == 'mmseg':
        net.data_preprocessor.size = kwargs['shape']
    if scope == 'mmaction':
        two_d = model['type'] == 'Recognizer2D'
        kwargs.update(video_format='NCHW' if two_d else 'NCTHW', clip_len=3 if two_d else 8)
    probe = GradientProbe(net)
    try:
        train_iterations(net, scope, iters=1, **kwargs)
    finally:
        probe.close()
    return probe


def assert_check_agrees_with_one_step(scope, model):
    probe = first_step_probe(scope, model)
    unread, only_theirs = unused_outputs_of(scope, model)
    assert probe.num_outputs == num_outputs(_backbone_cfg(model), scope)
    # an unread output may still get a gradient through the later stages it feeds; a read one always does
    assert set(probe.unused_outputs()) <= set(unread)
    assert set(probe.unused_parameters()) == {f'backbone.{n}' for n in only_theirs}


@pytest.mark.parametrize('rel', REPRESENTATIVE)
def test_the_config_check_agrees_with_one_real_training_step(rel):
    assert_check_agrees_with_one_step(*representative(rel))


def test_the_config_check_agrees_with_one_real_training_step_on_the_mutant():
    assert_check_agrees_with_one_step(*mutant())


def test_representative_configs_exist():
    assert set(REPRESENTATIVE) <= set(shipped_configs())
