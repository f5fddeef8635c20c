"""Relative positions inside a window and the positional token-mixing matrices built on them.

PosMLP (arXiv:2207.07284) parameterises the token-mixing matrix of a gating unit by relative
positions only. For ``G`` channel groups and a window of ``N`` tokens, every module here
returns mixing matrices ``P`` of shape ``(G, N, N)`` (query ``m``, key ``n``):

* :class:`GaussianPositionMixing` - (G)GQPE, Eq. (5)-(8), (12)-(13):
  ``P_g[m, n] = softmax_n(-1/2 (d - c_g)^T Sigma_g (d - c_g))`` with ``d = p_n - p_m``.
* :class:`LearnedPositionMixing` - LRPE / GLRPE, Eq. (11): ``P_g[m, n] = r_g[p_m - p_n]``
  (a learned table per relative offset, Swin-style index, no softmax); with ``token_fc`` it
  is LRPE-M, Eq. (10): ``W + r``.
* :class:`DenseTokenMixing` - gMLP's token FC ``W`` (N x N), the SGU baseline, Eq. (1).

Offsets are taken per axis in tensor order ((t,) y, x) as key minus query everywhere; the
official PosMLP code uses ``dx = x_n - x_m`` but ``dy = y_m - y_n`` for GQPE, which the
checkpoint converter absorbs exactly (see ``converters.posmlp.convert_official_posmlp``).

Masks (padding, shifted windows) act on keys: ``-inf`` before the softmax for GQPE, zero
weight for LRPE and the dense matrix.
"""
import math
from typing import Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_

from mmposmlp.utils.compat import is_compiling
from .export_mode import ExportModeMixin, exporting

_INTERP = {1: 'linear', 2: 'bicubic', 3: 'trilinear'}


def window_coords(window: Sequence[int]) -> torch.Tensor:
    """Integer coordinates of the tokens of a window, row-major: ``(N, D)``."""
    grids = torch.meshgrid(*[torch.arange(w) for w in window], indexing='ij')
    return torch.stack([g.flatten() for g in grids], dim=-1)


def relative_offsets(window: Sequence[int]) -> torch.Tensor:
    """``(N, N, D)`` offsets ``p_key - p_query`` (float)."""
    c = window_coords(window).to(torch.float64)
    return c[None, :, :] - c[:, None, :]


def relative_position_index(window: Sequence[int]) -> torch.Tensor:
    """Swin-style ``(N, N)`` index of the offset ``p_query - p_key`` into a table of
    ``prod(2w - 1)`` entries (mixed radix, first axis most significant)."""
    window = tuple(int(w) for w in window)
    with torch.device('cpu'):  # never a meta/cuda tensor of a default-device context
        c = window_coords(window)
        d = c[:, None, :] - c[None, :, :] + torch.tensor(window) - 1
        index = torch.zeros(d.shape[:2], dtype=torch.long)
        for axis, w in enumerate(window):
            index = index * (2 * w - 1) + d[..., axis]
        return index


def axis_position_indices(window: Sequence[int]) -> List[torch.Tensor]:
    """Per axis ``a``, the ``(w_a, w_a)`` index ``q_a - k_a + w_a - 1`` (:func:`relative_position_index`
    of that axis alone), shaped to broadcast over ``(*query, *key)`` coordinates: indexing a table of
    ``(2w_0 - 1, .., 2w_{D-1} - 1, ...)`` entries with all of them gives ``table[relative_position_index]``
    of the whole window, without the ``(N, N)`` index in memory (78 MB of int64 for a 16x14x14 window)."""
    dims = len(window)
    out = []
    for axis, w in enumerate(window):
        shape = [1] * (2 * dims)
        shape[axis] = shape[dims + axis] = int(w)
        out.append(relative_position_index((int(w), )).view(shape))
    return out


