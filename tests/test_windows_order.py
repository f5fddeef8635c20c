"""Mask-ordered window layouts (``WindowLayout(ordered=True)``, what :func:`map_layout` builds): the
windows are numbered by key mask so that each mask's windows are consecutive; every way in and out
of the windows agrees with that numbering, and the token mixing gives what row-major windows give."""
import math

import pytest
import torch
import torch.nn as nn

from mmposmlp.models.layers import gating
from mmposmlp.models.layers.gating import PositionalGatingUnit
from mmposmlp.models.layers.windows import WindowLayout, map_layout, pad_to_multiple, padded_shape
from test_token_mixing import _randomized, _saved_bytes

CASES = [((11, 15), (4, 4), (0, 0)), ((11, 15), (4, 4), (2, 2)), ((12, 12), (4, 4), (2, 2)),
         ((9, 14), (4, 4), (0, 2)), ((8, 8), (4, 4), (0, 0))]


def _layouts(valid, window, shift):
    x = torch.zeros(1, *valid, 1)
    ordered = map_layout(x, window, shift)
    plain = WindowLayout(padded_shape(valid, window), valid, window, shift, x.device)
    return ordered, plain


@pytest.mark.parametrize('valid,window,shift', CASES)
def test_ordered_windows_are_the_row_major_windows_renumbered(valid, window, shift):
    ordered, plain = _layouts(valid, window, shift)
    assert ordered.ordered and not plain.ordered
    x = torch.randn(2, *valid, 3)
    a, b = ordered.partition_map(x), plain.partition_map(x)
    # the same windows, each once, in another order
    key = lambda w: sorted(map(tuple, w.reshape(-1, w.shape[-2] * w.shape[-1]).tolist()))  # noqa: E731
    assert key(a[0]) == key(b[0])
    assert torch.equal(ordered.reverse_map(a), x)
    assert torch.equal(ordered.partition(pad_to_multiple(x, window)), a)  # the view-based form agrees
    assert torch.equal(ordered.reverse(a)[:, :valid[0], :valid[1]], x)


