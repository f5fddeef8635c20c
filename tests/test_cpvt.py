"""CPVT (DeiT + PEG): PEG positions, heads, any input size (Table 2), params (Tables 4/9/12)."""
import os.path as osp

import pytest
import torch

from mmposmlp.models.backbones.cpvt import CPVT
from mmposmlp.registry import MODELS

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

SMALL = dict(embed_dims=32, num_layers=6, num_heads=2, feedforward_channels=64)


def _rand(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p[0].numel() if p.dim() > 1 else 10
            p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
    return model


def test_peg_positions_follow_the_paper():
    """Table 12: "i-j" = PEGs from encoder i to encoder j-1; position p = output of block p."""
    model = CPVT(SMALL)  # default (0, 1, 2, 3, 4) = "0-5": after each of the first five encoders
    order = []
    for i, layer in enumerate(model.layers):
        layer.register_forward_hook(lambda m, a, o, i=i: order.append(f'block{i}'))
    for p, peg in zip(model.peg_positions, model.pegs):
        peg.register_forward_hook(lambda m, a, o, p=p: order.append(f'peg@{p}'))
    model(torch.randn(1, 3, 48, 48))
    assert order == ['block0', 'peg@0', 'block1', 'peg@1', 'block2', 'peg@2', 'block3', 'peg@3',
                     'block4', 'peg@4', 'block5']
    order.clear()
    m2 = CPVT(SMALL, peg_positions=(-1, ))
    m2.layers[0].register_forward_hook(lambda *a: order.append('block0'))
    m2.pegs[0].register_forward_hook(lambda *a: order.append('peg@-1'))
    m2(torch.randn(1, 3, 32, 32))
    assert order == ['peg@-1', 'block0']
    with pytest.raises(ValueError, match='out of range'):
        CPVT(SMALL, peg_positions=(6, ))


def test_output_types_and_shapes():
    x = torch.randn(2, 3, 64, 80)
    cls = CPVT(SMALL).eval()
    assert cls(x)[0].shape == (2, 32)
    gap = CPVT(SMALL, with_cls_token=False, out_type='avg_featmap', final_norm=False).eval()
    assert gap(x)[0].shape == (2, 32) and not hasattr(gap, 'ln1') and hasattr(gap, 'ln2')
    feat = CPVT(SMALL, out_type='featmap', out_indices=(1, 5)).eval()
    outs = feat(torch.randn(1, 3, 67, 93))  # floor: 4 x 5 patches
    assert [tuple(o.shape) for o in outs] == [(1, 32, 4, 5), (1, 32, 4, 5)]
    raw = CPVT(SMALL, out_type='raw')
    assert raw(x)[0].shape == (2, 1 + 4 * 5, 32)
    with pytest.raises(ValueError, match='with_cls_token'):
        CPVT(SMALL, with_cls_token=False, out_type='cls_token')
    with pytest.raises(ValueError, match='choose one of'):
        CPVT('huge')
    with pytest.raises(ValueError, match='patch'):
        cls(torch.randn(1, 3, 8, 64))


def test_peg_supplies_position_information():
    """Without PE a ViT's cls output is invariant to a permutation of the patches; PEG breaks it."""
    x = torch.randn(1, 3, 64, 64)
    patches = x.unfold(2, 16, 16).unfold(3, 16, 16)  # 1,3,4,4,16,16
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    shuffled = patches.reshape(1, 3, 16, 16, 16)[:, :, perm].reshape(1, 3, 4, 4, 16, 16)
    x_perm = shuffled.permute(0, 1, 2, 4, 3, 5).reshape(1, 3, 64, 64)
    with torch.no_grad():
        nope = _rand(CPVT(SMALL, peg_positions=())).double().eval()
        torch.testing.assert_close(nope(x.double())[0], nope(x_perm.double())[0])
        peg = _rand(CPVT(SMALL)).double().eval()
        assert (peg(x.double())[0] - peg(x_perm.double())[0]).abs().max() > 1e-3


def test_resolution_generalisation_cpvt_ti():
    """Table 2: the same CPVT-Ti weights evaluate at 160/224/384/448/512 without any change."""
    torch.manual_seed(0)
    model = CPVT('tiny').eval()
    model.init_weights()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    outs = {}
    with torch.no_grad():
        for s in (160, 224, 384, 448, 512):
            outs[s] = model(torch.randn(1, 3, s, s))[0]
            assert outs[s].shape == (1, 192) and torch.isfinite(outs[s]).all()
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing resized/interpolated
    assert not any('pos_embed' in k for k in after)
    vals = list(outs.values())
    assert all((a - b).abs().max() > 1e-4 for i, a in enumerate(vals) for b in vals[i + 1:])


def test_every_parameter_gets_gradient():
    for kw in (dict(), dict(with_cls_token=False, out_type='avg_featmap', final_norm=False)):
        model = MODELS.build(dict(type='mmposmlp.CPVT', arch=SMALL, drop_path_rate=0.1, **kw))
        model.init_weights()
        model.train()
        out = model(torch.randn(2, 3, 48, 64))[0]
        (out * torch.randn_like(out)).sum().backward()  # not .sum(): sum(LN(x)) is constant
        assert [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0] == []


def test_frozen_stages_and_with_cp():
    m = CPVT(SMALL, frozen_stages=2).train()
    assert not m.cls_token.requires_grad and not m.patch_embed.weight.requires_grad
    assert not any(p.requires_grad for p in m.layers[1].parameters())
    assert all(p.requires_grad for p in m.layers[2].parameters())
    assert not any(p.requires_grad for p in m.pegs[1].parameters())  # peg@1 feeds block 2 -> frozen
    assert all(p.requires_grad for p in m.pegs[2].parameters())
    a = _rand(CPVT(SMALL)).double()
    b = CPVT(SMALL, with_cp=True).double()
    b.load_state_dict(a.state_dict())
    x = torch.randn(1, 3, 32, 48, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(a(x)[0], b(x)[0])


def _count(m):
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize('arch,deit,dims,table9', [('tiny', 'deit-tiny', 192, 6),
                                                   ('small', 'deit-small', 384, 22),
                                                   ('base', 'deit-base', 768, 86)])
def test_param_counts(arch, deit, dims, table9):
    """CPVT = DeiT - absolute position embedding + 5 depthwise 3x3 PEGs (C*9 + C each)."""
    from mmpretrain.models import VisionTransformer
    ref = _count(VisionTransformer(arch=deit)) + dims * 1000 + 1000  # DeiT incl. 1000-class head
    ours = _count(CPVT(arch)) + dims * 1000 + 1000
    assert ours == ref - 197 * dims + 5 * 10 * dims
    assert round(ours / 1e6) == table9  # Table 9 / Table 2: 6M / 22M / 86M
    gap = _count(CPVT(arch, with_cls_token=False, out_type='avg_featmap', final_norm=False)) + dims * 1000 + 1000
    assert gap == ours - dims  # GAP: no cls token (ln2 replaces ln1)


# ---------------------------------------------------------------- Table 16: CvT's convolutional projection
def test_conv_projection_with_identity_convs_is_plain_attention_fp64():
    """Centre-tap-1, zero-bias depthwise convs leave q, k, v inputs unchanged: the block equals DeiT's exactly, so
    the split of the fused qkv Linear into its q / k / v thirds is right; other weights change every grid token
    but never the class token's q/k/v input."""
    arch = dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32)
    torch.manual_seed(0)
    plain = CPVT(arch, peg_positions=(), out_type='raw').double().eval()
    conv = CPVT(arch, peg_positions=(), conv_proj_blocks=(1, ), out_type='raw').double().eval()
    missing, unexpected = conv.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == sorted(f'layers.1.attn.conv_proj.{n}.{p}' for n in 'qkv'
                                                        for p in ('weight', 'bias'))
    proj = conv.layers[1].attn.conv_proj
    with torch.no_grad():
        for c in (proj.q, proj.k, proj.v):
            c.weight.zero_()
            c.weight[:, 0, 1, 1] = 1
            c.bias.zero_()
    x = torch.randn(2, 3, 48, 64, dtype=torch.float64)
    torch.testing.assert_close(conv(x)[0], plain(x)[0], rtol=0, atol=1e-13)
    with torch.no_grad():
        for c in (proj.q, proj.k, proj.v):
            c.weight.normal_()
            c.bias.normal_()
    assert not torch.allclose(conv(x)[0], plain(x)[0])
    tokens = torch.randn(2, 1 + 3 * 4, 16, dtype=torch.float64)
    q, k, v = proj(tokens, (3, 4), num_extra_tokens=1)
    assert all(torch.equal(t[:, :1], tokens[:, :1]) for t in (q, k, v))
    assert all(not torch.allclose(t[:, 1:], tokens[:, 1:]) for t in (q, k, v))


def test_table16_config_has_the_papers_exact_parameter_count():
    from mmposmlp.testing import build_model_from_cfg
    model, _ = build_model_from_cfg(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables',
                                             'deit-ti-convproj_8xb128_in1k.py'))
    assert sum(p.numel() for p in model.parameters()) == 5_685_352  # CPVT Table 16
    assert model.backbone.conv_proj_blocks == [1] and not len(model.backbone.pegs)


@pytest.mark.parametrize('blocks,match', [((12, ), r'conv_proj_blocks \[12\] out of range: blocks are 0 \.\. 11'),
                                          ((-1, ), r'conv_proj_blocks \[-1\] out of range')])
def test_conv_projection_blocks_out_of_range_are_refused(blocks, match):
    with pytest.raises(ValueError, match=match):
        CPVT('tiny', conv_proj_blocks=blocks)
