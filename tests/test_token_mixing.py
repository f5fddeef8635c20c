"""Training fast paths of the gating unit against the plain autograd composition, in fp64.

* the gated channel MLP as one autograd function (``GatedMLPFunction``): values and every gradient,
  padded and shifted windows, with and without its LayerNorm; it keeps less for backward;
* positional matrices built one group at a time (``GroupwiseMixingFunction``, the joint PoSTGU
  windows): values and gradients equal the dense form, and the dense ``(G, N, N)`` is never built.
"""
import pytest
import torch
import torch.nn as nn

from mmposmlp.models.layers import gating
from mmposmlp.models.layers.gating import GATE_TYPES, PositionalGatingUnit
from mmposmlp.models.layers.windows import make_layout, pad_to_multiple


def _randomized(module, std=0.5):
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)
    return module


def _saved_bytes(fn):
    """Bytes autograd keeps for backward while ``fn()`` runs (each storage once)."""
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(seen.values())


def _grads(out, params):
    weight = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    return torch.autograd.grad((out * weight).sum(), params, allow_unused=True)


@pytest.mark.parametrize('gate_type', sorted(set(GATE_TYPES) - {'sgu'}))
@pytest.mark.parametrize('hw,shift', [((12, 12), (0, 0)), ((11, 15), (3, 3))])
@pytest.mark.parametrize('with_norm', [True, False])
@pytest.mark.parametrize('window', [(6, 6), (2, 2)])
def test_fused_gated_mlp_equals_autograd_composition(gate_type, hw, shift, with_norm, window):
    """(6, 6): the mixed half is kept; (2, 2): the mixing costs less than a quarter of the FCs and is
    recomputed in backward."""
    torch.manual_seed(0)
    cin, hidden, groups = 8, 48, 4  # K = 6 channels per group != G = 4
    shift = tuple(min(s, w // 2) for s, w in zip(shift, window))
    fc1, fc2 = nn.Linear(cin, hidden).double(), nn.Linear(hidden // 2, 5).double()
    norm = _randomized(nn.LayerNorm(cin, eps=1e-6).double(), 0.3) if with_norm else None
    gate = _randomized(PositionalGatingUnit(hidden, window, groups, gate_type).double())
    act = nn.GELU()
    x = pad_to_multiple(torch.randn(2, *hw, cin, dtype=torch.float64), window)
    layout = make_layout(x, hw, window, shift)
    windows = layout.partition(x).requires_grad_()
    params = [windows, *fc1.parameters(), *fc2.parameters(), *gate.parameters()]
    params += list(norm.parameters()) if norm is not None else []
    plain = fc2(gate(act(fc1(norm(windows) if norm is not None else windows)), layout))
    fused, saved = _saved_bytes(lambda: gate.forward_mlp(windows, fc1, act, fc2, layout, norm=norm))
    _, saved_plain = _saved_bytes(lambda: fc2(gate(act(fc1(norm(windows) if norm is not None else windows)),
                                                   layout)))
    assert (fused - plain).abs().max() < 1e-12
    for name_grad, (a, b) in enumerate(zip(_grads(plain, params), _grads(fused, params))):
        assert a is not None and b is not None, name_grad
        assert (a - b).abs().max() < 1e-10, name_grad
    # not kept for backward (recomputed): the LayerNorm's output, the activation, the gated product
    tokens = windows[..., 0].numel()
    recomputed = hidden // 2 if window == (2, 2) else 0
    assert saved_plain - saved >= tokens * ((cin if with_norm else 0) + hidden + hidden // 2 + recomputed) * 8


def test_fused_path_not_taken_under_no_grad_or_hooks():
    torch.manual_seed(1)
    fc1, fc2, act = nn.Linear(8, 32), nn.Linear(16, 8), nn.GELU()
    gate, norm = PositionalGatingUnit(32, (4, 4), 4), nn.LayerNorm(8)
    calls = []
    norm.register_forward_hook(lambda m, i, o: calls.append(1))
    x = torch.randn(1, 2, 16, 8, requires_grad=True)
    gate.forward_mlp(x, fc1, act, fc2, norm=norm).sum().backward()
    assert calls == [1]  # a hooked norm is called as a module


@pytest.mark.parametrize('gate_type', ['glrpe', 'ggqpe', 'lrpe-m', 'gqpe'])
def test_groupwise_matrices_equal_dense(gate_type, monkeypatch):
    """A padded 3D window (joint spatio-temporal unit): built one group at a time, never all at once."""
    torch.manual_seed(2)
    window, cin, hidden, groups = (3, 4, 4), 6, 24, 3
    fc1, fc2, act = nn.Linear(cin, hidden).double(), nn.Linear(hidden // 2, 5).double(), nn.GELU()
    norm = _randomized(nn.LayerNorm(cin).double(), 0.3)
    gate = _randomized(PositionalGatingUnit(hidden, window, groups, gate_type).double())
    valid = (5, 7, 6)
    x = pad_to_multiple(torch.randn(2, *valid, cin, dtype=torch.float64), window)
    layout = make_layout(x, valid, window)
    assert layout.masked
    windows = layout.partition(x).requires_grad_()
    params = [windows, *fc1.parameters(), *fc2.parameters(), *gate.parameters(), *norm.parameters()]

    def run():
        return gate.forward_mlp(windows, fc1, act, fc2, layout, norm=norm)

    dense = run()
    dense_grads = _grads(dense, params)
    with torch.no_grad():
        dense_eval = run()
    monkeypatch.setattr(gating, 'GROUPWISE_BYTES', 0)

    def refuse(*args):
        raise AssertionError('the dense (G, N, N) matrices were built')

    monkeypatch.setattr(gate.mixing, 'logits', refuse)
    grouped = run()
    for i, (a, b) in enumerate(zip(dense_grads, _grads(grouped, params))):
        assert (a - b).abs().max() < 1e-10, i
    assert (grouped - dense).abs().max() < 1e-12
    with torch.no_grad():
        assert (run() - dense_eval).abs().max() < 1e-12


@pytest.mark.parametrize('gate_type', ['glrpe', 'ggqpe'])
@pytest.mark.parametrize('by_run', [True, False])
def test_groupwise_fused_gated_mlp_equals_autograd_composition(gate_type, by_run, monkeypatch):
    """Matrices built one group at a time inside the fused function (padded and shifted mask-ordered
    windows, fp64): the values and every gradient of the plain composition (whose mixing is built one
    group at a time too), the dense matrices never built, and the block input, ``fc1``'s output and the
    mixed half the only hidden-sized tensors kept for backward."""
    from mmposmlp.models.layers.windows import map_layout
    torch.manual_seed(5)
    window, cin, hidden, groups, valid = (4, 4), 8, 48, 4, (11, 15)
    monkeypatch.setattr(gating, 'RUNS_MIXING_SHARE', 0 if by_run else 1e9)
    fc1, fc2, act = nn.Linear(cin, hidden).double(), nn.Linear(hidden // 2, 5).double(), nn.GELU()
    norm = _randomized(nn.LayerNorm(cin).double(), 0.3)
    gate = _randomized(PositionalGatingUnit(hidden, window, groups, gate_type).double())
    x = torch.randn(2, *valid, cin, dtype=torch.float64)
    layout = map_layout(x, window, (2, 2))
    windows = layout.partition_map(x).requires_grad_()
    params = [windows, *fc1.parameters(), *fc2.parameters(), *gate.parameters(), *norm.parameters()]
    monkeypatch.setattr(gating, 'GROUPWISE_BYTES', 0)

    def refuse(*args):
        raise AssertionError('the dense (G, N, N) matrices were built')

    monkeypatch.setattr(gate.mixing, 'logits', refuse)
    plain, saved_plain = _saved_bytes(lambda: fc2(gate(act(fc1(norm(windows))), layout)))
    fused, saved = _saved_bytes(lambda: gate.forward_mlp(windows, fc1, act, fc2, layout, norm=norm))
    assert (fused - plain).abs().max() < 1e-12
    for i, (a, b) in enumerate(zip(_grads(plain, params), _grads(fused, params))):
        assert a is not None and b is not None and (a - b).abs().max() < 1e-10, i
    tokens = windows[..., 0].numel()
    assert saved_plain - saved >= tokens * (cin + hidden + hidden // 2) * 8
    assert saved <= tokens * (cin + hidden + hidden // 2) * 8 + (1 << 16)  # x, h, P X1 + b; parameters aside
