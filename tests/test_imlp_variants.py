"""IMLP as a drop-in FFN of mmpretrain/mmdet/mmseg backbones: adapters, checkpoints, configs.

Parameter counts are checked against the IMLP paper's Table 1, Table 5 (DeiT-Ti column)
and Tables 6/7 (detector/segmentor), within 1%.
"""
import glob
import os.path as osp
import subprocess
import sys

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CFG_DIR = osp.join(ROOT, 'configs', 'imlp')

import mmposmlp.models  # noqa: E402,F401
from mmposmlp.models.checkpoints import CheckpointMismatchError  # noqa: E402
from mmposmlp.models.layers.imlp import IMLP  # noqa: E402
from mmposmlp.registry import MODELS  # noqa: E402

# Table 1 (+ IMLP rows) and Table 5 of the paper: parameters in M.
TABLE1 = {
    'deit-ti-imlp_4xb256_in1k.py': 5.00, 'deit-s-imlp_4xb256_in1k.py': 18.84,
    'deit-b-imlp_16xb64_in1k.py': 73.66, 'swin-t-imlp_16xb64_in1k.py': 24.29,
    'swin-s-imlp_16xb64_in1k.py': 42.40, 'swin-b-imlp_16xb64_in1k.py': 75.45,
    'poolformer-s12-imlp_32xb128_in1k.py': 9.80, 'poolformer-s24-imlp_32xb128_in1k.py': 17.15,
    'poolformer-s36-imlp_32xb128_in1k.py': 24.50, 'poolformer-m36-imlp_32xb128_in1k.py': 44.19,
    'poolformer-m48-imlp_32xb128_in1k.py': 58.62,
}
TABLE5_DEIT_TI = {1: 4.92, 3: 5.00, 5: 5.15, 7: 5.37}
BIG = ('deit-b', 'swin-b', 'swin-s', 'm36', 'm48', 's36')


def _n(m):
    return sum(p.numel() for p in m.parameters())


def _build_from_config(path, **backbone_overrides):
    """Build ``cfg.model`` under the config's default scope (as the Runner does)."""
    import importlib
    from mmengine.config import Config
    from mmengine.registry import MODELS as ROOT_MODELS
    from mmengine.registry import DefaultScope
    cfg = Config.fromfile(path)
    cfg.model.backbone.update(backbone_overrides)
    scope = cfg.get('default_scope', 'mmengine')
    importlib.import_module(f'{scope}.registry')
    with DefaultScope.overwrite_default_scope(scope):
        return ROOT_MODELS.build(cfg.model)


def _pretrain(name, **kw):
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmposmlp'):
        return MODELS.build(dict(type=f'mmposmlp.{name}', **kw))


# ----------------------------------------------------------------------------- light import
def test_import_mmposmlp_models_does_not_import_downstream_libraries():
    code = ('import sys, mmposmlp.models; '
            'bad = [m for m in ("mmdet", "mmseg", "mmpretrain", "mmaction") if m in sys.modules]; '
            'from mmposmlp.registry import MODELS; assert MODELS.get("SwinTransformerIMLP") is not None; '
            'print(bad); sys.exit(1 if bad else 0)')
    r = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ----------------------------------------------------------------------------- tiny adapters
TINY = {
    'SwinTransformerIMLP': dict(arch=dict(embed_dims=16, depths=[2, 1], num_heads=[1, 2]), img_size=64,
                                window_size=4, out_indices=(0, 1)),
    'VisionTransformerIMLP': dict(arch=dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=64),
                                  img_size=32, patch_size=8, out_type='avg_featmap'),
    'PoolFormerIMLP': dict(arch=dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[4, 4, 4, 4],
                                     layer_scale_init_value=1e-5), out_indices=(0, 2, 4, 6)),
    'DetSwinTransformerIMLP': dict(embed_dims=16, depths=[2, 1], num_heads=[1, 2], strides=(4, 2),
                                   out_indices=(0, 1), window_size=4),
    'SegSwinTransformerIMLP': dict(embed_dims=16, depths=[2, 1], num_heads=[1, 2], strides=(4, 2),
                                   out_indices=(0, 1), window_size=4),
}
UPSTREAM = {
    'SwinTransformerIMLP': ('mmpretrain', 'SwinTransformer'),
    'VisionTransformerIMLP': ('mmpretrain', 'VisionTransformer'),
    'PoolFormerIMLP': ('mmpretrain', 'PoolFormer'), 'DetSwinTransformerIMLP': ('mmdet', 'SwinTransformer'),
    'SegSwinTransformerIMLP': ('mmseg', 'SwinTransformer'),
}


