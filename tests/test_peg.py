"""PEG: CPVT Sec. 3.2 (F(X) + X, zero-padded k x k conv) and the Table 14 variants."""
import pytest
import torch
import torch.nn.functional as F

from mmposmlp.models.layers.peg import PEG
from mmposmlp.registry import MODELS


def _rand_(m, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return m


def test_default_peg_is_depthwise_3x3_zero_padded_residual():
    C, H, W = 6, 5, 7
    peg = _rand_(PEG(C))
    assert sum(p.numel() for p in peg.parameters()) == C * 9 + C
    x = torch.randn(2, C, H, W)
    conv = peg.proj[0]
    ref = F.conv2d(x, conv.weight, conv.bias, padding=1, groups=C) + x
    torch.testing.assert_close(peg(x), ref)
    # tokens (B, N, C) + hw_shape give the same values
    tok = x.flatten(2).transpose(1, 2)
    torch.testing.assert_close(peg(tok, (H, W)), ref.flatten(2).transpose(1, 2))


def test_zero_padding_makes_border_tokens_position_aware():
    # a constant input: with zero padding the corner/border outputs differ from the interior
    peg = PEG(1)
    with torch.no_grad():
        peg.proj[0].weight.fill_(1.)
        peg.proj[0].bias.zero_()
    y = peg(torch.ones(1, 1, 4, 4))[0, 0]
    assert y[0, 0] == 1 + 4 and y[0, 1] == 1 + 6 and y[1, 1] == 1 + 9


def test_cls_token_passes_through_untouched():
    C, H, W = 4, 3, 5
    peg = _rand_(PEG(C))
    x = torch.randn(2, 1 + H * W, C)
    y = peg(x, (H, W), num_extra_tokens=1)
    assert torch.equal(y[:, 0], x[:, 0])
    torch.testing.assert_close(y[:, 1:], peg(x[:, 1:], (H, W)))


@pytest.mark.parametrize('kwargs,expected_params', [
    (dict(kernel_size=7), 8 * 49 + 8),
    (dict(conv_type='dense'), 8 * 8 * 9 + 8),
    (dict(conv_type='separable'), 8 * 9 + 8 * 8 + 8),
    # Table 14: 4 * (Depthwise Conv 3x3 + BN + ReLU): conv without bias, BN affine
    (dict(num_layers=4, norm_cfg=dict(type='BN'), act_cfg=dict(type='ReLU')), 4 * (8 * 9 + 2 * 8)),
    (dict(num_layers=4, conv_type='dense', norm_cfg=dict(type='BN'), act_cfg=dict(type='ReLU')),
     4 * (8 * 8 * 9 + 2 * 8)),
])
def test_table14_variants(kwargs, expected_params):
    peg = MODELS.build(dict(type='mmposmlp.PEG', embed_dims=8, **kwargs))
    assert sum(p.numel() for p in peg.parameters()) == expected_params
    x = torch.randn(2, 8, 6, 5)
    y = peg(x)
    assert y.shape == x.shape
    y.sum().backward()
    assert all(p.grad is not None for p in peg.parameters())


def test_dense_variant_matches_conv2d():
    peg = _rand_(PEG(3, conv_type='dense', kernel_size=5))
    x = torch.randn(1, 3, 6, 6)
    conv = peg.proj[0]
    torch.testing.assert_close(peg(x), F.conv2d(x, conv.weight, conv.bias, padding=2) + x)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match='conv_type'):
        PEG(4, conv_type='full-ish')
    with pytest.raises(ValueError, match='odd'):
        PEG(4, kernel_size=4)
    peg = PEG(4)
    with pytest.raises(ValueError, match='hw_shape'):
        peg(torch.randn(1, 6, 4))
    with pytest.raises(ValueError, match='H\\*W'):
        peg(torch.randn(1, 7, 4), (2, 3))
    with pytest.raises(ValueError, match='channels'):
        peg(torch.randn(1, 5, 2, 3))
