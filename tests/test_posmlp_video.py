"""PosMLP-Video (issue 7): units, blocks, backbone, official test vector, inflation, tools."""
import json
import math
import os.path as osp
import warnings

import pytest
import torch

from mmposmlp.models.backbones.posmlp_video import BLOCK_TYPES, PosMLPVideo
from mmposmlp.models.converters.posmlp_video import (convert_official_posmlp_video, inflate_image_state_dict,
                                                     official_cfg_to_ours)
from mmposmlp.models.checkpoints import CheckpointMismatchError
from mmposmlp.models.layers.gating import PositionalGatingUnit
from mmposmlp.models.layers.relative_position import infer_window, relative_position_index

warnings.filterwarnings('ignore', message='Unnecessary conv bias')
DATA = osp.join(osp.dirname(__file__), 'data', 'posmlp_video.pt')

# a tiny arch: 32x32 clips -> 8, 4, 2, 1 tokens per side
TINY = dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2, groups=[2, 2, 4, 4],
            window_sizes=[(4, 4, 4), (4, 4, 4), (4, 2, 2), (4, 2, 2)])
ALL_VARIANTS = ([dict(block_type=b) for b in BLOCK_TYPES]
                + [dict(parallel_version=v) for v in ('v2', 'v3', 'v4')]
                + [dict(block_type='PoTGU->PoSGU', cascade_residual='outer')]
                + [dict(gate_type=g) for g in ('sgu', 'ggqpe', 'gqpe')])


def tiny(**kw):
    torch.manual_seed(0)
    m = PosMLPVideo(arch=dict(TINY), drop_path_rate=0., **kw)
    m.init_weights()
    return m