def _upstream(name, **kw):
    import importlib
    lib, cls = UPSTREAM[name]
    mod = importlib.import_module(f'{lib}.models.backbones')
    return getattr(mod, cls)(**kw)


@pytest.mark.parametrize('name', list(TINY))
def test_adapter_forward_and_every_parameter_gets_a_gradient(name):
    torch.manual_seed(0)
    m = _pretrain(name, ffn_cfg=dict(type='mmposmlp.IMLP', kernel_size=3), **TINY[name])
    m.init_weights()
    ffns = [m.get_submodule(n) for n in m.imlp_ffn_names]
    assert ffns and all(isinstance(f, IMLP) for f in ffns)
    assert not any(type(mod).__name__ == 'FFN' for mod in m.modules())
    x = torch.randn(2, 3, 64, 64) if name != 'VisionTransformerIMLP' else torch.randn(2, 3, 32, 48)
    outs = m(x)
    ref = _upstream(name, **TINY[name])
    ref.eval(), m.eval()
    ref_outs = ref(x)
    assert [o.shape for o in outs] == [o.shape for o in ref_outs]
    m.train()
    sum(o.square().mean() for o in m(x)).backward()
    for pname, p in m.named_parameters():
        if p.requires_grad and not pname.endswith('dw_conv.bias'):  # cancelled by train-mode BN
            assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_swin_adapter_passes_the_real_token_grid():
    """Non-square inputs: each IMLP sees its block's hw_shape (H != W), no global state."""
    m = _pretrain('DetSwinTransformerIMLP', **TINY['DetSwinTransformerIMLP'])
    m.eval()
    seen = []
    for n in m.imlp_ffn_names:
        m.get_submodule(n).register_forward_pre_hook(
            lambda mod, args, kwargs: seen.append(tuple(kwargs['hw_shape'])), with_kwargs=True)
    m(torch.randn(1, 3, 32, 64))
    assert seen == [(8, 16), (8, 16), (4, 8)]


