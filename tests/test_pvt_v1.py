"""PVT v1 as options of PVTPEG (CPVT Table 13's PVT-tiny, +PEG and +GAP rows).

Official parity: ``tests/data/pvt_v1_options.pt`` (official github.com/whai362/PVT
``PyramidVisionTransformer``, classification and detection copies, random weights, small arch; see
tests/data/README_options.md) and mmdet's ``PyramidVisionTransformer`` built here with random weights.
"""
import glob
import importlib
import importlib.util
import json
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from mmposmlp.models.backbones.pvt_peg import PVTPEG
from mmposmlp.models.converters.pvt_peg import (convert_pcpvt, convert_pcpvt_head, detect_pcpvt_layout,
                                                official_pvt_v1_arch_to_ours)
from mmposmlp.models.checkpoints import CheckpointMismatchError
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
VECTOR = osp.join(ROOT, 'tests', 'data', 'pvt_v1_options.pt')
SMALL = dict(depths=[1, 1, 2, 1], embed_dims=[8, 16, 16, 32], num_heads=[1, 2, 2, 4], mlp_ratios=[2, 2, 2, 2],
             sr_ratios=[4, 2, 2, 1])
CLS = dict(with_cls_token=True, out_type='cls_token', out_indices=(3, ), norm_after_stage=[False, False, False, True])
TABLES = dict(pos_embed_type='learnable', peg_after_block=None, pretrain_img_size=64)


@pytest.fixture(scope='module')
def vector():
    return torch.load(VECTOR, weights_only=True)


def _official(vector, kind):
    case = vector['cases'][kind]
    return case, official_pvt_v1_arch_to_ours(json.loads(case['arch_json']), dense=kind.startswith('dense'))


def _flat(outs):
    return torch.cat([t.flatten() for t in outs])[None]


@pytest.mark.parametrize('kind', ['cls', 'cls_qk_scale_no_qkv_bias_ln_1e5'])
@pytest.mark.parametrize('dtype,tol', [(torch.float64, 1e-8), (torch.float32, 1e-4)])
def test_official_pvt_v1_classifier_vector(vector, kind, dtype, tol):
    """Official PVT v1 classifier (class token, per-stage tables) at its 64x64 training size and at
    96x80 / 72x104, where every table is resized bilinearly; default options and qkv_bias=False,
    qk_scale, nn.LayerNorm (eps 1e-5)."""
    case, kw = _official(vector, kind)
    assert detect_pcpvt_layout(case['state_dict']) == 'pvt_v1'
    model = PVTPEG(**kw)
    res = model.load_state_dict(convert_pcpvt(case['state_dict']), strict=True)
    assert not res.missing_keys and not res.unexpected_keys
    head = {k: v.to(dtype) for k, v in convert_pcpvt_head(case['state_dict']).items()}
    model = model.to(dtype).eval()
    refs = case['outputs_fp64'] if dtype == torch.float64 else case['outputs_fp32']
    with torch.no_grad():
        for x, ref in zip(vector['inputs'], refs):
            logits = model(x.to(dtype))[0] @ head['fc.weight'].t() + head['fc.bias']
            assert (logits.double() - ref.double()).abs().max().item() < tol


