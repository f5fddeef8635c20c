"""GroupedConv2d: nn.Conv2d with a tap-wise weight gradient (used on CUDA; checked here in fp64 on CPU)."""
import pytest
import torch
import torch.nn as nn

from mmposmlp.models.layers.grouped_conv import GroupedConv2d, _TapwiseWeightGradConv2d, tapwise_weight_grad

#: (in, out, kernel, stride, padding, dilation, groups, bias, input HxW): the shapes the models use and more
CASES = {
    'wave-token-fc-h': (16, 8, (1, 7), 1, (0, 3), 1, 8, False, (9, 11)),
    'wave-token-fc-w': (16, 8, (7, 1), 1, (3, 0), 1, 8, False, (9, 11)),
    'posmlp-convpm-multiplier-2': (8, 16, 3, 2, 1, 1, 8, True, (13, 10)),
    'peg-depthwise-bias': (12, 12, 3, 1, 1, 1, 12, True, (7, 8)),
    'imlp-depthwise-5x5': (6, 6, 5, 1, 2, 1, 6, False, (6, 6)),
    'dilated-strided-grouped': (8, 12, (3, 2), (2, 1), (2, 1), (2, 3), 4, True, (11, 12)),
    'no-padding-dense': (4, 6, 3, 1, 0, 1, 1, True, (5, 7)),
}


def _conv(case):
    cin, cout, k, s, p, d, g, bias, _ = CASES[case]
    torch.manual_seed(0)
    return nn.Conv2d(cin, cout, k, s, p, d, g, bias=bias).double()


@pytest.mark.parametrize('case', list(CASES))
def test_tapwise_gradients_equal_autograd_fp64(case):
    conv = _conv(case)
    hw = CASES[case][-1]
    x = torch.randn(3, conv.in_channels, *hw, dtype=torch.float64, requires_grad=True)
    y = conv(x)
    gy = torch.randn_like(y)
    ref = torch.autograd.grad(y, [x, conv.weight] + ([conv.bias] if conv.bias is not None else []), gy)

    x2 = x.detach().clone().requires_grad_()
    w2 = conv.weight.detach().clone().requires_grad_()
    b2 = None if conv.bias is None else conv.bias.detach().clone().requires_grad_()
    y2 = _TapwiseWeightGradConv2d.apply(x2, w2, b2, conv.stride, conv.padding, conv.dilation, conv.groups)
    assert torch.equal(y2, y.detach())
    got = torch.autograd.grad(y2, [x2, w2] + ([b2] if b2 is not None else []), gy)
    for name, a, b in zip(('input', 'weight', 'bias'), got, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=f'{case}: {name} gradient')


def test_tapwise_weight_grad_accumulates_in_fp32_and_reads_the_right_taps():
    """A gradient that is non-zero at one output pixel only touches the taps that pixel reads."""
    conv = _conv('posmlp-convpm-multiplier-2')
    x = torch.randn(1, 8, 13, 10, dtype=torch.float64)
    gy = torch.zeros(1, 16, 7, 5, dtype=torch.float64)
    gy[0, 3, 0, 0] = 1.0  # top-left output pixel: with padding 1 its first row/column taps read zeros
    args = (conv.weight.shape, conv.stride, conv.padding, conv.dilation, conv.groups)
    assert tapwise_weight_grad(gy.half(), x.half(), *args).dtype == torch.float32
    gw = tapwise_weight_grad(gy, x, *args)
    assert gw.dtype == torch.float64
    assert gw[3, 0, 0].abs().sum() == 0 and gw[3, 0, :, 0].abs().sum() == 0
    assert torch.allclose(gw[3, 0, 1:, 1:], x[0, 1, :2, :2])  # output channel 3 reads input channel 1
    assert gw[torch.arange(16) != 3].abs().sum() == 0


def test_grouped_conv2d_is_conv2d_off_cuda():
    conv = _conv('wave-token-fc-h')
    ours = GroupedConv2d(16, 8, (1, 7), padding=(0, 3), groups=8, bias=False).double()
    ours.load_state_dict(conv.state_dict())
    assert list(ours.state_dict()) == ['weight'] and isinstance(ours, nn.Conv2d)
    x = torch.randn(2, 16, 9, 11, dtype=torch.float64)
    assert not ours.picks_weight_grad_method(x)
    assert torch.equal(ours(x), conv(x))


def test_models_use_grouped_conv_for_their_grouped_convs():
    """Every grouped conv of the families' token mixers is a GroupedConv2d (so CUDA training gets the
    fast weight gradient); dense convs stay nn.Conv2d."""
    from mmposmlp.models.backbones.pvt_peg import PVTPEG
    from mmposmlp.models.backbones.posmlp import PosMLP
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    from mmposmlp.models.layers.imlp import IMLP
    tiny = dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32])
    models = [PosMLP(arch=dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4],
                               mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7])),
              WaveMLP(arch=dict(tiny, mlp_ratios=[2] * 4)), WaveMLP(arch='t-dw'),
              PVTPEG(arch=dict(tiny, num_heads=[1, 1, 1, 1], mlp_ratios=[2] * 4, sr_ratios=[8, 4, 2, 1])),
              IMLP(16, 32, kernel_size=3)]
    for model in models:
        convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
        grouped = [m for m in convs if m.groups > 1]
        assert grouped, type(model).__name__
        assert all(type(m) is GroupedConv2d for m in grouped), type(model).__name__
        assert all(type(m) is nn.Conv2d for m in convs if m.groups == 1), type(model).__name__