def test_imlp_checkpoint_of_mmpretrain_swin_runs_identically_in_mmdet_swin():
    """The documented det/seg recipe: ImageNet Swin+IMLP (mmpretrain) -> mmdet backbone."""
    torch.manual_seed(0)
    kw = dict(ffn_cfg=dict(type='mmposmlp.IMLP', kernel_size=3))
    src = _pretrain('SwinTransformerIMLP', **kw, **TINY['SwinTransformerIMLP'])
    src.init_weights()
    dst = _pretrain('DetSwinTransformerIMLP', **kw, **TINY['DetSwinTransformerIMLP'])
    res = dst.load_state_dict(src.state_dict(), strict=False)
    assert not [k for k in res.missing_keys if not k.startswith('norm')]
    with torch.no_grad():
        for i in (0, 1):
            getattr(dst, f'norm{i}').load_state_dict(getattr(src, f'norm{i}').state_dict())
    src.eval(), dst.eval()
    x = torch.randn(1, 3, 64, 64)
    for a, b in zip(src(x), dst(x)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- checkpoints
def _save_upstream(name, tmp_path, prefix='backbone.'):
    torch.manual_seed(1)
    ref = _upstream(name, **TINY[name])
    sd = {prefix + k: v for k, v in ref.state_dict().items()}
    sd['head.fc.weight'] = torch.zeros(3, 3)
    path = str(tmp_path / f'{name}.pth')
    torch.save({'state_dict': sd, 'meta': {}}, path)
    return path, ref.state_dict()


@pytest.mark.parametrize('name', list(TINY))
def test_plain_checkpoint_loads_all_but_the_ffns(name, tmp_path):
    from mmengine.config import ConfigDict
    path, ref_sd = _save_upstream(name, tmp_path)
    torch.manual_seed(2)
    init_cfg = ConfigDict(type='Pretrained', checkpoint=path)
    if UPSTREAM[name][0] == 'mmpretrain':
        init_cfg.prefix = 'backbone.'
    m = _pretrain(name, init_cfg=init_cfg, **TINY[name])
    m.init_weights()
    rep = m.imlp_load_report
    own = m.state_dict()
    imlp_keys = {k for k in own if any(k.startswith(n + '.') for n in m.imlp_ffn_names)}
    host_ffn = {k for k in ref_sd if any(k.startswith(n + '.') for n in m.imlp_ffn_names)}
    imlp_params = {k for k in imlp_keys if not k.endswith(('running_mean', 'running_var', 'num_batches_tracked'))}
    assert imlp_params <= set(rep['new_imlp_keys']) <= imlp_keys      # reported as newly initialised
    assert set(rep['dropped_host_ffn_keys']) == host_ffn
    assert all(k in imlp_keys for k in rep['missing_keys'])
    for k, v in ref_sd.items():                                       # everything else loaded
        if k not in host_ffn:
            torch.testing.assert_close(own[k], v, msg=k)


@pytest.mark.parametrize('name', ['SwinTransformerIMLP', 'DetSwinTransformerIMLP', 'PoolFormerIMLP'])
def test_checkpoint_missing_backbone_keys_fails_loudly(name, tmp_path):
    from mmengine.config import ConfigDict
    path, ref_sd = _save_upstream(name, tmp_path)
    ckpt = torch.load(path, weights_only=True)
    victim = next(k for k in ckpt['state_dict'] if 'patch_embed' in k)
    del ckpt['state_dict'][victim]
    torch.save(ckpt, path)
    init_cfg = ConfigDict(type='Pretrained', checkpoint=path)
    if UPSTREAM[name][0] == 'mmpretrain':
        init_cfg.prefix = 'backbone.'
    m = _pretrain(name, init_cfg=init_cfg, **TINY[name])
    with pytest.raises(CheckpointMismatchError, match='missing 1 weights'):
        m.init_weights()


# ----------------------------------------------------------------------------- configs
# the LVT hosts (lvt-r*) are our own backbone, not an upstream one: tests/test_lvt.py checks them
ALL_CONFIGS = sorted(osp.basename(p) for p in glob.glob(osp.join(CFG_DIR, '*.py'))
                     if not osp.basename(p).startswith('lvt-'))


def test_every_table1_row_has_a_config():
    assert set(TABLE1) <= set(ALL_CONFIGS)
    assert 'mask-rcnn_swin-t-imlp_fpn_1x_coco.py' in ALL_CONFIGS
    assert 'upernet_swin-t-imlp_8xb2-160k_ade20k-512x512.py' in ALL_CONFIGS


# The DeiT and PoolFormer configs also restore the original methods' training recipes, which mmpretrain's
# configs of the same models changed (checked against the official trainers in tests/test_recipe_parity.py):
# those recipe fields may differ from upstream, nothing else. The Swin configs restore Swin's official
# schedules (and gradient clipping on ImageNet) the same way.
RECIPE_FIELDS = ('optim_wrapper', 'param_scheduler', 'train_cfg', 'train_dataloader', 'val_dataloader',
                 'test_dataloader', 'custom_hooks', 'test_pipeline')
RECIPE_MODEL_FIELDS = ('train_cfg', )


@pytest.mark.parametrize('cfg_name', ALL_CONFIGS)
def test_config_differs_from_upstream_only_in_the_ffn(cfg_name):
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(CFG_DIR, cfg_name))
    base = Config.fromfile(_upstream_config(cfg_name))
    assert cfg.model.backbone.pop('type').startswith('mmposmlp.') and cfg.model.backbone.pop('ffn_cfg')
    assert cfg.pop('runner_type') == 'mmposmlp.Runner' and 'runner_type' not in base
    base.model.backbone.pop('type')
    if cfg_name.startswith(('deit-', 'poolformer-')):
        for c in (cfg, base):
            for k in RECIPE_FIELDS:
                c.pop(k, None)
            for k in RECIPE_MODEL_FIELDS:
                c.model.pop(k, None)
            c.model.backbone.pop('drop_path_rate', None)
            c.model.backbone.pop('frozen_stages', None)  # ours trains the stem as the official code
            c.model.head.pop('loss', None)
    if 'swin' in cfg_name:  # Swin's official schedule (and, on ImageNet, clipping): test_recipe_parity*.py
        for c in (cfg, base):
            c.pop('param_scheduler')
            c.optim_wrapper.pop('clip_grad', None)
    cfg.model.pop('pretrained', None), base.model.pop('pretrained', None)
    for c in (cfg, base):
        c.pop('custom_imports', None)
    assert _unscoped(cfg.to_dict()) == _unscoped(base.to_dict())


