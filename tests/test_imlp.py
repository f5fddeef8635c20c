"""IMLP layers (AGeLU, IMLP and its ablation variants) and the Theorem 1 Lipschitz tool."""
import math
import os.path as osp

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mmposmlp.models.layers.imlp import AGeLU, ActivationSum, AdaptiveActivation, ASoftPlus, IMLP
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _load_lipschitz_tool():
    return load_tool('tools/analysis/imlp_lipschitz.py')


# ----------------------------------------------------------------------------- AGeLU
def test_agelu_reduces_to_gelu_at_identity_parameters():
    torch.manual_seed(0)
    act = AGeLU(7)
    x = torch.randn(3, 5, 7) * 3
    torch.testing.assert_close(act(x), F.gelu(x), rtol=0, atol=0)
    # and it is not GELU once the parameters move
    with torch.no_grad():
        act.gamma.fill_(0.3)
    assert not torch.allclose(act(x), F.gelu(x))


def test_agelu_formula_per_channel():
    torch.manual_seed(0)
    act = AGeLU(4, channel_dim=1)
    with torch.no_grad():
        for p in (act.alpha, act.beta, act.gamma, act.theta):
            p.copy_(torch.randn(4))
    x = torch.randn(2, 4, 3, 3)
    a, b, g, t = (p.view(1, 4, 1, 1) for p in (act.alpha, act.beta, act.gamma, act.theta))
    torch.testing.assert_close(act(x), b * F.gelu(a * x + g) + t)


def test_asoftplus_and_generic_wrapper():
    x = torch.randn(2, 6)
    torch.testing.assert_close(ASoftPlus(6)(x), F.softplus(x))
    relu = AdaptiveActivation(6, act_cfg=dict(type='ReLU'), init=(2., 0.5, -1., 3.))
    torch.testing.assert_close(relu(x), 0.5 * F.relu(2 * x - 1) + 3)


def test_agelu_wrong_channels_is_a_clear_error():
    with pytest.raises(ValueError, match='expected 8 channels'):
        AGeLU(8)(torch.randn(2, 5))


# ----------------------------------------------------------------------------- IMLP
def _n(m):
    return sum(p.numel() for p in m.parameters())


def test_imlp_structure_matches_eq5_and_fig4():
    C = 12
    m = IMLP(C)  # defaults: r = 2, two AGeLUs, 3x3 DW block on the 4C concat
    assert (m.fc1.in_features, m.fc1.out_features) == (C, 2 * C)
    assert (m.fc2.in_features, m.fc2.out_features) == (4 * C, C)
    assert all(isinstance(a, AGeLU) and a.num_channels == 2 * C for a in m.acts)
    assert m.dw_conv.groups == m.dw_conv.in_channels == 4 * C and m.dw_conv.kernel_size == (3, 3)
    assert isinstance(m.dw_norm, nn.BatchNorm2d) and isinstance(m.dw_act, nn.GELU)
    # fc1 + fc2 + 2 AGeLUs (4 params x 2C each) + DW conv (w + b) + BN (w + b)
    expect = (C * 2 * C + 2 * C) + (4 * C * C + C) + 2 * 4 * 2 * C + (4 * C * 9 + 4 * C) + 2 * 4 * C
    assert _n(m) == expect


def test_imlp_width_mapping_from_host_feedforward_channels():
    # own expansion r whatever the host width ...
    assert IMLP(16, feedforward_channels=128).hidden_channels == 32
    assert IMLP(16, feedforward_channels=128, expansion_ratio=3).hidden_channels == 48
    # ... unless expansion_ratio=None: Eq. 5's C'/2
    assert IMLP(16, feedforward_channels=128, expansion_ratio=None).hidden_channels == 64
    with pytest.raises(ValueError, match='feedforward_channels'):
        IMLP(16, expansion_ratio=None)


@pytest.mark.parametrize('variant,hidden,branches,spatial,act', [
    ('imlp', 16, 2, True, AGeLU), ('channel', 16, 2, False, AGeLU), ('spatial', 32, 1, True, nn.GELU),
    ('gelu_concat', 16, 2, True, nn.GELU), ('agelu', 32, 1, False, AGeLU), ('mlp', 32, 1, False, nn.GELU)])