@pytest.mark.parametrize('valid,window,shift', CASES)
def test_ordered_runs_hold_one_mask_each(valid, window, shift):
    ordered, plain = _layouts(valid, window, shift)
    nw = math.prod(p // w for p, w in zip(ordered.padded, window))
    B = 3
    runs = ordered.runs(0, B * nw)
    assert runs[0][1] == 0 and runs[-1][2] == B * nw
    assert all(r[2] == s[1] for r, s in zip(runs, runs[1:]))
    masks = len(ordered.masked_patterns)
    assert len(runs) == (B * (1 + masks) if masks else 1)  # one run per mask and image
    # the masked windows of the runs are those masked_rows lists, with the same patterns
    listed = {k: set(idx.tolist()) for k, idx in ordered.masked_rows(0, B * nw)}
    from_runs = {}
    for k, first, end in runs:
        if k is not None:
            from_runs.setdefault(k, set()).update(range(first, end))
    assert listed == from_runs
    # windows of a row-major layout with the same masks fall into at least as many runs
    assert len(plain.runs(0, B * nw)) >= len(runs)
    # a range inside the batch: the runs are local to it
    sub = ordered.runs(nw - 1, nw + 2)
    assert sub[0][1] == 0 and sub[-1][2] == nw + 2


@pytest.mark.parametrize('valid,window,shift', CASES)
@pytest.mark.parametrize('cin', [8, 40, 160])
def test_token_mixing_on_ordered_windows_equals_row_major(valid, window, shift, cin, monkeypatch):
    """The gated MLP (training function, plain no-grad path in chunks) on a map, in fp64: the same
    output map and gradients whether the windows are numbered by mask or row-major. ``cin`` 40: the
    mixing costs less than a quarter of the FCs and is recomputed in backward; 160: less than
    ``RUNS_MIXING_SHARE`` of them, so the ordered windows are not processed run by run."""
    torch.manual_seed(0)
    hidden, groups = 48, 4
    fc1, fc2 = nn.Linear(cin, hidden).double(), nn.Linear(hidden // 2, 5).double()
    norm = _randomized(nn.LayerNorm(cin).double(), 0.3)
    gate = _randomized(PositionalGatingUnit(hidden, window, groups, 'ggqpe').double())
    act = nn.GELU()
    ordered, plain = _layouts(valid, window, shift)
    x = torch.randn(2, *valid, cin, dtype=torch.float64, requires_grad=True)
    params = [x, *fc1.parameters(), *fc2.parameters(), *gate.parameters(), *norm.parameters()]
    weight = torch.randn(2, *valid, 5, dtype=torch.float64)

    def run(layout):
        return layout.reverse_map(gate.forward_mlp(layout.partition_map(x), fc1, act, fc2, layout, norm=norm))

    ref, saved_ref = _saved_bytes(lambda: run(plain))
    ref_grads = torch.autograd.grad((ref * weight).sum(), params)
    by_run = gate._by_run(gate._group_major_weights(fc1, fc2))
    assert by_run == (cin < 160)
    out, saved = _saved_bytes(lambda: run(ordered))
    assert saved == saved_ref  # the hidden tensor kept run by run takes no more room
    assert (out - ref).abs().max() < 1e-12
    for i, (a, b) in enumerate(zip(ref_grads, torch.autograd.grad((out * weight).sum(), params))):
        assert (a - b).abs().max() < 1e-10, i
    monkeypatch.setattr(gating, 'CHUNK_BYTES', hidden * 16 * 8 * 3)  # chunks of 3 windows
    with torch.no_grad():
        assert (run(ordered) - ref).abs().max() < 1e-12
        assert (run(plain) - ref).abs().max() < 1e-12


def _reference_gated_mlp(x, fc1, act, fc2, norm, gate, window, shift):
    """``fc2(PoSGU(GELU(fc1(LN x))))`` on the map ``x`` from first principles: row-major windows of the
    padded (rolled) map, every window mixed by the matrix of its own key mask (an einsum per window)."""
    from mmposmlp.models.layers.windows import _window_patterns, window_partition, window_reverse
    B, H, W, _ = x.shape
    padded = padded_shape((H, W), window)
    layout = WindowLayout(padded, (H, W), window, shift, x.device)
    y = torch.roll(pad_to_multiple(norm(x), window), [-s for s in layout.shift], (1, 2))
    h = act(fc1(window_partition(y, window)))  # (B, nW, N, hidden)
    u, v = h.chunk(2, dim=-1)
    base, masked = gate.mixing.matrices(layout.patterns)
    pattern = _window_patterns(layout.padded, layout.valid, layout.window, layout.shift, False)
    mats = base.expand(pattern.numel(), *base.shape).clone()
    for k in layout.masked_patterns:
        mats[pattern == k] = masked[k]
    per_channel = mats[:, torch.arange(u.shape[-1]) % gate.groups]  # (nW, C1, N, N), channel c: group c mod G
    mixed = torch.einsum('wcmn,bwnc->bwmc', per_channel, u) + gate.token_bias[:, None]
    z = fc2(mixed * v)
    z = torch.roll(window_reverse(z, window, padded), list(layout.shift), (1, 2))
    return z[:, :H, :W]


@pytest.mark.parametrize('valid,window,shift', [c for c in CASES if c[0] != (8, 8)])
@pytest.mark.parametrize('by_run', [True, False])
def test_masked_windows_equal_first_principles(valid, window, shift, by_run, monkeypatch):
    """fp64, padded and shifted windows: the fused training function, the plain autograd composition and
    the chunked inference path on mask-ordered windows, run by run and with only the mixing run by run,
    give the values and every gradient of the per-window reference."""
    torch.manual_seed(3)
    cin, hidden, groups = 8, 48, 4
    monkeypatch.setattr(gating, 'RUNS_MIXING_SHARE', 0 if by_run else 1e9)
    fc1, fc2 = nn.Linear(cin, hidden).double(), nn.Linear(hidden // 2, 5).double()
    norm = _randomized(nn.LayerNorm(cin).double(), 0.3)
    gate = _randomized(PositionalGatingUnit(hidden, window, groups, 'ggqpe').double())
    act = nn.GELU()
    x = torch.randn(2, *valid, cin, dtype=torch.float64, requires_grad=True)
    params = [x, *fc1.parameters(), *fc2.parameters(), *gate.parameters(), *norm.parameters()]
    weight = torch.randn(2, *valid, 5, dtype=torch.float64)
    layout = map_layout(x, window, shift)
    assert len(layout.runs(0, 2 * layout.partition_map(x).shape[1])) > 2  # several masks per image

    def fused():
        return layout.reverse_map(gate.forward_mlp(layout.partition_map(x), fc1, act, fc2, layout, norm=norm))

    def plain():
        return layout.reverse_map(fc2(gate(act(fc1(norm(layout.partition_map(x)))), layout)))

    ref = _reference_gated_mlp(x, fc1, act, fc2, norm, gate, window, shift)
    ref_grads = torch.autograd.grad((ref * weight).sum(), params)
    for path in (fused, plain):
        out = path()
        assert (out - ref).abs().max() < 1e-12, path.__name__
        for i, (a, b) in enumerate(zip(ref_grads, torch.autograd.grad((out * weight).sum(), params))):
            assert (a - b).abs().max() < 1e-10, (path.__name__, i)
    monkeypatch.setattr(gating, 'CHUNK_BYTES', hidden * 16 * 8 * 3)  # chunks of 3 windows
    with torch.no_grad():
        assert (fused() - ref).abs().max() < 1e-12


def _mixing_flops(fn):
    """Multiply-adds of the batched matmuls (the token mixing; the FCs are plain GEMMs) while ``fn()`` runs."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        fn()
    ops = counter.get_flop_counts()['Global']
    return sum(n for op, n in ops.items() if 'bmm' in str(op))


@pytest.mark.parametrize('valid,shift', [((11, 15), (0, 0)), ((11, 15), (2, 2)), ((12, 16), (2, 2))])
@pytest.mark.parametrize('cin,groupwise', [(8, False), (160, False), (8, True)])
def test_every_window_is_mixed_once(valid, shift, cin, groupwise, monkeypatch):
    """A padded and/or shifted map of 3 x 4 windows costs the token mixing of 12 windows, as a map of 3 x 4
    windows without any mask does - in the training function (forward and backward), in inference and in the
    plain composition: no window is mixed with the unmasked matrix and again with its own. ``cin`` 160:
    the mixing is below ``RUNS_MIXING_SHARE`` of the FCs, so only the mixing goes run by run; ``groupwise``:
    the matrices are built one group at a time."""
    torch.manual_seed(4)
    monkeypatch.setattr(gating, 'GROUPWISE_BYTES', 0 if groupwise else gating.GROUPWISE_BYTES)
    window, hidden, groups = (4, 4), 48, 4
    fc1, fc2, act = nn.Linear(cin, hidden).double(), nn.Linear(hidden // 2, 5).double(), nn.GELU()
    norm = nn.LayerNorm(cin).double()
    gate = PositionalGatingUnit(hidden, window, groups, 'glrpe').double()

    def counts(valid, shift):
        x = torch.randn(2, *valid, cin, dtype=torch.float64, requires_grad=True)
        layout = map_layout(x, window, shift)

        def train():
            windows = layout.partition_map(x)
            gate.forward_mlp(windows, fc1, act, fc2, layout, norm=norm).sum().backward()

        def infer():
            with torch.no_grad():
                gate.forward_mlp(layout.partition_map(x), fc1, act, fc2, layout, norm=norm)

        def plain():
            fc2(gate(act(fc1(norm(layout.partition_map(x)))), layout)).sum().backward()

        return layout, [_mixing_flops(f) for f in (train, infer, plain)]

    layout, masked = counts(valid, shift)
    plain_layout, unmasked = counts((12, 16), (0, 0))
    assert layout.masked and not plain_layout.masked
    assert min(unmasked) > 0
    assert masked == unmasked
