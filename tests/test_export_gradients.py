"""The export form (the in-graph window layout that ONNX / torch.export graphs contain) is differentiated
like the eager form: fp64 parameter and input gradients of small PosMLP and PosMLP-Video backbones agree,
with padded, shifted and unpadded windows, one and several windows per axis.
"""
import pytest
import torch

from mmposmlp.models.layers.export_mode import set_export_mode

SMALL_POSMLP = dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4],
                    mlp_ratios=[2, 2, 2, 2], window_sizes=[4, 4, 4, 2])
SMALL_VIDEO = dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4], mlp_ratio=2,
                   window_sizes=[[4, 4, 4], [4, 4, 4], [4, 4, 4], [4, 2, 2]])


def _perturbed(model):
    """fp64, eval, every parameter moved off its initial value (zero-initialised layers would hide the
    gradients that pass through them)."""
    model = model.double().eval()
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model


def _forward_backward(model, x, export):
    """Outputs, parameter gradients and input gradient of a fixed random projection of the outputs."""
    set_export_mode(model, export)
    model.zero_grad()
    x = x.clone().requires_grad_(True)
    out = model(x)
    out = out if isinstance(out, (tuple, list)) else (out, )
    gen = torch.Generator().manual_seed(1)
    sum((o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum() for o in out).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    set_export_mode(model, False)
    return [o.detach() for o in out], grads, x.grad


def _assert_export_gradients_equal_eager(model, x):
    ref_out, ref_grads, ref_x = _forward_backward(model, x, export=False)
    out, grads, gx = _forward_backward(model, x, export=True)
    for a, b in zip(ref_out, out):
        assert (a - b).abs().max() < 1e-12
    assert grads.keys() == ref_grads.keys()
    for name, ref in ref_grads.items():
        torch.testing.assert_close(grads[name], ref, rtol=1e-10, atol=1e-10 * ref.abs().max().item(),
                                   msg=lambda m, name=name: f'{name}: {m}')
    torch.testing.assert_close(gx, ref_x, rtol=1e-10, atol=1e-10 * ref_x.abs().max().item())


@pytest.mark.parametrize('shift', [False, True], ids=['plain', 'shifted'])
@pytest.mark.parametrize('hw', [(64, 64), (70, 93), (16, 16), (37, 129)],
                         ids=['unpadded', 'padded', 'one-window', 'padded-wide'])
def test_posmlp_export_gradients_equal_eager(shift, hw):
    """(64, 64): no padding, several windows per axis (corner windows lie on two borders); (16, 16):
    one window per axis from stage 1 on; the others are padded."""
    from mmposmlp.models.backbones.posmlp import PosMLP
    torch.manual_seed(0)
    model = _perturbed(PosMLP(arch=SMALL_POSMLP, shift=shift, out_indices=(0, 1, 2, 3), drop_path_rate=0.))
    _assert_export_gradients_equal_eager(model, torch.randn(1, 3, *hw, dtype=torch.float64))


@pytest.mark.parametrize('block_type', ['PoTGU+PoSGU', 'PoSTGU'])
def test_posmlp_video_export_gradients_equal_eager(block_type):
    """A padded 8-frame 40x40 clip."""
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    torch.manual_seed(0)
    model = _perturbed(PosMLPVideo(arch=SMALL_VIDEO, block_type=block_type, drop_path_rate=0.))
    _assert_export_gradients_equal_eager(model, torch.randn(1, 3, 8, 40, 40, dtype=torch.float64))


@pytest.mark.parametrize('grid', [(1, ), (2, ), (5, ), (1, 1), (1, 3), (2, 2), (4, 3), (1, 2, 3), (3, 3, 3)])
def test_each_border_window_has_one_first_listing(grid):
    """The export layout lists the windows in the last two along any axis (with repeats); exactly one
    listing of each such window, and of no other, is marked first (the one that carries its gradient)."""
    import itertools

    from mmposmlp.models.layers.windows import InGraphWindowLayout
    window = (2, ) * len(grid)
    padded = tuple(g * w for g, w in zip(grid, window))
    layout = InGraphWindowLayout(padded, padded, window, (0, ) * len(grid), torch.device('cpu'))
    index, _, first = layout._border_windows()
    expected = [n for n, pos in enumerate(itertools.product(*[range(g) for g in grid]))
                if any(i >= g - 2 for i, g in zip(pos, grid))]
    assert sorted(set(index.tolist())) == expected
    assert sorted(index[first].tolist()) == expected


@pytest.mark.slow
def test_torch_export_graph_gradients_equal_eager():
    """One torch.export graph of the export form (dynamic height and width; about 10 s to export on
    2 cores) is differentiated like the eager model at several sizes, padded and unpadded."""
    from mmposmlp.models.backbones.posmlp import PosMLP
    from mmposmlp.models.layers.export_mode import export_mode
    torch.manual_seed(0)
    model = _perturbed(PosMLP(arch=SMALL_POSMLP, shift=True, out_indices=(0, 1, 2, 3), drop_path_rate=0.))
    dims = {2: torch.export.Dim.DYNAMIC, 3: torch.export.Dim.DYNAMIC}
    with export_mode(model):
        graph = torch.export.export(model, (torch.randn(1, 3, 70, 93, dtype=torch.float64), ),
                                    dynamic_shapes=(dims, )).module()

    def grads(module, x):
        x = x.clone().requires_grad_(True)
        gen = torch.Generator().manual_seed(1)
        loss = sum((o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum() for o in module(x))
        return torch.autograd.grad(loss, [x, *module.parameters()])

    for hw in [(70, 93), (96, 96), (67, 129)]:
        x = torch.randn(1, 3, *hw, dtype=torch.float64)
        for ref, got in zip(grads(model, x), grads(graph, x), strict=True):
            torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10 * ref.abs().max().item())
