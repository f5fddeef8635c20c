"""Window partition, padding and cyclic shift with masks, for 1D/2D/3D token grids.

Written once and used by every windowed model (PosMLP image, PosMLP-Video):

* maps are channels-last ``(B, *S, C)`` with ``len(S)`` = 1, 2 or 3 spatial/temporal axes;
* a map is padded at the end of each axis to a multiple of the window size (any input size);
* a Swin-style cyclic shift (arXiv:2103.14030, Sec. 3.2) is applied by ``torch.roll``;
* masks say which keys a query may mix with: keys must be real (not padding) and lie in the
  same region of the shifted grid as the query, so every real token mixes exactly the real
  tokens of its (shifted) window.

Masks only depend on shapes, so they are computed once per shape and cached. In a model's export
form (``in_graph=True``, passed by the modules in export mode, see
:mod:`mmposmlp.models.layers.export_mode`), :class:`InGraphWindowLayout` replaces that cache: padding,
the effective shift and the masks are then computed from the map's (possibly symbolic) shape with
tensor ops, so one exported graph serves every input size.
"""
import math
from functools import lru_cache
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from mmposmlp.utils.compat import assume_constant_result

def to_tuple(value, n: int) -> Tuple[int, ...]:
    if isinstance(value, int):
        return (value, ) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f'expected {n} values, got {value}')
    return value