class RelativeTableLookup(torch.autograd.Function):
    """``table[relative_position_index(window)]`` for ``table`` (``prod(2w - 1)``, ...): ``(N, N, ...)``.

    The matrix is block-Toeplitz: with the table's grid reversed on every axis (``o' = 2w - 2 - o``), the
    keys of query ``q`` on an axis are the slice ``w - 1 - q .. 2w - 2 - q`` of that axis. Forward: axis by
    axis (last first), the ``w`` slices of every query are stacked - copies of contiguous runs, no index
    read (bit-identical to the gather, several times faster). Backward: ``d table[o] = sum_{q - k = o} d P[q, k]``,
    summed axis by axis as ``w`` shifted slice additions per axis (deterministic; a gather's own
    backward scatters every element serially)."""

    @staticmethod
    def forward(ctx, table: torch.Tensor, window: Tuple[int, ...]) -> torch.Tensor:
        ctx.window, ctx.table_shape = window, table.shape
        dims, rest = len(window), table.shape[1:]
        x = table.view(*(2 * w - 1 for w in window), *rest).flip(tuple(range(dims)))
        for axis in reversed(range(dims)):
            # (q of later axes, o' of axes <= axis, k of later axes, rest): o' of ``axis`` is dim dims - 1
            w = window[axis]
            x = torch.stack([x.narrow(dims - 1, w - 1 - q, w) for q in range(w)])
        n = math.prod(window)
        return x.view(n, n, *rest)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        window, dims = ctx.window, len(ctx.window)
        x = grad.reshape(*window, *window, *grad.shape[2:])
        for axis, w in enumerate(window):
            # (offsets of earlier axes, q_axis.., k_axis.., rest) -> (q_axis, k_axis, ...)
            x = x.movedim((axis, dims), (0, 1))
            rev = x.new_zeros(2 * w - 1, *x.shape[2:])  # at 2w - 2 - (q - k + w - 1) = w - 1 - q + k
            for q in range(w):
                rev[w - 1 - q:2 * w - 1 - q] += x[q]
            x = rev.movedim(0, axis)
        return x.flip(tuple(range(dims))).reshape(ctx.table_shape), None


def resize_grid_values(values: torch.Tensor, old: Sequence[int], new: Sequence[int]) -> torch.Tensor:
    """Resize values laid out on a grid ``old`` (first dims flattened) to grid ``new``.

    ``values`` is ``(prod(old), ...)``; interpolation is linear/bicubic/trilinear for 1/2/3
    axes (used for LRPE tables and token biases when window sizes differ).
    """
    if tuple(old) == tuple(new):
        return values
    rest = values.shape[1:]
    x = values.reshape(*old, -1).permute(-1, *range(len(old)))[None].to(torch.float64)
    x = F.interpolate(x, size=tuple(new), mode=_INTERP[len(old)], align_corners=False)
    return x[0].permute(*range(1, len(new) + 1), 0).reshape(math.prod(new), *rest).to(values.dtype)


def cached_on_tensors(owner: nn.Module, name: str, tensors: Sequence[Optional[torch.Tensor]], compute: Callable,
                      extra=None, max_entries: int = 1):
    """``compute()``, cached in ``owner.__dict__[name]`` while autograd is off (inference) and
    recomputed with autograd, under torch.compile and while exporting. The key is the identity and version counter
    of ``tensors`` (plus ``extra``): every in-place update - optimiser step, ``load_state_dict``,
    ``copy_`` - and every new storage (``.to()``, ``.half()``) invalidates the entry."""
    if torch.is_grad_enabled() or is_compiling() or exporting(owner):
        return compute()
    key = (tuple(None if t is None else (t.data_ptr(), t._version, t.dtype, t.device) for t in tensors), extra)
    cache = owner.__dict__.setdefault(name, {})
    if key not in cache:
        if len(cache) >= max_entries:
            cache.clear()
        cache[key] = compute()
    return cache[key]