def randomize(m, std=0.3):
    """Large random weights, so that every residual branch reaches the output (cf. the test
    vector README: with 0.02 inits, token-mixer differences vanish below tolerances)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, std)
    return m


def n_params(m):
    return sum(p.numel() for p in m.parameters())


# ------------------------------------------------------------------ official test vector
@pytest.fixture(scope='module')
def vector():
    return torch.load(DATA, weights_only=True)


def _official_model(vector):
    model = PosMLPVideo(**official_cfg_to_ours(json.loads(vector['arch_json']))).eval()
    sd = convert_official_posmlp_video(vector['state_dict'])
    head = {k: sd.pop(k) for k in list(sd) if k.startswith('head.')}
    result = model.load_state_dict(sd, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    return model, head


def test_official_vector_fp64_fp32(vector):
    model, head = _official_model(vector)
    assert n_params(model) + sum(v.numel() for v in head.values()) == vector['num_params']
    x = vector['inputs'][0]
    with torch.no_grad():
        m64 = model.double()
        logits = m64(x.double()).mean((2, 3, 4)) @ head['head.weight'].double().T + head['head.bias'].double()
        assert (logits - vector['outputs_fp64'][0]).abs().max() < 1e-8
        for ours, ref in zip(m64.stage_features(x.double()), vector['features']):
            assert ours[:1].shape == ref.shape
            assert (ours[:1] - ref).abs().max() < 1e-8
        m32 = model.float()
        logits = m32(x).mean((2, 3, 4)) @ head['head.weight'].T + head['head.bias']
        assert (logits - vector['outputs_fp32'][0]).abs().max() < 1e-4


def test_official_temporal_index_is_ours():
    """Official LearnedPosMapT index: i - j + T - 1 with i = query frame."""
    T = 16
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing='ij')
    assert torch.equal(relative_position_index((T, )), i - j + T - 1)


def test_converter_tool_and_init_cfg(vector, tmp_path):
    """CLI converter (zero missing/unexpected keys incl. the head) and init_cfg loading of
    both our converted file and the raw official state dict."""
    from tools.model_converters.posmlp_video2mmposmlp import main
    src, dst = tmp_path / 'official.pth', tmp_path / 'ours.pth'
    torch.save({'model_state': vector['state_dict']}, src)
    main([str(src), str(dst), '--check-arch', 'none'])
    ckpt = torch.load(dst, weights_only=True)
    sd = ckpt['state_dict']
    assert set(k for k in sd if not k.startswith('backbone.')) == {'cls_head.fc_cls.weight', 'cls_head.fc_cls.bias'}
    kwargs = official_cfg_to_ours(json.loads(vector['arch_json']))
    ref_model, _ = _official_model(vector)
    x = vector['inputs'][0]
    torch.save(vector['state_dict'], tmp_path / 'raw.pth')  # raw official state dict
    for path in (dst, tmp_path / 'raw.pth'):
        model = PosMLPVideo(**kwargs, init_cfg=dict(type='Pretrained', checkpoint=str(path), prefix=None))
        model.init_weights()
        with torch.no_grad():
            assert torch.allclose(model.eval()(x), ref_model.eval()(x), atol=1e-6)
    # a backbone key missing -> loud failure
    bad = {k: v for k, v in sd.items() if 'stages.2.blocks.1.temporal.fc1' not in k}
    torch.save({'state_dict': bad}, tmp_path / 'bad.pth')
    model = PosMLPVideo(**kwargs, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'bad.pth'),
                                                prefix='backbone.'))
    with pytest.raises(CheckpointMismatchError, match='missing'):
        model.init_weights()


def test_official_vector_through_mmaction_recognizer(vector, tmp_path):
    """The converted checkpoint in mmaction2's Recognizer3D + I3DHead gives the official logits."""
    import mmaction.models  # noqa: F401
    from mmaction.registry import MODELS
    from mmengine.registry import DefaultScope
    from tools.model_converters.posmlp_video2mmposmlp import convert
    kwargs = official_cfg_to_ours(json.loads(vector['arch_json']))
    cfg = dict(type='Recognizer3D', backbone=dict(type='mmposmlp.PosMLPVideo', **kwargs),
               cls_head=dict(type='I3DHead', in_channels=128, num_classes=10, dropout_ratio=0.),
               data_preprocessor=dict(type='ActionDataPreprocessor', format_shape='NCTHW'))
    with DefaultScope.overwrite_default_scope('mmaction'):
        model = MODELS.build(cfg).eval()
    result = model.load_state_dict(convert(vector['state_dict']), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    with torch.no_grad():
        feats, _ = model.extract_feat(vector['inputs'][0][:, None])  # (B, views, C, T, H, W)
        logits = model.cls_head(feats)
    assert (logits - vector['outputs_fp32'][0]).abs().max() < 1e-4


def test_official_clip_length_transfer(vector):
    """The official T is baked in; ours loads a T=4 checkpoint into a T=6 model (temporal
    tables/biases resized) and runs 6- and 3-frame clips (padded + masked windows)."""
    kwargs = official_cfg_to_ours(json.loads(vector['arch_json']))
    kwargs['arch']['window_sizes'] = [(6, w[1], w[2]) for w in kwargs['arch']['window_sizes']]
    model = PosMLPVideo(**kwargs).eval()
    sd = {k: v for k, v in convert_official_posmlp_video(vector['state_dict']).items() if not k.startswith('head.')}
    model.load_state_dict(sd, strict=True)
    gate = model.stages[0].blocks[0].temporal.gate_t
    assert gate.mixing.relative_position_table.shape == (11, 2) and gate.token_bias.shape == (6, )
    with torch.no_grad():
        for t in (6, 3):
            assert model(torch.randn(1, 3, t, 64, 64)).shape == (1, 128, t, 2, 2)


# ------------------------------------------------------------------ Table 1 / 2 / 3 / 5 / 8 counts
def test_table1_unit_parameters():
    """Table 1 (T=16, H=W=7, g=8): PoTGU 248, PoSGU 1,352, PoSTGU 41,912, SGU 615,440. The
    formulas count the relative-position dictionaries only; our units (like the official
    code) also hold a per-position token bias of T / HW / THW values. gMLP's count
    THW(THW+1) is its W plus that bias (the LN of gMLP's SGU is not counted)."""
    def parts(window, gate_type):
        unit = PositionalGatingUnit(2 * 64, window, groups=8, gate_type=gate_type)
        mixing = sum(p.numel() for p in unit.mixing.parameters())
        return mixing, unit.token_bias.numel(), (sum(p.numel() for p in unit.norm.parameters()) if unit.norm else 0)
    assert parts((16, ), 'glrpe') == (8 * 31, 16, 0) and 8 * 31 == 248
    assert parts((7, 7), 'glrpe') == (1352, 49, 0)
    assert parts((16, 7, 7), 'glrpe') == (41912, 784, 0)
    w, b, _ = parts((16, 7, 7), 'sgu')
    assert w + b == 615440


def _analytic_params(depths, r, embed=(72, 144, 288, 576), groups=(8, 16, 32, 64),
                     wins=((16, 14, 14),) * 3 + ((16, 7, 7),), classes=174):
    """Independent count of the parallel (V1) model from the layer formulas."""
    c0 = embed[0]
    total = (3 * 9 * c0 // 2 + c0 // 2) + 2 * (c0 // 2) + (c0 // 2 * 9 * c0 + c0) + 2 * c0  # stem
    for i, (d, c, g, (t, h, w)) in enumerate(zip(depths, embed, groups, wins)):
        if i:
            total += embed[i - 1] * 9 * c + c + 2 * c  # downsample conv + LN
        module = 2 * c + (c * r * c + r * c) + (r * c // 2 * c + c)
        spatial = module + g * (2 * h - 1) * (2 * w - 1) + h * w
        temporal = module + g * (2 * t - 1) + t
        total += d * (spatial + temporal)
    return total + 2 * embed[-1] + embed[-1] * classes + classes  # final LN + head


@pytest.mark.parametrize('arch,paper', [('s', 13.51e6), ('b', None), ('l', 35.4e6)])
def test_arch_params(arch, paper):
    m = PosMLPVideo(arch=f'posmlp-video-{arch}')
    count = n_params(m) + 576 * 174 + 174
    s = m.arch_settings
    assert count == _analytic_params(s['depths'], s['mlp_ratio'])
    if arch == 's':
        assert count == 13509537  # official PosMLP_Video S16 (174 classes), exact
    if paper is not None:
        assert abs(count - paper) / paper < 0.01


@pytest.mark.parametrize('kw,paper', [
    (dict(block_type='PoSGU'), 7.95e6), (dict(block_type='PoTGU'), 7.65e6),
    (dict(block_type='PoSTGU'), 17.19e6),
    (dict(block_type='PoTGU->PoSGU'), 13.51e6),
    (dict(block_type='PoSGU->PoTGU'), 13.51e6), (dict(gate_type='sgu'), 13.83e6),
    (dict(parallel_version='v2'), 13.49e6), (dict(parallel_version='v3'), 9.80e6),
    (dict(parallel_version='v4'), 7.96e6),
    (dict(window_sizes=[(8, 14, 14)] * 3 + [(8, 7, 7)]), 13.50e6),
    (dict(window_sizes=[(16, 7, 7)] * 4), 13.30e6),
    (dict(window_sizes=[(16, 28, 28)] + [(16, 14, 14)] * 2 + [(16, 7, 7)]), 13.57e6),
])
def test_table3_5_8_params(kw, paper):
    """Tables 3 (block types, SGU+TGU), 5 (windows), 8 (V1-V4) of PosMLP-Video-S, 174 classes:
    within 0.1% (the paper rounds to 10k)."""
    count = n_params(PosMLPVideo(arch='s', **kw)) + 576 * 174 + 174
    assert abs(count - paper) / paper < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize('kw,T,paper', [
    (dict(), 16, 40.49), (dict(block_type='PoSGU'), 16, 25.08), (dict(block_type='PoTGU'), 16, 20.32),
    (dict(block_type='PoTGU->PoSGU'), 16, 40.49), (dict(gate_type='sgu'), 16, 40.76),
    (dict(parallel_version='v2'), 16, 40.35), (dict(parallel_version='v3'), 16, 30.46),
    (dict(parallel_version='v4'), 16, 25.52), (dict(window_sizes=[(16, 7, 7)] * 4), 16, 36.64),
    (dict(window_sizes=[(16, 28, 28)] + [(16, 14, 14)] * 2 + [(16, 7, 7)]), 16, 46.86),
    (dict(window_sizes=[(8, 14, 14)] * 3 + [(8, 7, 7)]), 8, 20.38),
])
def test_gflops_fvcore(kw, T, paper):
    """fvcore GFLOPs (1 MAC = 1 FLOP) of S variants at T x 224^2 within 5% of Tables 3/5/8.
    (Table 5's 8x14^2 row halves the FLOPs, so it was measured on 8-frame clips.)"""
    from fvcore.nn import FlopCountAnalysis
    m = PosMLPVideo(arch='s', **kw).eval()
    with torch.no_grad():
        fa = FlopCountAnalysis(m, torch.zeros(1, 3, T, 224, 224))
        fa.unsupported_ops_warnings(False)
        fa.uncalled_modules_warnings(False)
        g = fa.total() / 1e9
    assert abs(g - paper) / paper < 0.05


# ------------------------------------------------------------------ shapes / gradients
@pytest.mark.parametrize('kw', ALL_VARIANTS, ids=lambda kw: '-'.join(f'{v}' for v in kw.values()))
def test_shapes_and_gradients(kw):
    m = tiny(**kw).train()
    x = torch.randn(1, 3, 4, 64, 64)  # 2x2 tokens in stage 4: every unit mixes >1 token
    out = m(x)
    assert out.shape == (1, 32, 4, 2, 2)
    out.square().mean().backward()
    no_grad = [n for n, p in m.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not no_grad, no_grad
    zero = [n for n, p in m.named_parameters() if p.grad.abs().max() == 0]
    assert not zero, zero


@pytest.mark.parametrize('t,hw', [(1, 32), (3, 32), (4, 40), (7, 24), (9, 33)])
def test_clip_lengths_and_sizes(t, hw):
    m = tiny(out_indices=(0, 1, 2, 3)).eval()
    with torch.no_grad():
        outs = m(torch.randn(2, 3, t, hw, hw))
    for i, o in enumerate(outs):
        side = math.ceil(hw / 2 ** (i + 2))
        assert o.shape == (2, TINY['embed_dims'][i], t, side, side)


def test_padding_mask_equals_smaller_window():
    """A clip shorter than the temporal window (padded + masked) equals a model whose window is
    the clip length with the central sub-table: masking is exact."""
    big = randomize(tiny(window_sizes=[(8, 4, 4), (8, 4, 4), (8, 2, 2), (8, 2, 2)])).eval()
    small = PosMLPVideo(arch=dict(TINY), drop_path_rate=0.).eval()
    sd = big.state_dict()
    for k, v in list(sd.items()):
        if '.gate_t.' in k and k.endswith('relative_position_table'):
            sd[k] = v[4:11]  # offsets -3..3 of the 15 offsets -7..7
        elif '.gate_t.' in k and k.endswith('token_bias'):
            sd[k] = v[:4]
    small.load_state_dict(sd, strict=True)
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        assert torch.allclose(big(x), small(x), atol=1e-6)


@pytest.mark.parametrize('axes', ['t', 'hw', 'thw'])
def test_module_fast_path_equals_plain_gating(axes):
    """A single-unit module windows its normed input and lets the unit apply fc1 + GELU
    (``forward_projected``); on a padded clip this equals gating ``GELU(fc1(LN(x)))``."""
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideoModule, _gate_over
    torch.manual_seed(0)
    mod = PosMLPVideoModule(16, 4, (4, 3, 3), 4, [axes], norm_cfg=dict(type='LN', eps=1e-6),
                            act_cfg=dict(type='GELU')).double()
    with torch.no_grad():
        for p in mod.parameters():
            p.normal_(0, 0.3)
    x = torch.randn(2, 5, 7, 4, 16, dtype=torch.float64)  # T, H, W not window multiples
    plain = mod.fc2(_gate_over(mod.gate(axes), mod.act(mod.fc1(mod.norm(x))), axes, mod.window))
    assert (mod(x) - plain).abs().max() < 1e-12


def test_temporal_order_sensitivity():
    """PoTGU makes the model order-sensitive (Table 6's premise); PoSGU-only is not."""
    x = torch.randn(1, 3, 4, 32, 32)
    perm = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        m = randomize(tiny()).eval()
        assert (m(x)[:, :, perm] - m(x[:, :, perm])).abs().max() > 1e-2
        s = randomize(tiny(block_type='PoSGU')).eval()
        assert torch.allclose(s(x)[:, :, perm], s(x[:, :, perm]), atol=1e-5)


def test_cascade_order_differs():
    x = torch.randn(1, 3, 4, 32, 32)
    a, b = randomize(tiny(block_type='PoTGU->PoSGU')).eval(), tiny(block_type='PoSGU->PoTGU').eval()
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert (a(x) - b(x)).abs().max() > 1e-2


def test_frozen_stages_norm_eval_with_cp():
    m = tiny(frozen_stages=2, norm_eval=True).train()
    assert not any(p.requires_grad for p in m.patch_embed.parameters())
    assert not any(p.requires_grad for p in m.stages[1].parameters())
    assert all(p.requires_grad for p in m.stages[2].parameters())
    assert not m.patch_embed[0].bn.training
    a, b = tiny().train(), tiny(with_cp=True).train()
    b.load_state_dict(a.state_dict())
    x = torch.randn(1, 3, 4, 32, 32)
    ya, yb = a(x), b(x)
    assert torch.allclose(ya, yb, atol=1e-6)
    ya.sum().backward()
    yb.sum().backward()
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), n


def test_errors():
    with pytest.raises(KeyError, match='valid archs'):
        PosMLPVideo(arch='xl')
    with pytest.raises(KeyError, match='block_type'):
        PosMLPVideo(arch=dict(TINY), block_type='PoXGU')
    m = tiny()
    with pytest.raises(ValueError, match='channels'):
        m(torch.randn(1, 4, 4, 32, 32))
    with pytest.raises(ValueError, match='image_mode'):
        m(torch.randn(1, 3, 32, 32))


def test_infer_window():
    assert infer_window((16, 14, 14), num_tokens=8 * 196, table_rows=15 * 27 * 27) == (8, 14, 14)
    assert infer_window((16, 14, 14), num_tokens=196, table_rows=729) == (1, 14, 14)
    assert infer_window((7, 7), table_rows=729) == (14, 14)
    assert infer_window((16, ), num_tokens=24) == (24, )
    # a PoSTGU trained at T=16 loads into T=8 (non-cubic window: the shared gate infers it)
    a = PositionalGatingUnit(8, (16, 3, 3), groups=2, gate_type='glrpe')
    b = PositionalGatingUnit(8, (8, 3, 3), groups=2, gate_type='glrpe')
    b.load_state_dict(a.state_dict())
    assert b.mixing.relative_position_table.shape == (15 * 25, 2)


# ------------------------------------------------------------------ image mode / inflation
def test_image_mode_and_identity_inflation():
    """Image mode: NCHW in/out, no temporal gate weights. Inflated with identity temporal
    units, the video model on any clip equals the image model frame by frame."""
    img = randomize(tiny(image_mode=True), std=0.2).eval()
    assert not any('.gate_t.' in k for k in img.state_dict())
    frames = torch.randn(3, 3, 64, 64)
    with torch.no_grad():
        ref, = img(frames)
    assert ref.shape == (3, 32, 2, 2)
    video = tiny()
    sd = inflate_image_state_dict(img.state_dict(), video, temporal_init='identity')
    video.load_state_dict(sd, strict=True)
    with torch.no_grad():
        out = video.eval()(frames.transpose(0, 1)[None])  # (1, 3, T=3, H, W)
    assert torch.allclose(out[0].permute(1, 0, 2, 3), ref, atol=1e-5)
    # 'random' (the paper): temporal tables come from the video init and are reported
    sd_r = inflate_image_state_dict(img.state_dict(), video, temporal_init='random')
    new = video.temporal_gate_keys()
    assert new and all(k in sd_r for k in new)
    assert all(torch.equal(sd_r[k], sd[k]) for k in sd if k not in new)


def test_inflate_tool_and_init_cfg(tmp_path):
    from tools.model_converters.posmlp_video_inflate import inflate, main
    img = PosMLPVideo(arch='s', image_mode=True)
    torch.save({'state_dict': {'backbone.' + k: v for k, v in img.state_dict().items()} |
                {'head.fc.weight': torch.zeros(1000, 576), 'head.fc.bias': torch.zeros(1000)}},
               tmp_path / 'img.pth')
    main([str(tmp_path / 'img.pth'), str(tmp_path / 'video.pth'), '--arch', 's', '--clip-len', '8'])
    ckpt = torch.load(tmp_path / 'video.pth', weights_only=True)
    assert len(ckpt['meta']['new_keys']) == 2 * 19  # table + token bias of the 19 PoTGUs
    video = PosMLPVideo(arch='s', window_sizes=[(8, 14, 14)] * 3 + [(8, 7, 7)],
                        init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'video.pth')))
    video.init_weights()  # every key present (missing keys would raise)
    assert torch.equal(video.stages[3].blocks[2].spatial.fc1.weight, img.stages[3].blocks[2].spatial.fc1.weight)
    with pytest.raises(KeyError, match='lacks'):
        inflate({'backbone.' + k: v for k, v in img.state_dict().items()}, arch='s', block_type='PoSTGU')


def test_inflate_on_load_needs_flag(tmp_path):
    img = tiny(image_mode=True)
    torch.save({'state_dict': {'backbone.' + k: v for k, v in img.state_dict().items()}}, tmp_path / 'img.pth')
    video = PosMLPVideo(arch=dict(TINY), init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'img.pth')))
    with pytest.raises(CheckpointMismatchError, match='missing'):
        video.init_weights()
    video = PosMLPVideo(arch=dict(TINY), init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'img.pth'),
                                                       inflate=True))
    video.init_weights()
    assert torch.equal(video.stages[1].blocks[0].temporal.fc1.weight, img.stages[1].blocks[0].temporal.fc1.weight)