def _unscoped(obj):
    """Drop the ``_scope_`` keys mmengine adds to dicts inherited through ``lib::`` bases."""
    if isinstance(obj, dict):
        return {k: _unscoped(v) for k, v in obj.items() if k != '_scope_'}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unscoped(v) for v in obj)
    return obj


# Configs that inherit another size of their family (for its recipe): the upstream config of their own size.
SIZED_UPSTREAM = {
    'deit-s-imlp_4xb256_in1k.py': 'mmpretrain::deit/deit-small_4xb256_in1k.py',
    'deit-b-imlp_16xb64_in1k.py': 'mmpretrain::deit/deit-base_16xb64_in1k.py',
    'swin-s-imlp_16xb64_in1k.py': 'mmpretrain::swin_transformer/swin-small_16xb64_in1k.py',
    'swin-b-imlp_16xb64_in1k.py': 'mmpretrain::swin_transformer/swin-base_16xb64_in1k.py',
    'poolformer-s24-imlp_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-s24_32xb128_in1k.py',
    'poolformer-s36-imlp_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-s36_32xb128_in1k.py',
    'poolformer-m36-imlp_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-m36_32xb128_in1k.py',
    'poolformer-m48-imlp_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-m48_32xb128_in1k.py',
}


def _upstream_config(cfg_name):
    import re
    text = open(osp.join(CFG_DIR, cfg_name)).read()
    base = re.search(r"^_base_ = \[?'(\w+)::([^']+)'", text, re.M)  # alone, or first of a list
    if base:
        assert cfg_name not in SIZED_UPSTREAM, f'{cfg_name} inherits its upstream config directly'
        lib, rel = base.groups()
    else:
        assert cfg_name in SIZED_UPSTREAM, f'{cfg_name} inherits a local config: add its upstream to SIZED_UPSTREAM'
        lib, rel = SIZED_UPSTREAM[cfg_name].split('::')
    import importlib
    pkg = osp.dirname(importlib.import_module(lib).__file__)
    return osp.join(pkg, '.mim', 'configs', rel)


def _check(ours, paper, tol=0.01):
    assert abs(ours / 1e6 - paper) <= tol * paper, f'{ours / 1e6:.3f}M vs paper {paper}M'


@pytest.mark.parametrize('cfg_name', [c for c in TABLE1 if not any(b in c for b in BIG)])
def test_table1_params_small(cfg_name):
    _check(_n(_build_from_config(osp.join(CFG_DIR, cfg_name))), TABLE1[cfg_name])


@pytest.mark.parametrize('cfg_name', [c for c in TABLE1 if any(b in c for b in BIG)])
def test_table1_params_large(cfg_name):
    _check(_n(_build_from_config(osp.join(CFG_DIR, cfg_name))), TABLE1[cfg_name])


@pytest.mark.parametrize('kernel_size', sorted(TABLE5_DEIT_TI))
def test_table5_deit_ti_params_per_kernel_size(kernel_size):
    m = _build_from_config(osp.join(CFG_DIR, 'deit-ti-imlp_4xb256_in1k.py'),
                           ffn_cfg=dict(type='mmposmlp.IMLP', kernel_size=kernel_size))
    _check(_n(m), TABLE5_DEIT_TI[kernel_size])


