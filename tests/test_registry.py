"""mmposmlp's registry: scope, lazy import, and every registered backbone used as
``type='mmposmlp.X'`` inside unmodified upstream configs of each library (build + 2 train steps)."""
import os
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

UPSTREAM = {
    'mmdet': 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py',
    'mmseg': 'mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py',
    'mmpretrain': 'mmpretrain::resnet/resnet18_8xb32_in1k.py',
    'mmaction': 'mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py',
    'mmaction3d': 'mmaction::recognition/i3d/i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb.py',
}

# backbone -> (small kwargs, per-stage channels, scopes it fits). 'mmaction' is a 2D recognizer
# (TSN, through SingleTensorBackbone), 'mmaction3d' a 3D one (I3D head).
IMAGE_SCOPES = ('mmdet', 'mmseg', 'mmpretrain', 'mmaction')
SWIN = dict(embed_dims=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 2, 4])
BACKBONES = {
    'PosMLP': (dict(arch=dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups=[2, 4, 8, 16],
                              mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7])), [16, 32, 64, 128], IMAGE_SCOPES),
    'WaveMLP': (dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[2, 2, 2, 2])),
                [8, 16, 24, 32], IMAGE_SCOPES),
    'PVTPEG': (dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                              mlp_ratios=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1])), [8, 16, 24, 32], IMAGE_SCOPES),
    'CPVT': (dict(arch=dict(embed_dims=32, num_layers=6, num_heads=2, feedforward_channels=64)), [32],
             ('mmpretrain', )),
    'GMLP': (dict(arch=dict(num_layers=2, embed_dims=32, feedforward_channels=64), img_size=(64, 96),
                  out_indices=-1), [32], ('mmpretrain', )),  # fixed input size: the gate mixes the whole grid
    'PosMLPVideo': (dict(arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2, groups=[2, 2, 4, 4],
                                   window_sizes=[(4, 4, 4), (4, 4, 4), (4, 2, 2), (4, 2, 2)])), [8, 16, 16, 32],
                    ('mmaction3d', )),
    'SwinTransformerIMLP': (dict(arch=SWIN, pad_small_map=True), [32, 64, 128, 256], ('mmpretrain', )),
    'SwinPEG': (dict(arch=SWIN, pad_small_map=True), [32, 64, 128, 256], ('mmpretrain', )),
    'VisionTransformerIMLP': (dict(arch=dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
                                   img_size=64), [32], ('mmpretrain', )),
    'PoolFormerIMLP': (dict(arch=dict(layers=[1, 1, 1, 1], embed_dims=[16, 32, 64, 128], mlp_ratios=[2, 2, 2, 2],
                                      layer_scale_init_value=1e-5), out_indices=(6, )),  # index into `network`
                       [16, 32, 64, 128], ('mmpretrain', )),
    'DetSwinTransformerIMLP': (dict(**SWIN), [32, 64, 128, 256], ('mmdet', )),
    'LVT': (dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 2, 4],
                           mlp_ratios=[2, 2, 2, 2], depthwise_mlp=[False, True, True, True], sr_ratios=[8, 4, 2, 1],
                           sa_layers=['csa', 'rasa', 'rasa', 'rasa']), out_norm=True),
            [8, 16, 24, 32], ('mmseg', 'mmpretrain')),  # mmdet left out for the suite's time (~17 s loaded)
    'SegSwinTransformerIMLP': (dict(**SWIN), [32, 64, 128, 256], ('mmseg', )),
}
# single-vector backbones (cls token / pooled): the upstream classifier's GAP neck goes
VECTOR_OUTPUT = {'CPVT', 'VisionTransformerIMLP'}


NOT_BACKBONES = {'SingleTensorBackbone', 'PVTMlp', 'LVTClassAttentionHead'}  # a wrapper, an FFN, a head


def registered_backbones():
    import mmposmlp.models  # noqa: F401
    from mmposmlp.registry import MODELS
    names = set()
    for name, obj in MODELS.module_dict.items():
        module = getattr(obj, '__module__', '') or ''
        if module.startswith('mmposmlp.models.backbones') and name not in NOT_BACKBONES:
            names.add(name)
    return names


def test_registry_scope_and_parent():
    import mmengine.registry as root

    from mmposmlp.registry import MODELS
    assert MODELS.scope == 'mmposmlp'
    assert MODELS.parent is root.MODELS
    assert 'mmposmlp.models' in MODELS._locations