# ------------------------------------------------------------------ transform / tools
def test_shuffle_frames_transform():
    import numpy as np
    from mmposmlp.datasets.transforms import ShuffleFrames
    from mmposmlp.registry import TRANSFORMS
    t = TRANSFORMS.build(dict(type='mmposmlp.ShuffleFrames', seed=3))  # any default scope
    imgs = [np.full((2, 2, 3), i) for i in range(12)]
    res = t(dict(imgs=list(imgs), clip_len=4, num_clips=3, filename='a.mp4', frame_inds=np.arange(12)))
    vals = [int(x[0, 0, 0]) for x in res['imgs']]
    for c in range(3):
        assert sorted(vals[4 * c:4 * c + 4]) == list(range(4 * c, 4 * c + 4))
    assert vals != list(range(12))
    assert list(res['frame_inds']) == vals
    again = t(dict(imgs=list(imgs), clip_len=4, num_clips=3, filename='a.mp4'))
    assert [int(x[0, 0, 0]) for x in again['imgs']] == vals
    with pytest.raises(KeyError, match='Decode'):
        t(dict(clip_len=4))


def test_relations_tool(tmp_path):
    from tools.analysis.posmlp_video_relations import main, relation_matrices
    m = tiny()
    mats = relation_matrices(m)
    kinds = [k for _, k, _, _ in mats]
    assert kinds.count('spatial') == 2 and kinds.count('temporal') == 2
    spatial = [mat for _, k, mat, _ in mats if k == 'spatial'][0]
    assert spatial.shape == (2, 16, 16)
    temporal = [mat for _, k, mat, _ in mats if k == 'temporal'][0]
    gate = m.stages[0].blocks[0].temporal.gate_t
    tab = gate.mixing.relative_position_table.detach()
    assert torch.equal(temporal[0][1, 0], tab[1 - 0 + 3, 0])  # R[i, j] = P[i - j]
    ckpt = tmp_path / 'm.pth'
    torch.save({'state_dict': m.state_dict()}, ckpt)
    out = tmp_path / 'rel.png'
    cfg = tmp_path / 'cfg.py'
    cfg.write_text(f'model = dict(backbone=dict(type="mmposmlp.PosMLPVideo", arch={TINY!r}))\n')
    main([str(ckpt), str(out), '--config', str(cfg)])
    assert out.stat().st_size > 1000 and out.read_bytes()[:4] == b'\x89PNG'