def test_table5_steps_pin_the_dw_conv_to_the_concatenated_channels():
    """Table 5's steps (0.08/0.15/0.22 M for n = 1->3->5->7) = 12 blocks x 4C channels x (n^2 steps)."""
    C, blocks = 192, 12
    steps = [TABLE5_DEIT_TI[b] - TABLE5_DEIT_TI[a] for a, b in ((1, 3), (3, 5), (5, 7))]
    for (a, b), s in zip(((1, 3), (3, 5), (5, 7)), steps):
        ours = [IMLP(C, kernel_size=k).dw_conv.weight.numel() for k in (a, b)]
        assert abs(blocks * (ours[1] - ours[0]) / 1e6 - s) <= 0.011
        on_2c = blocks * 2 * C * (b * b - a * a) / 1e6
        assert abs(on_2c - s) > 0.03  # the r*C alternative does not fit


@pytest.mark.parametrize('cfg_name,paper_imlp,paper_base', [
    ('mask-rcnn_swin-t-imlp_fpn_1x_coco.py', 44, 48),
    ('upernet_swin-t-imlp_8xb2-160k_ade20k-512x512.py', 56, 60)])
def test_dense_configs_build_and_match_tables_6_7(cfg_name, paper_imlp, paper_base):
    m = _build_from_config(osp.join(CFG_DIR, cfg_name), init_cfg=None)
    base = _build_from_config(_upstream_config(cfg_name), init_cfg=None)
    # the papers round to whole M
    assert abs(_n(m) / 1e6 - paper_imlp) <= 0.5 + 0.01 * paper_imlp, _n(m)
    assert abs(_n(base) / 1e6 - paper_base) <= 0.5 + 0.01 * paper_base, _n(base)
    assert type(m.backbone).__name__ in ('DetSwinTransformerIMLP', 'SegSwinTransformerIMLP')


# ----------------------------------------------------------------------------- FLOPs
TABLE1_FLOPS = {'deit-ti-imlp_4xb256_in1k.py': 1.10, 'swin-t-imlp_16xb64_in1k.py': 3.88,
                'poolformer-s12-imlp_32xb128_in1k.py': 1.48, 'deit-s-imlp_4xb256_in1k.py': 3.93}


def _sdpa_flop_jit(inputs, outputs):
    """fvcore handle for aten::scaled_dot_product_attention: QK^T + AV multiply-adds."""
    from fvcore.nn.jit_handles import get_shape
    q, k, v = (get_shape(x) for x in inputs[:3])
    batch = 1
    for d in q[:-2]:
        batch *= d
    return batch * q[-2] * k[-2] * (q[-1] + v[-1])


def count_flops(model, shape=(1, 3, 224, 224)):
    """fvcore FLOPs (1 multiply-add = 1 FLOP), counting fused attention (mmpretrain's ViT
    uses F.scaled_dot_product_attention, which fvcore skips by default)."""
    from fvcore.nn import FlopCountAnalysis
    model.eval()
    f = FlopCountAnalysis(model, (torch.randn(*shape), ))
    f.set_op_handle('aten::scaled_dot_product_attention', _sdpa_flop_jit)
    f.unsupported_ops_warnings(False)
    f.uncalled_modules_warnings(False)
    return f.total()


@pytest.mark.slow
@pytest.mark.parametrize('cfg_name', sorted(TABLE1_FLOPS))
def test_table1_flops_within_5_percent(cfg_name):
    m = _build_from_config(osp.join(CFG_DIR, cfg_name))
    flops = count_flops(m) / 1e9
    assert abs(flops - TABLE1_FLOPS[cfg_name]) <= 0.05 * TABLE1_FLOPS[cfg_name], flops


# ----------------------------------------------------------------------------- ablation configs
ABLATIONS = {  # Tables 2 and 5 (parameters in M); Tables 3/8 give only accuracies
    'deit-ti-imlp-k1_4xb256_in1k.py': 4.92, 'deit-ti-imlp-k5_4xb256_in1k.py': 5.15,
    'deit-ti-imlp-k7_4xb256_in1k.py': 5.37, 'deit-ti-imlp-channel_4xb256_in1k.py': 4.89,
    'deit-ti-imlp-spatial_4xb256_in1k.py': 5.83, 'deit-ti-imlp-gelu-concat_4xb256_in1k.py': None,
    'deit-ti-agelu_4xb256_in1k.py': None, 'deit-ti-imlp-asoftplus_4xb256_in1k.py': None,
    'deit-ti-imlp-channel-kd_4xb256_in1k.py': 4.89, 'deit-ti-softplus_4xb256_in1k.py': 5.72,  # Tables 2, 8
    'deit-ti-gelu-sum_4xb256_in1k.py': None, 'deit-ti-agelu-sum_4xb256_in1k.py': None,  # Table 4: accuracies only
}