def test_import_is_light_and_types_resolve_lazily():
    """`import mmposmlp` pulls in no downstream library; an mmdet-scoped build of
    'mmposmlp.PosMLP' works without importing mmposmlp first (registry locations)."""
    code = (
        'import sys, mmposmlp\n'
        'bad = [m for m in ("mmdet", "mmseg", "mmaction", "mmpretrain") if m in sys.modules]\n'
        'assert not bad, bad\n'
        'print("light-ok")\n')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert 'light-ok' in out.stdout, out.stderr[-2000:]
    code = (
        'from mmengine.registry import DefaultScope\n'
        'import mmdet.models\n'
        'from mmdet.registry import MODELS\n'
        'with DefaultScope.overwrite_default_scope("mmdet"):\n'
        '    m = MODELS.build(dict(type="mmposmlp.PosMLP", arch="tiny"))\n'
        'print(type(m).__module__)\n')
    out = subprocess.run([sys.executable, '-c', code], cwd='/', capture_output=True, text=True)
    assert 'mmposmlp.models.backbones.posmlp' in out.stdout, out.stderr[-2000:]


def test_every_registered_backbone_is_covered():
    assert registered_backbones() == set(BACKBONES)


def load_upstream(ref: str) -> Config:
    """Load an upstream config by its ``pkg::path`` name, unmodified."""
    import tempfile
    with tempfile.NamedTemporaryFile('w', suffix='.py', delete=False) as f:
        f.write(f'_base_ = {ref!r}\n')
    try:
        return Config.fromfile(f.name)
    finally:
        os.unlink(f.name)


def _swap(scope, name, kwargs, channels):
    cfg = load_upstream(UPSTREAM[scope])
    backbone = dict(type=f'mmposmlp.{name}', **kwargs)
    custom = dict(imports=['mmposmlp.models'], allow_failed_imports=False)
    cfg.merge_from_dict(dict(custom_imports=custom))
    model = cfg.model
    if scope == 'mmdet':
        backbone.update(out_indices=(0, 1, 2, 3))
        model.backbone = backbone
        model.neck.in_channels = channels
        model.roi_head.bbox_head.num_classes = 3
        model.roi_head.mask_head.num_classes = 3
        # fewer sampled RoIs (512 -> 64): the mask head's 4 convs over every positive RoI took 2/3 of a step
        model.train_cfg.rcnn.sampler.num = 64
    elif scope == 'mmseg':
        backbone.update(out_indices=(0, 1, 2, 3))
        model.pretrained = None
        model.backbone = backbone
        model.neck.in_channels = channels
        model.decode_head.num_classes = 3
        model.data_preprocessor.size = (64, 96)  # the config pads every batch to its 512x512 crop
    elif scope == 'mmpretrain':
        if name not in VECTOR_OUTPUT:
            backbone.setdefault('out_indices', (len(channels) - 1, ))
        else:
            model.neck = None
        model.backbone = backbone
        model.head.in_channels = channels[-1]
        model.head.num_classes = 3
    elif scope == 'mmaction':
        backbone.update(out_indices=(len(channels) - 1, ))
        model.backbone = dict(type='mmposmlp.SingleTensorBackbone', backbone=backbone)
        model.cls_head.in_channels = channels[-1]
        model.cls_head.num_classes = 3
    else:  # 3D recognizer
        model.backbone = backbone
        model.cls_head.in_channels = channels[-1]
        model.cls_head.num_classes = 3
    return cfg


CASES = [(name, scope) for name, (_, _, scopes) in BACKBONES.items() for scope in scopes]


@pytest.mark.parametrize('name,scope', CASES, ids=[f'{n}-{s}' for n, s in CASES])
def test_backbone_in_upstream_config_trains(name, scope):
    from mmengine.model.utils import revert_sync_batchnorm

    from mmposmlp.testing import build_model_from_cfg, train_iterations
    kwargs, channels, _ = BACKBONES[name]
    cfg = _swap(scope, name, kwargs, channels)
    model, built_scope = build_model_from_cfg(cfg)
    assert built_scope == ('mmaction' if scope.startswith('mmaction') else scope)
    model = revert_sync_batchnorm(model)
    inner = model.backbone.backbone if scope == 'mmaction' else model.backbone
    assert type(inner).__name__ == name and type(inner).__module__.startswith('mmposmlp.')
    before = {n: p.detach().clone() for n, p in inner.named_parameters()}
    shape = (32, 32) if scope.startswith('mmaction') else (64, 96)
    extra = dict(video_format='NCHW') if scope == 'mmaction' else {}
    losses = train_iterations(model, built_scope, iters=2, shape=shape, **extra)
    assert all(torch.isfinite(torch.tensor(losses)))
    changed = [n for n, p in inner.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, 'no backbone parameter was updated'


def test_unknown_type_is_a_clear_error():
    from mmengine.registry import DefaultScope

    from mmposmlp.testing import model_registry
    registry = model_registry('mmdet')
    with DefaultScope.overwrite_default_scope('mmdet'):
        with pytest.raises(KeyError, match='mmposmlp.PosMLPX is not in the mmdet::model registry'):
            registry.build(dict(type='mmposmlp.PosMLPX'))