@pytest.mark.parametrize('gate_cfg', [dict(split=False), dict(combine='concat')])
def test_gate_options_returning_all_hidden_channels_are_refused(gate_cfg):
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    with pytest.raises(ValueError, match="PosMLP-Video blocks take half of the hidden channels"):
        PosMLPVideo(arch='s', gate_cfg=gate_cfg)


# ------------------------------------------------------------------ memory of the joint (PoSTGU) units
@pytest.mark.parametrize('window', [(3, 4, 5), (5, 7), (8, )])
@pytest.mark.parametrize('graph', [False, True], ids=['eager', 'export-gather'])
def test_lrpe_lookup_equals_the_flat_index(window, graph):
    """The LRPE matrices equal ``table[relative_position_index]`` bit for bit (fp64), for all groups and one
    group at a time, and so do the table gradients up to summation order - in eager mode (strided copies,
    slice sums) and in graphs (a gather through per-axis indices)."""
    from mmposmlp.models.layers.relative_position import LearnedPositionMixing
    torch.manual_seed(0)
    m = LearnedPositionMixing(window, 3).double()
    torch.nn.init.normal_(m.relative_position_table)
    m.export_mode = graph
    table, n = m.relative_position_table, m.num_tokens

    def flat():
        return table[relative_position_index(window).view(-1)].view(n, n, 3).permute(2, 0, 1)

    def grad(p, up):
        return torch.autograd.grad(p, table, up)[0]

    assert torch.equal(m.logits(), flat())
    assert torch.equal(m.relative_index, relative_position_index(window))
    up = torch.randn(3, n, n, dtype=torch.float64)
    torch.testing.assert_close(grad(m.logits(), up), grad(flat(), up), rtol=1e-13, atol=1e-12)
    for g in range(3):
        assert torch.equal(m.group_logits(g), flat()[g:g + 1])
        torch.testing.assert_close(grad(m.group_logits(g), up[g:g + 1]), grad(flat()[g:g + 1], up[g:g + 1]),
                                   rtol=1e-13, atol=1e-12)