@pytest.mark.parametrize('kind', ['dense', 'dense_f4'])
def test_official_pvt_v1_dense_vector_through_init_cfg(vector, kind, tmp_path):
    """The official detection PVT v1 file (its stage-4 table keeps the unused class-token slot) loads
    through init_cfg; the slot is dropped and the four maps (F4: the last) match in fp64."""
    case, kw = _official(vector, kind)
    assert case['state_dict']['pos_embed4'].shape[1] == 1 + 2 * 2
    path = tmp_path / 'pvt_dense.pth'
    torch.save(case['state_dict'], path)
    model = PVTPEG(**kw, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    model = model.double().eval()
    with torch.no_grad():
        for x, ref in zip(vector['inputs'], case['outputs_fp64']):
            assert (_flat(model(x.double())) - ref).abs().max().item() < 1e-8


def test_classifier_checkpoint_into_dense_backbone(vector, tmp_path):
    """A PVT v1 classifier file feeds the dense backbone only when its class token is dropped on purpose
    (ignore_keys); the table's class-token slot goes with it."""
    case, _ = _official(vector, 'cls')
    _, kw = _official(vector, 'dense')
    path = tmp_path / 'pvt_cls.pth'
    torch.save(case['state_dict'], path)
    with pytest.raises(CheckpointMismatchError, match='cls_token'):
        PVTPEG(**kw, init_cfg=dict(type='Pretrained', checkpoint=str(path), ignore_keys=['norm3.*'])).init_weights()
    model = PVTPEG(**kw, init_cfg=dict(type='Pretrained', checkpoint=str(path), ignore_keys=['norm3.*', 'cls_token']))
    model.init_weights()
    assert torch.equal(model.pos_embeds[3].pos_embed, case['state_dict']['pos_embed4'][:, 1:])
    assert torch.equal(model.pos_embeds[0].pos_embed, case['state_dict']['pos_embed1'])


def test_converter_cli_on_official_pvt_v1(vector, tmp_path):
    mod = load_tool('tools', 'model_converters', 'pcpvt2mmposmlp.py')
    case, kw = _official(vector, 'cls')
    src, dst = tmp_path / 'pvt_tiny.pth', tmp_path / 'out.pth'
    torch.save({'model': case['state_dict']}, src)
    mod.main([str(src), str(dst)])
    out = torch.load(dst, weights_only=True)
    assert out['meta']['source_layout'] == 'pvt_v1'
    model = PVTPEG(**kw, init_cfg=dict(type='Pretrained', checkpoint=str(dst), prefix='backbone.'))
    model.init_weights()  # strict: every key of the classifier's backbone has its place
    assert torch.equal(model.cls_token, case['state_dict']['cls_token'])


@pytest.mark.parametrize('use_abs_pos_embed', [True, False])
def test_mmdet_pvt_v1_converts_exactly(use_abs_pos_embed):
    """mmdet's PyramidVisionTransformer (v1) state dicts load into PVTPEG (tables or none, no PEG) with
    eps 1e-6 in every LayerNorm (mmdet's single norm_cfg) and give the same maps in fp64."""
    from mmdet.models.backbones.pvt import PyramidVisionTransformer
    torch.manual_seed(0)
    src = PyramidVisionTransformer(pretrain_img_size=64, embed_dims=8, num_layers=SMALL['depths'],
                                   num_heads=SMALL['num_heads'], mlp_ratios=SMALL['mlp_ratios'],
                                   sr_ratios=SMALL['sr_ratios'], use_abs_pos_embed=use_abs_pos_embed,
                                   norm_after_stage=True, drop_path_rate=0.)
    with torch.no_grad():
        for p in src.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    src = src.double().eval()
    state = src.state_dict()
    assert detect_pcpvt_layout(state) == 'mmdet_pvt'
    tables = dict(TABLES) if use_abs_pos_embed else dict(peg_after_block=None)
    ours = PVTPEG(SMALL, norm_after_stage=True, norm_cfg=dict(type='LN', eps=1e-6),
                  embed_norm_cfg=dict(type='LN', eps=1e-6), **tables)
    res = ours.load_state_dict(convert_pcpvt(state), strict=True)
    assert not res.missing_keys and not res.unexpected_keys
    ours = ours.double().eval()
    if use_abs_pos_embed:  # a whole mmdet detector file through the CLI: the neck and head dropped on purpose
        import tempfile
        mod = load_tool('tools', 'model_converters', 'pcpvt2mmposmlp.py')
        det = {**{'backbone.' + k: v.float() for k, v in state.items()}, 'neck.lateral_convs.0.conv.weight':
               torch.zeros(1), 'bbox_head.retina_cls.weight': torch.zeros(1)}
        with tempfile.TemporaryDirectory() as tmp:
            torch.save({'state_dict': det, 'meta': {}}, osp.join(tmp, 'det.pth'))
            with pytest.raises(KeyError, match='neck'):
                mod.main([osp.join(tmp, 'det.pth'), osp.join(tmp, 'out.pth')])
            mod.main([osp.join(tmp, 'det.pth'), osp.join(tmp, 'out.pth'), '--ignore-keys', 'neck.*', 'bbox_head.*'])
            out = torch.load(osp.join(tmp, 'out.pth'), weights_only=True)
        assert out['meta']['source_layout'] == 'mmdet_pvt'
        assert set(out['state_dict']) == {'backbone.' + k for k in ours.state_dict()}
    with torch.no_grad():
        for hw in ((64, 64), (96, 80), (72, 104)):
            x = torch.randn(1, 3, *hw, dtype=torch.float64)
            assert (_flat(src(x)) - _flat(ours(x))).abs().max().item() < 1e-8


def test_mmdet_conv_ffn_checkpoint_is_refused():
    from mmdet.models.backbones.pvt import PyramidVisionTransformer
    state = PyramidVisionTransformer(embed_dims=8, num_layers=[1, 1, 1, 1], use_conv_ffn=True).state_dict()
    with pytest.raises(ValueError, match='use_conv_ffn'):
        convert_pcpvt(state)


def _shared_weights(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return model.double().eval()


def test_each_option_changes_the_output():
    """Starting from the same PVTPEG weights, each PVT v1 option changes the stage maps."""
    x = torch.randn(1, 3, 64, 64, dtype=torch.float64)
    base = _shared_weights(PVTPEG(SMALL))
    ref = base(x)
    variants = dict(no_peg=dict(peg_after_block=None), tables=dict(pos_embed_type='learnable', pretrain_img_size=64),
                    cls_token=dict(with_cls_token=True))
    for name, kw in variants.items():
        model = PVTPEG(SMALL, **kw).double().eval()
        missing = set(model.state_dict()) - set(base.state_dict())
        model.load_state_dict(base.state_dict(), strict=False)
        with torch.no_grad():
            for k in missing:  # the new parameters: nonzero so they act
                model.state_dict()[k].copy_(torch.randn_like(model.state_dict()[k]) * 0.2)
            out = model(x)
        assert out[0].shape == ref[0].shape and out[3].shape == ref[3].shape
        # the class token acts only on the last stage; tables and the PEG from the first
        first = 3 if name == 'cls_token' else 0
        assert torch.equal(out[0], ref[0]) == (first > 0), name
        assert (out[3] - ref[3]).abs().max() > 1e-3, name


def test_cls_token_output_and_learnable_table_resize():
    model = _shared_weights(PVTPEG(SMALL, **CLS, **TABLES))
    x = torch.randn(2, 3, 96, 80, dtype=torch.float64)
    with torch.no_grad():
        (cls, ) = model(x)
    assert cls.shape == (2, 32)
    # the table is resized bilinearly in its own dtype (fp64): equal to F.interpolate of the grid
    pe = model.pos_embeds[1]
    table = pe.table((12, 10))
    grid = pe.pos_embed.reshape(1, 8, 8, -1).permute(0, 3, 1, 2)
    ref = torch.nn.functional.interpolate(grid, size=(12, 10), mode='bilinear', align_corners=False)
    assert table.dtype == torch.float64 and torch.equal(table, ref.flatten(2).transpose(1, 2))
    # the class-token slot of stage 4 is kept first and not resized
    assert torch.equal(model.pos_embeds[3].table((3, 2))[:, :1], model.pos_embeds[3].pos_embed[:, :1])


def test_frozen_stages_cover_tables_and_cls_token():
    model = PVTPEG(SMALL, frozen_stages=4, **CLS, **TABLES)
    model.train()
    assert not any(p.requires_grad for p in model.parameters())
    model = PVTPEG(SMALL, frozen_stages=1, **CLS, **TABLES)
    model.train()
    assert not model.pos_embeds[0].pos_embed.requires_grad and model.pos_embeds[1].pos_embed.requires_grad
    assert model.cls_token.requires_grad


@pytest.mark.parametrize('kw,match', [
    (dict(out_type='cls_token', out_indices=(3, )), r"with_cls_token=True"),
    (dict(with_cls_token=True, out_type='cls_token'), r"out_indices=\(3,\)"),
    (dict(out_type='token'), r"choose one of \('featmap', 'cls_token'\)"),
    (dict(peg_after_block=None, peg_cfg=dict(kernel_size=5)), r'drop peg_cfg'),
    (dict(pretrain_img_size=64), r"pos_embed_type='learnable'"),
    (dict(pos_embed_type='sincos'), r"choose one of \(None, 'learnable'\)"),
    (dict(pos_embed_type='learnable', pretrain_img_size=72), r'divisible by the total patch stride 32'),
])
def test_unsupported_combinations_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        PVTPEG(SMALL, **kw)


@pytest.mark.parametrize('arch,dense,match', [
    (dict(patch_size=8), False, 'patch_size=8'),
    (dict(patch_size=4, num_stages=3, depths=[1, 1, 1]), False, 'num_stages=3'),
    (dict(patch_size=4, img_size=80), False, 'img_size=80'),
    (dict(patch_size=4, F4=True), False, 'dense=True'),
    (dict(patch_size=4, pretrained='x.pth'), True, 'init_cfg'),
    (dict(patch_size=4, norm_layer='nn.BatchNorm1d'), False, 'norm_layer'),
    (dict(patch_size=4, block_cls='Block'), False,
     r"'block_cls' is not an option of the official PyramidVisionTransformer"),
])
def test_official_pvt_v1_options_refused(arch, dense, match):
    with pytest.raises(ValueError, match=match):
        official_pvt_v1_arch_to_ours(arch, dense=dense)


# ---------------------------------------------------------------------- Table 13 configs
TABLE13 = {  # config -> (params, paper params M)
    'pvt-t_8xb128_in1k.py': (13_229_288, 13),  # = official pvt_tiny
    'pvt-t-gap_8xb128_in1k.py': (13_228_264, 13),
    'pvt-peg-t-cls_8xb128_in1k.py': (12_850_152, 13),
    'fpn_pvt-t_4xb4-80k_ade20k-512x512.py': (16_980_886, 17),
    'fpn_pvt-t-gap_4xb4-80k_ade20k-512x512.py': (16_980_886, 17),
    'fpn_pvt-peg-t-cls_4xb4-80k_ade20k-512x512.py': (16_602_262, 17),
    'retinanet_pvt-t_fpn_1x_coco.py': (22_964_212, 23),
    'retinanet_pvt-t_fpn_ms-3x_coco.py': (22_964_212, 23),
    'retinanet_pvt-t-gap_fpn_1x_coco.py': (22_964_212, 23),
    'retinanet_pvt-t-gap_fpn_ms-3x_coco.py': (22_964_212, 23),
    'retinanet_pvt-peg-t-cls_fpn_1x_coco.py': (22_585_588, 23),
    'retinanet_pvt-peg-t-cls_fpn_ms-3x_coco.py': (22_585_588, 23),
    # PVT-small / PVT-medium (PVT v1 baselines of the +PEG+GAP small / medium rows)
    'pvt-s_8xb128_in1k.py': (24_485_864, 24),  # = official pvt_small (Table 13 prints 25M, PVT's 24.5M)
    'pvt-m_8xb128_in1k.py': (44_208_104, 44),  # = official pvt_medium
    'fpn_pvt-s_4xb4-80k_ade20k-512x512.py': (28_237_462, 28),
    'fpn_pvt-m_4xb4-80k_ade20k-512x512.py': (47_959_702, 48),
    'retinanet_pvt-s_fpn_1x_coco.py': (34_220_788, 34),
    'retinanet_pvt-s_fpn_ms-3x_coco.py': (34_220_788, 34),
    'retinanet_pvt-m_fpn_1x_coco.py': (53_943_028, 54),
    'retinanet_pvt-m_fpn_ms-3x_coco.py': (53_943_028, 54),
}


def _build(name):
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables', name))
    scope = 'mmdet' if name.startswith('retinanet') else 'mmseg' if name.startswith('fpn_') else 'mmpretrain'
    importlib.import_module(f'{scope}.models')
    with DefaultScope.overwrite_default_scope(scope):
        return cfg, importlib.import_module(f'{scope}.registry').MODELS.build(cfg.model)


def test_table13_config_list_complete():
    names = {osp.basename(p) for p in glob.glob(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables', '*pvt-*.py'))
             if not osp.basename(p).startswith(('cpvt', 'deit'))}
    assert names == set(TABLE13)


@pytest.mark.parametrize('name', sorted(n for n in TABLE13 if '_ms-3x_' not in n))
def test_table13_configs_build_with_paper_params_and_run(name):
    cfg, model = _build(name)
    n, paper = TABLE13[name]
    assert sum(p.numel() for p in model.parameters()) == n and round(n / 1e6) == paper
    bb = cfg.model.backbone
    tables = 'pvt-peg-' not in name
    assert (bb.get('pos_embed_type') == 'learnable') == tables and (bb.get('peg_after_block', 0) is None) == tables
    model.eval()
    with torch.no_grad():
        if name.startswith('retinanet'):
            scores, _ = model(torch.randn(1, 3, 64, 96), mode='tensor')
            assert [tuple(s.shape[2:]) for s in scores] == [(8, 12), (4, 6), (2, 3), (1, 2), (1, 1)]
        elif name.startswith('fpn_'):
            assert model(torch.randn(1, 3, 64, 64), mode='tensor').shape == (1, 150, 16, 16)
        else:
            assert bb.get('with_cls_token', False) == ('gap' not in name)
            assert model(torch.randn(1, 3, 64, 80), mode='tensor').shape == (1, 1000)
            # the baselines keep PVT v1's own recipe: drop path and clipping of its pvt_{tiny,small,medium}.py
            official = {'pvt-t_': (0.1, None), 'pvt-s_': (0.1, None), 'pvt-m_': (0.3, dict(max_norm=1.0))}
            for prefix, (drop_path, clip) in official.items():
                if name.startswith(prefix):
                    assert bb.drop_path_rate == drop_path and cfg.optim_wrapper.clip_grad == clip
    if not name.startswith(('retinanet', 'fpn_')):
        return
    init = bb.init_cfg
    assert init.prefix == 'backbone.' and init.checkpoint.startswith('checkpoints/')
    # class-token classifiers: the dense backbone drops the token (and its table slot) explicitly
    assert ('cls_token' in init.ignore_keys) == ('gap' not in name)


@pytest.mark.parametrize('name', sorted(n for n in TABLE13 if '_ms-3x_' in n))
def test_table13_3x_configs_have_the_1x_model(name):
    """The 3x + MS rows train the 1x rows' detector (built above) with another schedule and pipeline."""
    three = Config.fromfile(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables', name))
    one = Config.fromfile(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables', name.replace('_ms-3x_', '_1x_')))
    assert three.model.to_dict() == one.model.to_dict()
    assert TABLE13[name] == TABLE13[name.replace('_ms-3x_', '_1x_')]
    assert three.train_cfg.max_epochs == 36
    custom = three.optim_wrapper.paramwise_cfg.custom_keys
    assert ('pegs' in custom) == ('peg-' in name) and custom['norm'] == dict(decay_mult=0.)