class _PositionMixing(ExportModeMixin, nn.Module):
    """Common interface: ``matrices(patterns)`` -> ``(P, P_masked)``."""

    uses_softmax = False

    def __init__(self, window: Sequence[int], groups: int):
        super().__init__()
        self.window = tuple(window)
        self.groups = groups
        self.num_tokens = math.prod(self.window)

    def logits(self) -> torch.Tensor:  # (G, N, N)
        raise NotImplementedError

    def matrices(self, patterns: Optional[torch.Tensor]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Unmasked ``(G, N, N)`` and, given key masks ``(K, N, N)``, masked ``(K, G, N, N)``.

        The matrices depend on parameters only. Without autograd (inference) they are cached
        and reused until a parameter changes (tracked by the tensors' version counters, which
        every in-place update - optimiser step, ``load_state_dict``, ``copy_`` - bumps).
        """
        if exporting(self):  # no cache keyed by storage addresses in an exported graph
            return self._compute(patterns)
        return cached_on_tensors(self, '_matrix_cache', list(self.parameters()), lambda: self._compute(patterns),
                                 extra=None if patterns is None else (patterns.data_ptr(), tuple(patterns.shape)),
                                 max_entries=9)

    def group_logits(self, group: int) -> torch.Tensor:  # (1, N, N): group ``group`` of :meth:`logits`
        return self.logits()[group:group + 1]

    def group_matrices(self, group: int, patterns: Optional[torch.Tensor]):
        """:meth:`matrices` of one group, ``(1, N, N)`` and ``(K, 1, N, N)``, built from the parameters
        alone (never the ``(G, N, N)`` of all groups; no cache)."""
        return self._compute(patterns, group)

    def _compute(self, patterns: Optional[torch.Tensor],
                 group: Optional[int] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        # Positional logits in full precision even under autocast (bf16 would blur the
        # Gaussian's tails); the softmax below runs in at least fp32 too.
        device_type = next(iter(self.parameters())).device.type
        with torch.autocast(device_type=device_type, enabled=False):
            logits = self.logits() if group is None else self.group_logits(group)
        if self.uses_softmax:
            # softmax in fp32 at least (bf16/fp16 autocast safety)
            work = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
            base = work.softmax(-1).to(logits.dtype)
            if patterns is None:
                return base, None
            masked = work[None].masked_fill(~patterns[:, None], float('-inf')).softmax(-1).to(logits.dtype)
            return base, masked
        if patterns is None:
            return logits, None
        return logits, logits[None] * patterns[:, None].to(logits.dtype)


class GaussianPositionMixing(_PositionMixing):
    """Group-wise (generalized) quadratic positional encoding, paper Eq. (5)-(8), (12)-(13).

    Per group ``g``: a centre ``c_g`` (D,) and, if ``generalized``, ``Gamma_g`` (D, D) with
    ``Sigma_g = Gamma_g Gamma_g^T`` (6 parameters per group in 2D: appendix, ``6s``).
    Non-generalized (official ``generalized=False``): a scalar spread ``a_g`` per group and
    ``score = -1/2 ||d - a_g^2 c_g||^2`` - the official code scales only the centre by the
    spread, with the width fixed (see research notes), which we keep for weight compatibility.
    """

    uses_softmax = True

    def __init__(self, window: Sequence[int], groups: int, generalized: bool = True,
                 init_std: float = 1e-2, symmetric: bool = True, softmax: bool = True,
                 learn_centers: bool = True):
        super().__init__(window, groups)
        self.generalized = generalized
        # official ``symmetric=False``: Sigma is the learned matrix itself (not Gamma Gamma^T);
        # official ``use_softmax=False``: the logits are the mixing weights (masked ones zeroed)
        self.symmetric = symmetric
        self.uses_softmax = softmax
        dim = len(self.window)
        self.learn_centers = learn_centers
        if learn_centers:
            self.centers = nn.Parameter(torch.zeros(groups, dim))
        else:  # PosMLP Table 6, "Delta frozen": the centres stay at (0, 0)
            self.register_buffer('centers', torch.zeros(groups, dim), persistent=False)
        if generalized:
            self.spreads = nn.Parameter(torch.eye(dim).repeat(groups, 1, 1))
        else:
            self.spreads = nn.Parameter(torch.ones(groups))
        self.init_std = init_std
        # quadratic features of the offsets, [d_i d_j (D*D), d_i (D)] per (query, key): the score
        # is then one matmul with per-group coefficients (the official ``rel_indices`` form)
        d = relative_offsets(self.window)
        n = self.num_tokens
        feats = torch.cat([(d[..., :, None] * d[..., None, :]).reshape(n, n, dim * dim), d], dim=-1)
        self.register_buffer('features', feats.reshape(n * n, -1).float(), persistent=False)

    def init_weights(self):
        if self.learn_centers:
            nn.init.normal_(self.centers, std=self.init_std)
        with torch.no_grad():
            if self.generalized:
                eye = torch.eye(self.spreads.shape[-1], device=self.spreads.device, dtype=self.spreads.dtype)
                self.spreads.copy_(eye.repeat(self.groups, 1, 1)
                                   + self.init_std * torch.randn_like(self.spreads))
            else:
                self.spreads.copy_(1 + self.init_std * torch.randn_like(self.spreads))

    def _coefficients(self) -> torch.Tensor:
        """Per-group coefficients of the offsets' quadratic and linear features (see :meth:`logits`)."""
        dim = self.centers.shape[-1]
        if self.generalized:
            sigma = self.spreads @ self.spreads.transpose(-1, -2) if self.symmetric else self.spreads  # (G, D, D)
            centers = self.centers
        else:
            sigma = torch.eye(dim, dtype=self.centers.dtype, device=self.centers.device).expand(self.groups, dim, dim)
            centers = self.spreads.square()[:, None] * self.centers
        linear = (sigma @ centers[..., None])[..., 0]  # (G, D)
        return torch.cat([-0.5 * sigma.reshape(self.groups, dim * dim), linear], dim=-1)  # (G, D*D + D)

    def logits(self) -> torch.Tensor:
        """``-1/2 (d - c)^T Sigma (d - c)`` up to a per-group constant (which the softmax over
        keys removes): ``-1/2 d^T Sigma d + (Sigma c)^T d``, as one matmul on the offsets'
        quadratic and linear features."""
        coeffs = self._coefficients()
        n = self.num_tokens
        return (coeffs @ self.features.to(coeffs.dtype).T).view(self.groups, n, n)

    def group_logits(self, group: int) -> torch.Tensor:
        coeffs = self._coefficients()[group:group + 1]
        n = self.num_tokens
        return (coeffs @ self.features.to(coeffs.dtype).T).view(1, n, n)


class LearnedPositionMixing(_PositionMixing):
    """(G)LRPE, Eq. (11): a learned table of ``prod(2w-1)`` offsets per group, no softmax.

    ``token_fc=True`` adds a dense ``W`` (N, N) shared by the groups: LRPE-M, Eq. (10).
    Tables (and ``W`` is refused) are resized on load when the window size differs.

    Fixes an official bug: the official ``init_bias_table`` never reaches the table, which
    stays all-zero at init (research notes §1.2); we use trunc-normal(0.02) as Swin does.
    """

    def __init__(self, window: Sequence[int], groups: int, token_fc: bool = False,
                 init_std: float = 0.02):
        super().__init__(window, groups)
        size = math.prod(2 * w - 1 for w in self.window)
        self.relative_position_table = nn.Parameter(torch.zeros(size, groups))
        self.token_fc = token_fc
        if token_fc:
            self.token_weight = nn.Parameter(torch.zeros(self.num_tokens, self.num_tokens))
        self.init_std = init_std
        # per-axis offset indices (a few hundred entries), for the gather of exported / compiled graphs
        for axis, index in enumerate(axis_position_indices(self.window)):
            self.register_buffer(f'axis_index_{axis}', index, persistent=False)

    @property
    def relative_index(self) -> torch.Tensor:
        """The ``(N, N)`` row of the table for each (query, key) pair (:func:`relative_position_index`),
        built on demand: the mixing itself never holds it."""
        return relative_position_index(self.window).to(self.relative_position_table.device)

    def _lookup(self, table: torch.Tensor) -> torch.Tensor:
        """``table[relative_position_index]`` for ``table`` (rows, ...): ``(N, N, ...)``
        (:class:`RelativeTableLookup`; plain autograd in exported, compiled and traced graphs: FLOP
        counters trace the model and know a gather, not a Python function)."""
        if not (exporting(self) or is_compiling() or torch.jit.is_tracing()):
            return RelativeTableLookup.apply(table, self.window)
        # in graphs: a gather through the per-axis indices, with autograd's backward
        index = tuple(getattr(self, f'axis_index_{axis}') for axis in range(len(self.window)))
        grid = table.view(*(2 * w - 1 for w in self.window), *table.shape[1:])
        return grid[index].view(self.num_tokens, self.num_tokens, *table.shape[1:])

    def init_weights(self):
        trunc_normal_(self.relative_position_table, std=self.init_std)
        if self.token_fc:
            trunc_normal_(self.token_weight, std=1e-6)  # official LRPE-M init

    def logits(self) -> torch.Tensor:
        p = self._lookup(self.relative_position_table).permute(2, 0, 1)
        if self.token_fc:
            p = p + self.token_weight[None]
        return p

    def group_logits(self, group: int) -> torch.Tensor:
        p = self._lookup(self.relative_position_table[:, group])[None]
        return p + self.token_weight[None] if self.token_fc else p

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + 'relative_position_table'
        if key in state_dict and state_dict[key].shape != self.relative_position_table.shape:
            table = state_dict[key]
            old = _window_from_table(table.shape[0], len(self.window), self.window)
            state_dict[key] = resize_grid_values(table, [2 * w - 1 for w in old],
                                                 [2 * w - 1 for w in self.window])
        wkey = prefix + 'token_weight'
        if wkey in state_dict and self.token_fc and state_dict[wkey].shape != self.token_weight.shape:
            raise ValueError(f'{wkey}: a dense token-FC W of {tuple(state_dict[wkey].shape)} cannot be '
                             f'transferred to window {self.window}; use the window it was trained with.')
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class DenseTokenMixing(_PositionMixing):
    """gMLP's spatial token FC ``W`` (N x N), Eq. (1): the SGU baseline (one group)."""

    def __init__(self, window: Sequence[int], groups: int = 1):
        super().__init__(window, 1)
        self.weight = nn.Parameter(torch.zeros(self.num_tokens, self.num_tokens))

    def init_weights(self):
        # gMLP: near-zero W and unit bias, so the unit starts as an identity gate.
        eps = 1e-3 / self.num_tokens
        nn.init.uniform_(self.weight, -eps, eps)

    def logits(self) -> torch.Tensor:
        return self.weight[None]


def _divisors(n: int):
    return [k for k in range(1, n + 1) if n % k == 0]


def infer_window(new_window: Sequence[int], num_tokens: Optional[int] = None,
                 table_rows: Optional[int] = None) -> Tuple[int, ...]:
    """The window a checkpoint was trained with, from its token count ``prod(w)`` and/or its
    LRPE table rows ``prod(2w - 1)`` (both when available: far less ambiguous).

    Candidates are ranked: with both constraints, most axes equal to ``new_window`` first
    (e.g. a video window (16, 14, 14) loading (8, 14, 14): only T changed), then cubic; with
    one constraint, cubic first (the image case, e.g. 14x14 -> 7x7), then most equal axes.
    """
    dims = len(new_window)
    if num_tokens is None and table_rows is None:
        raise ValueError('infer_window needs num_tokens or table_rows')
    if table_rows is not None:
        sides = [(k + 1) // 2 for k in _divisors(table_rows) if k % 2]
        total, radix = table_rows, (lambda w: 2 * w - 1)
    else:
        sides, total, radix = _divisors(num_tokens), num_tokens, (lambda w: w)
    found = []

    def search(prefix, rest):
        if len(prefix) == dims:
            if rest == 1:
                found.append(tuple(prefix))
            return
        for w in sides:
            if rest % radix(w) == 0:
                search(prefix + [w], rest // radix(w))

    search([], total)
    found = [w for w in found if num_tokens is None or math.prod(w) == num_tokens]
    if not found:
        raise ValueError(f'cannot infer the window of a checkpoint with {num_tokens} tokens / '
                         f'{table_rows} relative-position rows for a {dims}-D window {tuple(new_window)}')

    def rank(w):
        same = sum(a == b for a, b in zip(w, new_window))
        cubic = len(set(w)) == 1
        if num_tokens is not None and table_rows is not None:
            return (-same, not cubic)
        return (not cubic, -same)

    return min(found, key=rank)


def _window_from_table(size: int, dims: int, new_window: Optional[Sequence[int]] = None) -> Tuple[int, ...]:
    """Window of an LRPE table of ``size`` rows (see :func:`infer_window`)."""
    return infer_window(new_window if new_window is not None else (0, ) * dims, table_rows=size)