def pad_to_multiple(x: torch.Tensor, window_size: Sequence[int], in_graph: bool = False) -> torch.Tensor:
    """Zero-pad the spatial axes of a channels-last map at their ends to window multiples (``in_graph``:
    the export form, for symbolic sizes)."""
    spatial = x.shape[1:-1]
    pads = []
    if in_graph:
        # sizes may be symbolic: pad (maybe by zero) to ``ceil(s / w) * w`` (visibly a multiple of
        # ``w`` to the shape solver) by a clamped gather and a mask - ``F.pad``/slicing would let
        # the exporter specialise on whether the padding is zero
        for dim, (s, w) in enumerate(zip(spatial, window_size), start=1):
            pos = torch.arange((s + w - 1) // w * w, device=x.device)
            view = [1] * x.dim()
            view[dim] = -1
            x = x.index_select(dim, pos.clamp(max=s - 1)) * (pos < s).view(view).to(x.dtype)
        return x
    for s, w in zip(reversed(spatial), reversed(window_size)):
        pads += [0, (-s) % w]
    if not any(pads):
        return x
    return F.pad(x, [0, 0] + pads)


def window_partition(x: torch.Tensor, window_size: Sequence[int]) -> torch.Tensor:
    """``(B, *S, C)`` with every ``S_i`` divisible by ``w_i`` -> ``(B, nW, N, C)``.

    Windows are numbered row-major over the window grid, tokens row-major inside a window
    (the official PosMLP layout, index = y * w + x).
    """
    B, *spatial, C = x.shape
    d = len(spatial)
    shape = [B]
    for s, w in zip(spatial, window_size):
        shape += [s // w, w]
    x = x.view(*shape, C)
    perm = [0] + [1 + 2 * i for i in range(d)] + [2 + 2 * i for i in range(d)] + [2 * d + 1]
    n_windows = math.prod([s // w for s, w in zip(spatial, window_size)])  # a list: no dynamo graph break
    return x.permute(perm).reshape(B, n_windows, math.prod(window_size), C)


def window_reverse(windows: torch.Tensor, window_size: Sequence[int],
                   spatial: Sequence[int]) -> torch.Tensor:
    """Inverse of :func:`window_partition`: ``(B, nW, N, C)`` -> ``(B, *S, C)``."""
    B, _, _, C = windows.shape
    d = len(spatial)
    grid = [s // w for s, w in zip(spatial, window_size)]
    x = windows.reshape(B, *grid, *window_size, C)
    perm = [0]
    for i in range(d):
        perm += [1 + i, 1 + d + i]
    perm.append(2 * d + 1)
    return x.permute(perm).reshape(B, *spatial, C)


@lru_cache(maxsize=256)
@torch.inference_mode(False)  # cached tensors must stay usable outside inference mode
def _window_masks(padded: Tuple[int, ...], valid: Tuple[int, ...], window: Tuple[int, ...],
                  shift: Tuple[int, ...]):
    """Key masks of every window, deduplicated into patterns (computed on CPU, cached).

    Returns ``None`` when no window needs a mask, else ``(patterns, window_pattern,
    masked_patterns)`` with ``patterns`` (K, N, N) bool (True = query m may mix key n),
    ``window_pattern`` (nW,) giving each window's pattern and ``masked_patterns`` the patterns
    that are not all-True.
    """
    d = len(padded)
    needs_pad = any(p != v for p, v in zip(padded, valid))
    if not needs_pad and not any(shift):
        return None
    if d > 1 and window[0] == 1 and padded[0] == valid[0] and not shift[0]:
        # a leading axis of one-slice windows (maps of a batch, frames) repeats the masks of one slice
        inner = _window_masks(padded[1:], valid[1:], window[1:], shift[1:])
        return None if inner is None else (inner[0], inner[1].repeat(padded[0]), inner[2])
    # Region label of every position of the shifted grid: the last window along a shifted axis
    # holds two strips that were not adjacent before the shift.
    label = torch.zeros(padded, dtype=torch.long)
    real = torch.ones(padded, dtype=torch.bool)
    for axis in range(d):
        idx = [slice(None)] * d
        idx[axis] = slice(valid[axis], None)
        real[tuple(idx)] = False
        if shift[axis]:
            region = torch.zeros(padded[axis], dtype=torch.long)
            region[padded[axis] - window[axis]:padded[axis] - shift[axis]] = 1
            region[padded[axis] - shift[axis]:] = 2
            view = [1] * d
            view[axis] = -1
            label = label * 3 + region.view(view)
    # ``label`` is defined on the shifted grid already (as Swin's img_mask); the padding
    # lives on the unshifted grid and moves with the cyclic shift.
    if any(shift):
        real = torch.roll(real, [-s for s in shift], tuple(range(d)))
    label = window_partition(label[None, ..., None], window)[0, ..., 0]  # (nW, N)
    real = window_partition(real[None, ..., None], window)[0, ..., 0]
    masks = (label[:, :, None] == label[:, None, :]) & real[:, None, :]
    n = masks.shape[-1]
    masks |= torch.eye(n, dtype=torch.bool)  # padded queries keep themselves: no empty rows
    patterns, window_pattern = torch.unique(masks.view(masks.shape[0], -1), dim=0, return_inverse=True)
    patterns = patterns.view(-1, n, n)
    if patterns.shape[0] == 1 and bool(patterns.all()):
        return None
    # patterns that actually mask something (an all-True pattern equals no mask)
    masked_patterns = [k for k in range(patterns.shape[0]) if not bool(patterns[k].all())]
    return patterns, window_pattern, masked_patterns


def _shape_constant(fn):
    """Cache ``fn`` - a function of shapes (and a device name) only that builds layout tensors -
    and mark it for torch.compile with ``assume_constant_result``: dynamo runs it at trace time
    and the (data-dependently built) result enters the graph as a constant, so whole backbones
    compile without graph breaks; eagerly it is a plain cached call. The cached tensors are made
    outside inference mode, so they stay usable for training. (The outer function is a plain
    Python function on purpose: dynamo looks through an ``lru_cache`` wrapper and would trace.)"""
    cached = lru_cache(maxsize=1024)(torch.inference_mode(False)(fn))

    def constant(*args):
        return cached(*args)

    constant.__name__, constant.__doc__ = fn.__name__, fn.__doc__
    return assume_constant_result(constant)


@_shape_constant
def _layout_masks(padded, valid, window, shift, device: str):
    """``(patterns, masked_patterns)`` of :func:`_window_masks` with the patterns on ``device``."""
    masks = _window_masks(padded, valid, window, shift)
    if masks is None:
        return None
    patterns, _, masked_patterns = masks
    return patterns.to(device), masked_patterns


@lru_cache(maxsize=256)
@torch.inference_mode(False)
def _window_order(padded: Tuple[int, ...], valid: Tuple[int, ...], window: Tuple[int, ...],
                  shift: Tuple[int, ...]) -> Optional[torch.Tensor]:
    """Row-major window index of each window of a mask-ordered layout (``None``: no masks): the
    unmasked windows first, then the windows of each masked pattern, each group in row-major order."""
    masks = _window_masks(padded, valid, window, shift)
    if masks is None:
        return None
    _, window_pattern, masked_patterns = masks
    rank = torch.zeros(int(window_pattern.max()) + 1, dtype=torch.long)
    rank[torch.tensor(masked_patterns, dtype=torch.long)] = torch.arange(1, 1 + len(masked_patterns))
    return torch.sort(rank[window_pattern], stable=True).indices


@lru_cache(maxsize=256)
@torch.inference_mode(False)
def _window_patterns(padded, valid, window, shift, ordered: bool) -> Optional[torch.Tensor]:
    """Pattern of each window of a layout, in its window order (``None``: no masks)."""
    masks = _window_masks(padded, valid, window, shift)
    if masks is None:
        return None
    window_pattern = masks[1]
    return window_pattern[_window_order(padded, valid, window, shift)] if ordered else window_pattern


@lru_cache(maxsize=256)
@torch.inference_mode(False)
def _slot_positions(padded: Tuple[int, ...], valid: Tuple[int, ...], window: Tuple[int, ...],
                    shift: Tuple[int, ...], ordered: bool) -> torch.Tensor:
    """Flat map position held by every (window, token) slot of a layout: ``(nW * N,)``."""
    pos = torch.arange(math.prod(padded)).view(1, *padded, 1)
    if any(shift):
        pos = torch.roll(pos, [-s for s in shift], tuple(range(1, 1 + len(padded))))
    pos = window_partition(pos, window)[0, ..., 0]  # (nW, N)
    order = _window_order(padded, valid, window, shift) if ordered else None
    return (pos if order is None else pos[order]).flatten()


@_shape_constant
def _transition_index(padded, valid, window, shift_from, shift_to, ordered, device: str) -> torch.Tensor:
    """Gather index taking windows of one shift to windows of another in one copy."""
    src = _slot_positions(padded, valid, window, shift_from, ordered)
    dst = _slot_positions(padded, valid, window, shift_to, ordered)
    inverse = torch.empty_like(src)
    inverse[src] = torch.arange(src.numel())
    return inverse[dst].to(device)


def _range_patterns(padded, valid, window, shift, ordered, start: int, count: int) -> Optional[torch.Tensor]:
    """Pattern of each of windows ``start .. start + count`` of a batch's ``B * nW`` windows (window ``m``
    is window ``m % nW`` of its image); ``None``: no masks."""
    window_pattern = _window_patterns(padded, valid, window, shift, ordered)
    if window_pattern is None:
        return None
    return window_pattern[torch.arange(start, start + count) % window_pattern.numel()]


@_shape_constant
def _masked_rows(padded, valid, window, shift, ordered, device: str, start: int, count: int):
    """``[(pattern, indices)]`` of the masked windows among windows ``start .. start + count`` of
    a batch's ``B * nW`` windows (window ``m`` is window ``m % nW`` of its image), local to that
    range."""
    pattern = _range_patterns(padded, valid, window, shift, ordered, start, count)
    if pattern is None:
        return []
    found = [(k, (pattern == k).nonzero().flatten()) for k in _window_masks(padded, valid, window, shift)[2]]
    return [(k, idx.to(device)) for k, idx in found if idx.numel()]


@_shape_constant
def _window_runs(padded, valid, window, shift, ordered, start: int, count: int):
    """``((pattern, first, end), ...)``: windows ``start .. start + count`` of a batch's windows cut
    into runs of consecutive windows with one key mask (``pattern`` None: unmasked), local to that
    range."""
    pattern = _range_patterns(padded, valid, window, shift, ordered, start, count)
    if pattern is None:
        return ((None, 0, count), )
    masked = set(_window_masks(padded, valid, window, shift)[2])
    ends = torch.nonzero(pattern[1:] != pattern[:-1]).flatten().add(1).tolist() + [count]
    runs, first = [], 0
    for end in ends:
        k = int(pattern[first])
        runs.append((k if k in masked else None, first, end))
        first = end
    return tuple(runs)


@_shape_constant
def _valid_slots(padded, valid, window, shift, ordered, device: str) -> torch.Tensor:
    """The (window, token) slot of a layout holding each position of the unpadded map (row-major):
    ``(prod(valid),)``, for the one-gather :meth:`WindowLayout.partition_map` / :meth:`~WindowLayout.reverse_map`."""
    src = _slot_positions(padded, valid, window, shift, ordered)  # padded position held by each slot
    slot_of = torch.empty_like(src)
    slot_of[src] = torch.arange(src.numel())
    positions = torch.arange(math.prod(padded)).view(padded)[tuple(slice(0, v) for v in valid)]
    return slot_of[positions.flatten()].to(device)


class WindowLayout:
    """How one stage's padded map is (optionally shifted and) cut into windows.

    Args:
        padded: padded spatial shape (multiples of ``window``).
        valid: the real (unpadded) spatial shape.
        window: window size per axis.
        shift: requested cyclic shift per axis. A shift is only applied along axes with more
            than one window: with a single window the shift would only cut it in pieces
            (Swin disables the shift in that case too).
        ordered: number the windows by key mask instead of row-major: the unmasked windows first,
            then those of each masked pattern, so that each mask's windows are consecutive (the
            token mixing then applies every matrix once, to whole runs of windows, see
            :meth:`runs`). The one-gather methods (:meth:`partition_map`, :meth:`convert`,
            :meth:`reverse_map`) cost the same in either order.
    """

    in_graph = False

    def __init__(self, padded: Sequence[int], valid: Sequence[int], window: Sequence[int],
                 shift: Sequence[int], device: torch.device, ordered: bool = False):
        self.padded = tuple(padded)
        self.valid = tuple(valid)
        self.window = tuple(window)
        self.shift = tuple(s if p > w else 0 for s, p, w in zip(shift, self.padded, self.window))
        self.ordered = bool(ordered)
        masks = _layout_masks(self.padded, self.valid, self.window, self.shift, str(device))
        # ``patterns`` (K, N, N) key masks; ``masked_patterns``: those that mask something
        self.patterns, self.masked_patterns = masks if masks is not None else (None, [])
        self._dims = tuple(range(1, 1 + len(self.padded)))
        self._device = device

    def masked_rows(self, start: int, count: int):
        """``[(pattern, indices)]`` of the masked windows among windows ``start .. start + count``
        of a batch's ``B * nW`` windows (window ``m`` is window ``m % nW`` of its image), local
        to that range; cached, and a constant for torch.compile."""
        return _masked_rows(self.padded, self.valid, self.window, self.shift, self.ordered, str(self._device),
                            start, count)

    def runs(self, start: int, count: int):
        """``((pattern, first, end), ...)``: windows ``start .. start + count`` of a batch's windows as runs
        of consecutive windows sharing one key mask (``pattern`` None: unmasked), local to that range;
        cached, and a constant for torch.compile. An :attr:`ordered` layout has at most one run per
        mask and image."""
        return _window_runs(self.padded, self.valid, self.window, self.shift, self.ordered, start, count)

    def _order(self, inverse: bool = False) -> Optional[torch.Tensor]:
        """Row-major index of each window (``inverse``: the reverse), ``None`` for row-major layouts."""
        order = _window_order(self.padded, self.valid, self.window, self.shift) if self.ordered else None
        if order is not None and inverse:
            order = torch.argsort(order)
        return None if order is None else order.to(self._device)

    @property
    def masked(self) -> bool:
        return self.patterns is not None

    def partition(self, x: torch.Tensor) -> torch.Tensor:
        """Padded map ``(B, *S, C)`` -> windows ``(B, nW, N, C)``."""
        if any(self.shift):
            x = torch.roll(x, [-s for s in self.shift], self._dims)
        order = self._order()
        windows = window_partition(x, self.window)
        return windows if order is None else windows.index_select(1, order)

    def convert(self, windows: torch.Tensor, target: 'WindowLayout') -> torch.Tensor:
        """Windows of this layout -> windows of ``target`` (same padded map, other shift), as
        one gather instead of reverse + roll + partition."""
        if target.ordered != self.ordered or target.valid != self.valid:
            raise ValueError('convert needs a target layout of the same map and window order: build both layouts '
                             'with map_layout (or both with make_layout) from one map')
        index = _transition_index(self.padded, self.valid, self.window, self.shift, target.shift, self.ordered,
                                  str(windows.device))
        B, nW, N, C = windows.shape
        return windows.reshape(B, nW * N, C).index_select(1, index).view(B, nW, N, C)

    def reverse(self, windows: torch.Tensor) -> torch.Tensor:
        order = self._order(inverse=True)
        x = window_reverse(windows if order is None else windows.index_select(1, order), self.window, self.padded)
        if any(self.shift):
            x = torch.roll(x, list(self.shift), self._dims)
        return x

    def partition_map(self, x: torch.Tensor) -> torch.Tensor:
        """Unpadded map ``(B, *valid, C)`` -> windows ``(B, nW, N, C)``: :func:`pad_to_multiple` and
        :meth:`partition` as one scatter into zeros (no padded copy of the map)."""
        if torch.jit.is_tracing():  # FLOP counters trace the model and know pad/permute, not index_copy_
            return self.partition(pad_to_multiple(x, self.window))
        B, C = x.shape[0], x.shape[-1]
        index = _valid_slots(self.padded, self.valid, self.window, self.shift, self.ordered, str(x.device))
        windows = x.new_zeros(B, math.prod(self.padded), C)
        windows.index_copy_(1, index, x.reshape(B, -1, C))
        return windows.view(B, -1, math.prod(self.window), C)

    def reverse_map(self, windows: torch.Tensor) -> torch.Tensor:
        """Windows -> the unpadded map ``(B, *valid, C)``, contiguous: :meth:`reverse` and :func:`crop` as
        one gather."""
        if torch.jit.is_tracing():
            return crop(self.reverse(windows), self.valid)
        B, C = windows.shape[0], windows.shape[-1]
        index = _valid_slots(self.padded, self.valid, self.window, self.shift, self.ordered, str(windows.device))
        return windows.reshape(B, -1, C).index_select(1, index).view(B, *self.valid, C)


def padded_shape(spatial: Sequence[int], window: Sequence[int]) -> Tuple[int, ...]:
    return tuple(-(-s // w) * w for s, w in zip(spatial, window))


def crop(x: torch.Tensor, valid: Sequence[int], in_graph: bool = False) -> torch.Tensor:
    """Crop a channels-last padded map back to ``valid`` (``in_graph``: the export form)."""
    if in_graph:  # a gather: a slice would let the exporter specialise on "no padding"
        for dim, v in enumerate(valid, start=1):
            x = x.index_select(dim, torch.arange(v, device=x.device))
        return x
    if tuple(x.shape[1:-1]) == tuple(valid):
        return x
    idx = (slice(None), ) + tuple(slice(0, v) for v in valid) + (slice(None), )
    return x[idx]


def map_layout(x: torch.Tensor, window: Sequence[int], shift: Optional[Sequence[int]] = None,
               in_graph: bool = False) -> WindowLayout:
    """The layout of the unpadded channels-last map ``x`` padded to window multiples, windows numbered
    by key mask (``ordered``; for :meth:`WindowLayout.partition_map`; ``in_graph``:
    :class:`InGraphWindowLayout`, the export form, row-major)."""
    valid = tuple(x.shape[1:-1])
    shift = shift if shift is not None else (0, ) * len(window)
    padded = tuple((s + w - 1) // w * w for s, w in zip(valid, window))
    if in_graph:
        return InGraphWindowLayout(padded, valid, window, shift, x.device)
    return WindowLayout(padded, valid, window, shift, x.device, ordered=True)


def make_layout(x: torch.Tensor, valid: Sequence[int], window: Sequence[int],
                shift: Optional[Sequence[int]] = None, in_graph: bool = False) -> WindowLayout:
    """The layout of the padded map ``x`` (``in_graph``: :class:`InGraphWindowLayout`, the export form)."""
    shift = shift if shift is not None else (0, ) * len(window)
    if in_graph:
        return InGraphWindowLayout(x.shape[1:-1], valid, window, shift, x.device)
    return WindowLayout(x.shape[1:-1], valid, window, shift, x.device)


def _gather_roll(x: torch.Tensor, shift, dim: int) -> torch.Tensor:
    """``torch.roll(x, -shift, dim)`` as a gather whose index is computed in the graph (``shift``
    may be symbolic, also zero)."""
    size = x.shape[dim]
    return x.index_select(dim, _wrap(torch.arange(size, device=x.device) + shift, size))


def _at_most_one(n):
    """``min(1, n)`` of a size: an int, a symbolic int (torch.export) or a 0-d tensor (the
    TorchScript tracer, e.g. under mmdeploy). A plain int takes the builtin: ``torch.sym_min`` on
    ints returns an int, which TorchDynamo before torch 2.13 cannot put in a graph (a graph break
    that ``fullgraph=True`` refuses)."""
    if isinstance(n, int):
        return min(1, n)
    return torch.clamp(n, max=1) if isinstance(n, torch.Tensor) else torch.sym_min(1, n)


def _wrap(index: torch.Tensor, size) -> torch.Tensor:
    """``index mod size`` for ``-size <= index < 2 * size`` (a symbolic divisor has no ONNX
    translation for ``remainder``)."""
    index = torch.where(index >= size, index - size, index)
    return torch.where(index < 0, index + size, index)


class InGraphWindowLayout:
    """The export form of :class:`WindowLayout`: same partition/convert/reverse, but every
    quantity that depends on the map size is computed with tensor (or symbolic-int) ops, so an
    exported graph stays exact at every input size.

    * The shift is applied only along axes with more than one window, as ``s * min(1, p - w)``
      (no Python branch on the size); rolls are gathers.
    * Windows fall into at most three classes per axis: interior (all but the last two),
      second-to-last and last (padding and the shift seams only reach the last two windows:
      padding is shorter than a window and the shift is at most one). The key masks of the
      ``3**d`` class combinations are built in the graph (:attr:`patterns`); the token mixing
      (:meth:`mix_windows`) recomputes the border windows with their masked matrices - the
      same masks as the eager layout, which only finds out which of them mask something.
    """

    in_graph = True
    masked = True  # unknown before the size is: masks are applied (all-True ones change nothing)
    ordered = False  # windows row-major

    def __init__(self, padded: Sequence, valid: Sequence, window: Sequence[int], shift: Sequence[int],
                 device: torch.device):
        self.padded = tuple(padded)
        self.valid = tuple(valid)
        self.window = tuple(int(w) for w in window)
        self.grid = tuple(p // w for p, w in zip(self.padded, self.window))
        self.shift = tuple(s * _at_most_one(p - w) if s else 0 for s, p, w in zip(shift, self.padded, self.window))
        self._device = device
        self._dims = tuple(range(1, 1 + len(self.padded)))
        self._patterns = None
        self._border = None

    def _roll(self, x: torch.Tensor, sign: int) -> torch.Tensor:
        for dim, s in zip(self._dims, self.shift):
            if not isinstance(s, int) or s:
                x = _gather_roll(x, sign * s, dim)
        return x

    def partition(self, x: torch.Tensor) -> torch.Tensor:
        return window_partition(self._roll(x, 1), self.window)

    def reverse(self, windows: torch.Tensor) -> torch.Tensor:
        return self._roll(window_reverse(windows, self.window, self.padded), -1)

    def convert(self, windows: torch.Tensor, target: 'InGraphWindowLayout') -> torch.Tensor:
        return target.partition(self.reverse(windows))

    def partition_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.partition(pad_to_multiple(x, self.window, in_graph=True))

    def reverse_map(self, windows: torch.Tensor) -> torch.Tensor:
        return crop(self.reverse(windows), self.valid, in_graph=True)

    def _axis_classes(self, axis: int):
        """Per class (interior, second-to-last, last window): ``(same_region (w, w), real (w,))``
        of the window's slots along ``axis``."""
        w, p, v, s, g = (self.window[axis], self.padded[axis], self.valid[axis], self.shift[axis],
                         self.grid[axis])
        slots = torch.arange(w, device=self._device)
        out = []
        for start in (0, (g - 2) * w, (g - 1) * w):
            q = slots + start  # slot coordinate on the shifted grid
            real = _wrap(q + s, p) < v  # the position it holds, before the shift, is real
            region = (q >= p - w).long() + (q >= p - s).long()  # Swin's strips of the last window
            out.append((region[:, None] == region[None, :], real))
        return out

    @property
    def patterns(self) -> torch.Tensor:
        """``(3**d, N, N)`` bool key masks of the class combinations (class index
        ``sum_a c_a 3**(d-1-a)``), each with the diagonal kept (padded queries keep themselves)."""
        if self._patterns is None:
            per_axis = [self._axis_classes(a) for a in range(len(self.window))]
            n = math.prod(self.window)
            eye = torch.eye(n, dtype=torch.bool, device=self._device)
            masks = []
            for combo in _class_combos(len(self.window)):
                same = torch.ones(1, 1, dtype=torch.bool, device=self._device)
                real = torch.ones(1, dtype=torch.bool, device=self._device)
                for a, c in enumerate(combo):
                    eq, r = per_axis[a][c]
                    m, w = same.shape[0], eq.shape[0]
                    same = (same[:, None, :, None] & eq[None, :, None, :]).reshape(m * w, m * w)
                    real = (real[:, None] & r[None, :]).reshape(-1)
                masks.append((same & real[None, :]) | eye)
            self._patterns = torch.stack(masks)
        return self._patterns

    def masked_rows(self, start: int, count: int):
        raise RuntimeError('an in-graph window layout mixes per class block (mix_windows), not per masked row')

    def _border_windows(self):
        """``(index, combo)``: the windows in the last two along any axis (with repeats: a window
        on two borders, or an axis with one window, is listed more than once) and the class
        combination of each. Sizes are ``sum_a 2 prod_{b != a} g_b``, built from ``arange``s, so
        no branch or slice depends on the (symbolic) grid."""
        if self._border is not None:
            return self._border
        d = len(self.grid)
        indices, combos = [], []
        for axis in range(d):
            coords = []
            for b, g in enumerate(self.grid):
                if b == axis:  # the last two windows (clamped: one window -> [0, 0])
                    i = torch.clamp(torch.arange(2, device=self._device) + (g - 2), min=0)
                else:
                    i = torch.arange(g, device=self._device)
                view = [1] * d
                view[b] = -1
                coords.append((i.view(view), ((i >= g - 2).long() + (i >= g - 1).long()).view(view)))
            index, combo = coords[0]
            for b in range(1, d):
                index = index * self.grid[b] + coords[b][0]
                combo = combo * 3 + coords[b][1]
            indices.append(index.reshape(-1))
            combos.append(combo.reshape(-1))
        self._border = torch.cat(indices), torch.cat(combos)
        return self._border

    def mix_windows(self, u: torch.Tensor, mix, base: torch.Tensor, masked: torch.Tensor,
                    bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Token mixing of ``u`` (G, K, B * nW, N): ``mix(base, u)`` for every window, then the
        windows that may need a mask (the last two along any axis) recomputed with the masked
        matrix of their class combination (``masked`` (3**d, G, N, N)) and written back."""
        G, K, _, N = u.shape
        n_windows = math.prod(self.grid)
        out = mix(base, u).view(G, K, -1, n_windows, N)
        index, combo = self._border_windows()
        rows = u.view(G, K, -1, n_windows, N).index_select(3, index)  # (G, K, B, Wb, N)
        mats = masked.to(u.dtype).index_select(0, combo)  # (Wb, G, N, N)
        fixed = torch.einsum('wgmn,gkbwn->gkbwm', mats, rows)
        if bias is not None:
            fixed = fixed + bias.to(u.dtype)
        return out.index_copy(3, index, fixed).view(G, K, -1, N)


@lru_cache(maxsize=None)
def _class_combos(d: int):
    combos = [()]
    for _ in range(d):
        combos = [c + (k, ) for c in combos for k in range(3)]
    return combos
