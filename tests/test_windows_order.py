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