def test_every_ablation_config_is_listed():
    found = sorted(osp.basename(p) for p in glob.glob(osp.join(CFG_DIR, 'ablations', '*.py')))
    assert found == sorted(ABLATIONS)


@pytest.mark.parametrize('cfg_name', sorted(ABLATIONS))
def test_ablation_configs_build(cfg_name):
    m = _build_from_config(osp.join(CFG_DIR, 'ablations', cfg_name))
    ffn = m.backbone.layers[0].ffn
    expect = {'channel': ('channel', 2, False), 'spatial': ('spatial', 4, True),
              'gelu-concat': ('gelu_concat', 2, True), 'agelu_': ('agelu', 4, False)}
    for key, (variant, r, spatial) in expect.items():
        if key in cfg_name:
            assert (ffn.variant, ffn.expansion_ratio, ffn.spatial) == (variant, r, spatial)
    if 'asoftplus' in cfg_name:
        assert type(ffn.acts[0]).__name__ == 'ASoftPlus'
    if ABLATIONS[cfg_name] is not None:
        _check(_n(m), ABLATIONS[cfg_name])


# ----------------------------------------------------------------------------- our own backbones
@pytest.mark.parametrize('typ,kw,n_ffn', [('CPVT', dict(arch='tiny'), 12), ('PVTPEG', dict(arch='tiny'), 8),
                                          ('WaveMLP', dict(arch='T'), 10)])
def test_imlp_as_ffn_of_our_backbones(typ, kw, n_ffn):
    """Wave-MLP (NCHW), PVT+PEG (tokens + hw_shape) and CPVT (cls token + hw_shape) via ffn_cfg."""
    if MODELS.get(typ) is None:
        pytest.skip(f'mmposmlp.{typ} not available')
    torch.manual_seed(0)
    m = MODELS.build(dict(type=f'mmposmlp.{typ}', ffn_cfg=dict(type='mmposmlp.IMLP'), **kw))
    ffns = [x for x in m.modules() if isinstance(x, IMLP)]
    assert len(ffns) == n_ffn
    outs = m(torch.randn(1, 3, 64, 64))
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    sum(o.float().square().mean() for o in outs).backward()
    assert all(f.fc1.weight.grad is not None and f.fc1.weight.grad.abs().sum() > 0 for f in ffns)


def test_deit_cls_token_head_trains_every_parameter():
    """DeiT's cls-token output reaches every IMLP parameter (DDP needs no unused parameters)."""
    torch.manual_seed(0)
    kw = dict(TINY['VisionTransformerIMLP'], out_type='cls_token')
    m = _pretrain('VisionTransformerIMLP', **kw)
    m.eval()  # BN on running stats: the DW conv bias also gets a gradient
    m(torch.randn(2, 3, 32, 32))[0].square().sum().backward()
    unused = [n for n, p in m.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not unused


@pytest.mark.parametrize('name', ['SwinTransformerIMLP', 'DetSwinTransformerIMLP'])
def test_with_cp_deepcopy_and_pickle(name):
    import copy
    import pickle
    torch.manual_seed(0)
    m = _pretrain(name, **TINY[name])
    m_cp = copy.deepcopy(m)
    for blk in (b for s in m_cp.stages for b in s.blocks):
        blk.with_cp = True
    x = torch.randn(1, 3, 64, 64, requires_grad=True)
    ref = sum(o.sum() for o in m(x))
    out = sum(o.sum() for o in m_cp(x))
    torch.testing.assert_close(out, ref)
    g1, = torch.autograd.grad(ref, x)
    g2, = torch.autograd.grad(out, x)
    torch.testing.assert_close(g1, g2)
    m2 = pickle.loads(pickle.dumps(m))
    assert type(m2).__name__ == name and type(m2.stages[0].blocks[0]) is type(m.stages[0].blocks[0])