def test_joint_window_unit_holds_no_token_pair_index():
    """A 16x14x14 PoSTGU unit (N = 3136) keeps its per-axis indices only (hundreds of entries), not an
    (N, N) index (78 MB of int64 per unit)."""
    unit = PositionalGatingUnit(2 * 288, (16, 14, 14), 32, 'glrpe')
    held = sum(b.numel() for b in unit.buffers())
    assert held < 1000, [(n, tuple(b.shape)) for n, b in unit.named_buffers()]
    assert unit.state_dict().keys() == {'token_bias', 'mixing.relative_position_table'}


def _allocation_watch():
    from toolcfg import load_tool
    return load_tool('.dev_scripts', 'postgu_paper_size.py')


@pytest.mark.parametrize('gate_type', ['glrpe', 'ggqpe'])
def test_postgu_training_step_never_allocates_all_groups_matrices(gate_type, monkeypatch):
    """A PoSTGU training step (forward, loss, backward) whose units build their positional matrices one
    group at a time allocates one group's (N, N) matrices at most, never those of all groups; with the
    per-group path off (the dense path) the same watch sees them, so the check can fail."""
    from mmposmlp.models.layers import gating
    tool = _allocation_watch()
    m = tiny(block_type='PoSTGU', gate_type=gate_type).train()
    x = torch.randn(1, 3, 3, 28, 28)  # padded windows: masked matrices too

    def step(units):
        watch = tool.AllocationWatch(units)
        with watch:
            m(x).square().mean().backward()
        return watch

    monkeypatch.setattr(gating, 'GROUPWISE_BYTES', 0)
    units = tool.groupwise_units(m)
    assert len(units) == 4
    grouped = step(units)
    assert grouped.dense == []
    assert max(b for b, _, _ in grouped.largest) >= 64 * 64 * 4  # one group's (N, N) matrix was built
    monkeypatch.setattr(gating, 'GROUPWISE_BYTES', 1 << 40)
    dense = step(units)
    assert {d.split(':')[0] for d in dense.dense} == {u['name'] for u in units}