def test_ablation_variants(variant, hidden, branches, spatial, act):
    m = IMLP(8, variant=variant)
    assert (m.hidden_channels, m.num_branches, m.spatial) == (hidden, branches, spatial)
    assert all(isinstance(a, act) for a in m.acts)
    assert hasattr(m, 'dw_conv') == spatial
    out = m(torch.randn(2, 8, 5, 6))
    assert out.shape == (2, 8, 5, 6)


def test_unknown_variant_lists_valid_ones():
    with pytest.raises(ValueError, match="valid: .*'channel'"):
        IMLP(8, variant='foo')


def test_mlp_variant_is_the_original_ffn():
    """variant='mlp' is mmcv's FFN (Eq. 1) with the same weights."""
    from mmcv.cnn.bricks.transformer import FFN
    torch.manual_seed(0)
    ffn = FFN(embed_dims=8, feedforward_channels=32, add_identity=False, act_cfg=dict(type='GELU'))
    m = IMLP(8, variant='mlp')
    m.load_state_dict({'fc1.weight': ffn.layers[0][0].weight, 'fc1.bias': ffn.layers[0][0].bias,
                       'fc2.weight': ffn.layers[1].weight, 'fc2.bias': ffn.layers[1].bias})
    x = torch.randn(2, 10, 8)
    torch.testing.assert_close(m(x), ffn(x))


@pytest.mark.parametrize('kernel_size', [1, 3, 5])
@pytest.mark.parametrize('extra_tokens', ['isolated', 'skip'])
def test_tokens_and_nchw_layouts_agree_with_cls_token(kernel_size, extra_tokens):
    torch.manual_seed(0)
    m = IMLP(8, kernel_size=kernel_size, extra_tokens=extra_tokens)
    with torch.no_grad():
        for a in m.acts:
            a.alpha.uniform_(0.5, 1.5)
            a.gamma.normal_()
        m.dw_norm.running_mean.normal_()
    m.eval()
    B, H, W = 2, 4, 5
    grid = torch.randn(B, 8, H, W)
    cls = torch.randn(B, 1, 8)
    out_nchw = m(grid)
    assert out_nchw.shape == grid.shape
    tokens = grid.flatten(2).transpose(1, 2)
    out_tok = m(tokens, hw_shape=(H, W))
    torch.testing.assert_close(out_tok, out_nchw.flatten(2).transpose(1, 2))
    # with a leading cls token the grid tokens are unchanged (eval-mode BN) ...
    out_cls = m(torch.cat([cls, tokens], 1), hw_shape=(H, W))
    assert out_cls.shape == (B, 1 + H * W, 8)
    torch.testing.assert_close(out_cls[:, 1:], out_tok)
    # ... and the cls token sees no neighbours: a lone pixel (centre tap) or no DW block at all
    h = m.channel_enhance(cls)
    if extra_tokens == 'isolated':
        lone = m.spatial_enhance(h.transpose(1, 2).reshape(B, -1, 1, 1)).flatten(2).transpose(1, 2)
        torch.testing.assert_close(out_cls[:, :1], m.fc2(lone))
    else:
        torch.testing.assert_close(out_cls[:, :1], m.fc2(h))
    # the DW block really is spatial: moving one grid token changes its neighbours (n > 1)
    g2 = grid.clone()
    g2[:, :, 2, 2] += 1
    changed = (m(g2) - out_nchw).abs().sum(1) > 1e-6
    assert changed[:, 2, 2].all()
    assert changed[:, 1, 2].all() == (kernel_size > 1)


@pytest.mark.parametrize('train,extra_tokens,hw', [(True, 'isolated', (2, 3)), (False, 'isolated', (3, 1)),
                                                   (True, 'skip', (1, 3)), (False, 'skip', (2, 3))])
def test_imlp_gradcheck_float64(train, extra_tokens, hw):
    """Exact gradients (float64 finite differences) on every path, incl. 1-wide grids."""
    torch.manual_seed(0)
    m = IMLP(3, expansion_ratio=1, extra_tokens=extra_tokens).double().train(train)
    with torch.no_grad():
        for a in m.acts:
            a.alpha.uniform_(0.5, 1.5)
            a.gamma.normal_()
    H, W = hw
    x = torch.randn(2, 1 + H * W, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: m(t, hw_shape=hw), (x, ), eps=1e-6, atol=1e-5, fast_mode=True)
    g = torch.randn(2, 3, H, W, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: m(t).permute(0, 2, 3, 1), (g, ), eps=1e-6, atol=1e-5,
                                    fast_mode=True)