def _video_module(axes, seed=0):
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideoModule
    torch.manual_seed(seed)
    mod = PosMLPVideoModule(16, 4, (4, 3, 3), 4, [axes], norm_cfg=dict(type='LN', eps=1e-6),
                            act_cfg=dict(type='GELU')).double()
    with torch.no_grad():
        for p in mod.parameters():
            p.normal_(0, 0.3)
    return mod


def _row_major_gate_over(gate, h, axes, window):
    """The gating unit on row-major windows of each clip, frame or position of ``h`` (B, T, H, W, C):
    padded, windowed, masked (the masked windows recomputed with their masks), reversed and cropped."""
    from mmposmlp.models.layers.windows import crop, make_layout, pad_to_multiple
    B, T, H, W, C = h.shape
    if axes == 't':
        y, win, valid = h.permute(0, 2, 3, 1, 4).reshape(B * H * W, T, C), tuple(window[:1]), (T, )
    elif axes == 'hw':
        y, win, valid = h.reshape(B * T, H, W, C), tuple(window[1:]), (H, W)
    else:
        y, win, valid = h, tuple(window), (T, H, W)
    y = pad_to_multiple(y, win)
    layout = make_layout(y, valid, win)
    assert layout.masked and not layout.ordered
    y = crop(layout.reverse(gate(layout.partition(y), layout)), valid)
    if axes == 't':
        return y.reshape(B, H, W, T, -1).permute(0, 3, 1, 2, 4)
    return y.reshape(B, T, H, W, -1)


@pytest.mark.parametrize('axes', ['t', 'hw', 'thw'])
def test_masked_clip_windows_equal_row_major_windows(axes):
    """fp64, a clip padded on every axis: the module (windows numbered by mask over the whole batch,
    training function and inference) gives the values and every gradient of the plain autograd
    composition on row-major windows of each clip, frame or position."""
    mod = _video_module(axes)
    x = torch.randn(2, 5, 7, 4, 16, dtype=torch.float64, requires_grad=True)
    params = [x, *mod.parameters()]
    weight = torch.randn(2, 5, 7, 4, 16, dtype=torch.float64)
    ref = mod.fc2(_row_major_gate_over(mod.gate(axes), mod.act(mod.fc1(mod.norm(x))), axes, mod.window))
    out = mod(x)
    assert (out - ref).abs().max() < 1e-12
    for i, (a, b) in enumerate(zip(torch.autograd.grad((ref * weight).sum(), params),
                                   torch.autograd.grad((out * weight).sum(), params))):
        assert a is not None and b is not None and (a - b).abs().max() < 1e-10, i
    with torch.no_grad():
        assert (mod(x) - ref).abs().max() < 1e-12


@pytest.mark.parametrize('axes', ['t', 'hw', 'thw'])
def test_masked_clip_windows_are_mixed_once(axes):
    """A padded clip costs the token mixing of a clip with as many windows and no padding, in training
    (forward and backward) and in inference: no window is mixed twice."""
    from torch.utils.flop_counter import FlopCounterMode
    mod = _video_module(axes)

    def mixing_flops(shape):
        x = torch.randn(*shape, 16, dtype=torch.float64, requires_grad=True)
        found = []
        for train in (True, False):
            with FlopCounterMode(display=False) as counter, torch.set_grad_enabled(train):
                out = mod(x)
                if train:
                    out.sum().backward()
            found.append(sum(n for op, n in counter.get_flop_counts()['Global'].items() if 'bmm' in str(op)))
        return found

    # the axes that are windowed padded to window multiples (5 -> 8 frames, 7 x 4 -> 9 x 6)
    unpadded = {'t': (2, 8, 7, 4), 'hw': (2, 5, 9, 6), 'thw': (2, 8, 9, 6)}[axes]
    padded, plain = mixing_flops((2, 5, 7, 4)), mixing_flops(unpadded)
    assert min(plain) > 0 and padded == plain