def test_cls_token_alone_trains_every_dw_parameter():
    """With a cls-token loss only (DeiT's head), 'isolated' reaches every parameter (DDP-safe)."""
    torch.manual_seed(0)
    x = torch.randn(2, 1 + 12, 8)
    for mode, all_used in (('isolated', True), ('skip', False)):
        m = IMLP(8, extra_tokens=mode).eval()
        m(x, hw_shape=(3, 4))[:, 0].square().sum().backward()
        used = {n for n, p in m.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
        assert (used == {n for n, _ in m.named_parameters()}) == all_used, (mode, used)


def test_num_extra_tokens_and_hw_shape_errors():
    m = IMLP(8, num_extra_tokens=1)
    m(torch.randn(1, 1 + 12, 8), hw_shape=(3, 4))
    with pytest.raises(ValueError, match='do not fit hw_shape'):
        m(torch.randn(1, 2 + 12, 8), hw_shape=(3, 4))
    with pytest.raises(ValueError, match='needs hw_shape'):
        IMLP(8)(torch.randn(1, 12, 8))
    with pytest.raises(ValueError, match='8 channels'):
        IMLP(8)(torch.randn(1, 6, 3, 4))
    # without the spatial part tokens need no grid
    assert IMLP(8, variant='channel')(torch.randn(1, 12, 8)).shape == (1, 12, 8)


def test_identity_and_drop_path_like_mmcv_ffn():
    torch.manual_seed(0)
    m = IMLP(8, add_identity=True, dropout_layer=dict(type='DropPath', drop_prob=0.5)).eval()
    x, idt = torch.randn(2, 12, 8), torch.randn(2, 12, 8)
    plain = IMLP(8).eval()
    plain.load_state_dict(m.state_dict())
    torch.testing.assert_close(m(x, (3, 4), identity=idt), idt + plain(x, (3, 4)))
    torch.testing.assert_close(m(x, (3, 4)), x + plain(x, (3, 4)))


@pytest.mark.parametrize('variant', list(IMLP.VARIANTS))
def test_every_parameter_gets_a_gradient(variant):
    torch.manual_seed(0)
    m = IMLP(8, variant=variant, act_cfg=None)
    x = torch.randn(2, 1 + 12, 8)
    m(x, hw_shape=(3, 4)).square().sum().backward()  # train mode
    assert all(p.grad is not None for p in m.parameters())
    # eval mode (BN on running stats): every gradient is non-zero; in train mode the DW
    # conv bias is cancelled by BN's batch mean, so its gradient is ~0 there.
    m.zero_grad()
    m.eval()
    m(x, hw_shape=(3, 4)).square().sum().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_activation_sum_table4():
    torch.manual_seed(0)
    m = ActivationSum(4, num_functions=6, chunk=4)
    x = torch.randn(2, 3, 4)
    ref = sum(m.beta[k] * F.gelu(m.alpha[k] * x + m.gamma[k]) + m.theta[k] for k in range(6))
    torch.testing.assert_close(m(x), ref)
    g = ActivationSum(4, act_cfg=dict(type='GELU'))
    torch.testing.assert_close(g(x), 16 * F.gelu(x))
    assert m(torch.randn(2, 4, 3, 3)).shape == (2, 4, 3, 3)


def test_imlp_registered_and_builds_under_downstream_scope():
    from mmengine.registry import DefaultScope
    import mmposmlp.models  # noqa: F401
    from mmposmlp.registry import MODELS
    for scope in ('mmposmlp', 'mmengine'):
        with DefaultScope.overwrite_default_scope(scope):
            m = MODELS.build(dict(type='mmposmlp.IMLP', embed_dims=8, act_cfg=dict(type='mmposmlp.ASoftPlus')))
        assert isinstance(m.acts[0], ASoftPlus)


# ----------------------------------------------------------------------------- Lipschitz tool
def test_gelu_slope_range():
    tool = _load_lipschitz_tool()
    lo, hi = tool._gelu_slope_range()
    x = torch.linspace(-8, 8, 200001, dtype=torch.float64, requires_grad=True)
    g, = torch.autograd.grad(F.gelu(x).sum(), x)
    assert abs(g.min().item() - lo) < 1e-6 and abs(g.max().item() - hi) < 1e-6
    assert lo < 0 < 1 < hi


@pytest.mark.parametrize('per_channel', [False, True])
def test_lipschitz_bound_dominates_empirical_ratio(per_channel):
    pytest.importorskip('cvxpy')
    tool = _load_lipschitz_tool()
    m = tool.random_module(embed_dims=6, expansion_ratio=2, seed=1)
    res = tool.lipschitz_bound(m, per_channel=per_channel)
    assert all(math.isfinite(r) and r > 0 for r in res['rho'])
    emp = max(tool.empirical_ratio(m, 3000, seed=0), tool.empirical_ratio(m, 3000, seed=1, local=True),
              tool.empirical_ratio(m, 3000, seed=2, scale=4.0))
    assert 0 < emp <= res['bound'] * (1 + 1e-9)
    # the SDP bound is a real (non-vacuous) improvement over nothing: finite and not absurd
    assert res['bound'] < 100 * emp


def test_lipschitz_per_channel_is_not_looser():
    pytest.importorskip('cvxpy')
    tool = _load_lipschitz_tool()
    m = tool.random_module(embed_dims=5, expansion_ratio=2, seed=3)
    hull = tool.lipschitz_bound(m)['bound']
    per = tool.lipschitz_bound(m, per_channel=True)['bound']
    assert per <= hull * (1 + 1e-4)


def test_lipschitz_tool_reads_a_checkpoint(tmp_path):
    pytest.importorskip('cvxpy')
    tool = _load_lipschitz_tool()
    m = tool.random_module(embed_dims=4, seed=0)
    full = IMLP(4)  # with the DW block: the tool analyses its AMLP part
    full.load_state_dict(m.state_dict(), strict=False)
    sd = {f'backbone.layers.0.ffn.{k}': v for k, v in full.state_dict().items()}
    path = str(tmp_path / 'x.pth')
    torch.save({'state_dict': sd}, path)
    res = tool.main(['--checkpoint', path, '--module', 'backbone.layers.0.ffn', '--pairs', '500'])
    assert res['empirical_ratio'] <= res['bound'] * (1 + 1e-9)
    ref = tool.lipschitz_bound(m)['bound']
    assert abs(res['bound'] - ref) <= 1e-3 * ref
    with pytest.raises(KeyError, match='IMLP modules there'):
        tool.module_from_checkpoint(path, 'backbone.layers.1.ffn')


@pytest.mark.parametrize('extra_tokens,n_extra,dw_residual', [('isolated', 1, False), ('isolated', 2, True),
                                                              ('skip', 1, False), ('skip', 1, True),
                                                              ('isolated', 0, False)])
@pytest.mark.parametrize('act', ['AGeLU', 'ASoftPlus'])
def test_inference_path_equals_the_autograd_path_fp64(extra_tokens, n_extra, dw_residual, act):
    """Without autograd in eval mode the tokens stay channels-last (the branches' activations as one
    broadcast, the eval BatchNorm per token); the result is the general path's, in float64."""
    torch.manual_seed(0)
    m = IMLP(8, extra_tokens=extra_tokens, dw_residual=dw_residual, act_cfg=dict(type=act)).double()
    with torch.no_grad():
        for a in m.acts:
            for p in (a.alpha, a.beta, a.gamma, a.theta):
                p.normal_()
        m.dw_norm.running_mean.normal_()
        m.dw_norm.running_var.uniform_(0.5, 2)
        m.dw_norm.weight.normal_()
        m.dw_norm.bias.normal_()
    m.eval()
    H, W = 3, 5
    x = torch.randn(2, n_extra + H * W, 8, dtype=torch.float64, requires_grad=True)
    general = m(x, hw_shape=(H, W))  # autograd on: the general path
    with torch.no_grad():
        fast = m(x, hw_shape=(H, W))
        assert m._stackable_acts() and m._affine_dw_norm() is not None
        cat = m.fc2(torch.cat([a(m.fc1(x)) for a in m.acts], -1))
        torch.testing.assert_close(m.fc2(m.channel_enhance(x)), cat, rtol=0, atol=1e-13)
    torch.testing.assert_close(fast, general.detach(), rtol=0, atol=1e-12)
    # training mode keeps the general path (batch statistics), whatever autograd says
    m.train()
    with torch.no_grad():
        assert m._affine_dw_norm() is None
