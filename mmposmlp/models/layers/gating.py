"""Positional gating units: PoSGU (image), PoTGU / PoSTGU (video) and gMLP's SGU.

``Z = (P X1 + b) * X2`` (PosMLP Eq. 9-14): the input is split into ``X1`` (first half of the
channels) and ``X2`` (second half); ``X1`` is mixed across the tokens of a window by a
positional matrix ``P`` per channel group, a per-position bias ``b`` is added, and the
result gates ``X2``. Channel ``c`` of ``X1`` belongs to group ``c mod G`` (interleaved, as in
the official code). The same unit serves spatial (2D window), temporal (1D) and joint
spatio-temporal (3D) mixing: only ``window`` changes.

Data layout: the mixing works on ``X1`` laid out ``(G, K, windows, N)`` (``K = C1 / G`` channels
per group, tokens innermost), where one batched matmul over the groups mixes every window at
once. ``forward`` (input = the activated hidden tensor, channels-last) makes one copy into that
layout; ``forward_mlp`` (input = the block's normed tokens, with its ``fc1``/``act``/``fc2``)
produces it directly from ``fc1``'s GEMM and never copies the hidden tensor - see
docs/benchmarks.md, "What makes the PosMLP blocks fast".
"""
import math
from typing import Optional, Sequence

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer

from mmposmlp.registry import MODELS
from mmposmlp.utils.compat import is_compiling
from .relative_position import (DenseTokenMixing, GaussianPositionMixing, LearnedPositionMixing,
                                cached_on_tensors, infer_window, resize_grid_values)
from .export_mode import ExportModeMixin, exporting, torch_is_exporting
from .token_mixing import (EACH, GatedMLPFunction, GatedMLPSpec, GroupwiseMixingFunction, apply_token_mixing,
                           mix_run)
from .windows import WindowLayout

#: preset name -> (mixing, kwargs). ``groups`` comes from the stage.
GATE_TYPES = {
    'ggqpe': ('gqpe', dict(generalized=True)),  # group-wise generalized QPE (PosMLP default)
    'gqpe': ('gqpe', dict(generalized=False)),  # official ``generalized=False``
    'glrpe': ('lrpe', dict()),  # group-wise LRPE
    'lrpe': ('lrpe', dict(single_group=True)),  # one table for all channels
    'lrpe-m': ('lrpe', dict(single_group=True, token_fc=True)),  # LRPE + token FC W, Eq. (10)
    'glrpe-m': ('lrpe', dict(token_fc=True)),  # group-wise LRPE + one shared token FC W
    'sgu': ('dense', dict(single_group=True, norm=True)),  # gMLP SGU, Eq. (1)
}


def init_gated_mlp_weights(model: nn.Module) -> None:
    """The PosMLP family's default init (image and video): trunc-normal(0.02) Linear weights with
    zero biases, unit/zero norms, and each gating unit's own init (GQPE near identity spreads,
    LRPE trunc-normal tables, zero token biases)."""
    from mmengine.model.weight_init import trunc_normal_
    from torch.nn.modules.batchnorm import _BatchNorm
    for m in model.modules():
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.LayerNorm, _BatchNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, PositionalGatingUnit):
            m.init_weights()


#: without autograd, :meth:`PositionalGatingUnit.forward_mlp` processes windows in chunks whose
#: hidden tensor stays below this many bytes (measured best around 8-20 MB on the 2-vCPU EPYC VMs
#: of docs/benchmarks.md; smaller chunks make the GEMMs too thin)
CHUNK_BYTES = 16 << 20

#: positional matrices larger than this (``G N^2`` values of all groups) are built one group at a
#: time and never kept (:class:`~.token_mixing.GroupwiseMixingFunction`): a joint 16x14x14 window
#: (PoSTGU) at G = 32 would otherwise hold 1.2 GB per block for backward
GROUPWISE_BYTES = 128 << 20


#: the windows of a mask-ordered layout are processed run by run (one matrix per run, but ``fc1`` and ``fc2``
#: cut into one GEMM per run) where the token mixing costs at least this share of the FCs' multiply-adds;
#: below it the FCs take all windows at once and only the mixing goes run by run (each run's rows copied
#: out and back). Measured on PosMLP-T at 800x1344, one thread: by run faster at stages 0-2 (mixing 68% /
#: 34% / 17% of the FCs), slower at stage 3 (2.1%, 49-token runs)
RUNS_MIXING_SHARE = 1 / 16


def _mixing_runs(layout: Optional[WindowLayout], start: int, count: int, by_run: bool = True):
    """:data:`~.token_mixing.MixingRun` s of windows ``start .. start + count``: one per run of a
    mask-ordered layout (``by_run``), else one for all windows: of a mask-ordered layout, its runs each
    mixed once (:data:`~.token_mixing.EACH`); of a row-major layout, with the masked windows listed for
    recomputation."""
    if layout is None or not layout.masked_patterns:
        return ((None, 0, count, []), )
    if not layout.ordered:
        return ((None, 0, count, layout.masked_rows(start, count)), )
    runs = layout.runs(start, count)
    if by_run or len(runs) == 1:
        return tuple((k, first, end, []) for k, first, end in runs)
    return ((EACH, 0, count, runs), )


def _plain(module: nn.Module, kind: type) -> bool:
    """A bare ``kind`` module whose forward may be replaced by equivalent kernels (no hooks)."""
    return type(module) is kind and not module._forward_hooks and not module._forward_pre_hooks


def _plain_linear(fc: nn.Module) -> bool:
    return _plain(fc, nn.Linear)


def _fused_training(x: torch.Tensor, act: nn.Module, norm: Optional[nn.Module]) -> bool:
    """Whether :class:`GatedMLPFunction` may run this training step: autograd on, eager (not compiled,
    traced or exported), no autocast, a plain GELU and (if any) a plain LayerNorm over the channels."""
    if not torch.is_grad_enabled() or is_compiling() or torch_is_exporting() or torch.jit.is_tracing():
        return False
    if torch.is_autocast_enabled(x.device.type) or not _plain(act, nn.GELU):
        return False
    return norm is None or (_plain(norm, nn.LayerNorm) and len(norm.normalized_shape) == 1)


@MODELS.register_module()
class PositionalGatingUnit(ExportModeMixin, nn.Module):
    """Positional gating unit (PoSGU / PoTGU / PoSTGU, and gMLP's SGU for ablations).

    Args:
        in_channels: channels of the input; the output has ``in_channels // 2`` (``in_channels``
            with ``split=False`` or ``combine='concat'``).
        window: window size per axis, e.g. ``(14, 14)``, ``(16,)`` or ``(16, 7, 7)``.
        groups: channel groups ``s`` of the group-wise encodings.
        gate_type: one of :data:`GATE_TYPES` (``'ggqpe'`` default).
        norm_cfg: norm on ``X1`` (only the SGU baseline uses one, as in gMLP).
        split: ``True`` (default): ``X1``/``X2`` are the two channel halves; ``False``: the
            whole input is mixed and gates itself, ``Z = (P X + b) * X`` (official ``chunks=1``),
            and the output keeps ``in_channels``.
        token_bias: add the per-position bias ``b`` (official QPE ``absolute_bias``).
        symmetric: (G)GQPE only: ``Sigma = Gamma Gamma^T`` (default) or ``Sigma`` learned
            freely (official ``symmetric=False``).
        softmax: GQPE only: normalise ``P`` over keys (default; official ``use_softmax``).
        learn_centers: GQPE only: learn the centres ``Delta`` (default) or keep them at (0, 0)
            (PosMLP Table 6, "Delta frozen").
        combine: how the mixed ``X1`` and ``X2`` form the output (PosMLP Fig. 3): ``'gate'``
            (default, (a) ``(P X1 + b) * X2``), ``'add'`` ((b) element-wise addition
            ``(P X1 + b) + X2``) or ``'concat'`` ((c) ``Concat(P X1 + b, X2)`` along the channels:
            the output keeps ``in_channels``). Needs ``split=True``.
        norm: LayerNorm (``norm_cfg``) on ``X1`` before the mixing: ``None`` (default) = the gate
            type's own choice (only ``'sgu'`` has one, as gMLP); ``True`` on a PoSGU is Fig. 3(d)
            "LayerNorm before GGQPE".
    """

    #: :attr:`combine` values (PosMLP Fig. 3 (a)-(c))
    COMBINE_MODES = ('gate', 'add', 'concat')

    def __init__(self, in_channels: int, window: Sequence[int], groups: int = 1,
                 gate_type: str = 'ggqpe', norm_cfg: Optional[dict] = None, split: bool = True,
                 token_bias: bool = True, symmetric: bool = True, softmax: bool = True,
                 learn_centers: bool = True, combine: str = 'gate', norm: Optional[bool] = None):
        super().__init__()
        if gate_type not in GATE_TYPES:
            raise KeyError(f'unknown gate_type {gate_type!r}; choose one of {sorted(GATE_TYPES)}')
        if combine not in self.COMBINE_MODES:
            raise ValueError(f'unknown combine={combine!r} of a gating unit; choose one of {list(self.COMBINE_MODES)}')
        if combine != 'gate' and not split:
            raise ValueError(f"combine={combine!r} joins the mixed half X1 with the other half X2, which "
                             "split=False (NonSplit, Fig. 3e) does not have: use split=True or combine='gate'")
        if norm not in (None, True, False):
            raise ValueError(f'norm must be None (the gate type\'s default), True or False, got {norm!r}')
        mixing, kwargs = GATE_TYPES[gate_type]
        kwargs = dict(kwargs)
        if mixing == 'gqpe':
            kwargs.update(symmetric=symmetric, softmax=softmax, learn_centers=learn_centers)
        elif not (symmetric and softmax and learn_centers):
            raise ValueError(f'symmetric / softmax / learn_centers=False are options of the Gaussian (GQPE) gates; '
                             f'gate_type={gate_type!r} has neither')
        if split and in_channels % 2:
            raise ValueError(f'a gating unit splits its input in two halves; in_channels={in_channels} is odd')
        self.split = split
        self.combine = combine
        half = in_channels // 2 if split else in_channels
        self.out_channels = in_channels if combine == 'concat' else half
        if kwargs.pop('single_group', False):
            groups = 1
        if half % groups:
            raise ValueError(f'the gate half ({half} channels) is not divisible by groups={groups}')
        self.gate_type = gate_type
        self.window = tuple(window)
        self.groups = groups
        self.num_tokens = math.prod(self.window)
        use_norm = kwargs.pop('norm', False) if norm is None else norm
        if mixing == 'gqpe':
            self.mixing = GaussianPositionMixing(self.window, groups, **kwargs)
        elif mixing == 'lrpe':
            self.mixing = LearnedPositionMixing(self.window, groups, **kwargs)
        else:
            self.mixing = DenseTokenMixing(self.window)
        self.norm = build_norm_layer(norm_cfg or dict(type='LN', eps=1e-6), half)[1] if use_norm else None
        self.token_bias = nn.Parameter(torch.zeros(self.num_tokens)) if token_bias else None

    def init_weights(self):
        self.mixing.init_weights()
        if self.token_bias is None:
            return
        if isinstance(self.mixing, DenseTokenMixing):
            nn.init.ones_(self.token_bias)
        else:
            nn.init.zeros_(self.token_bias)

    def forward(self, x: torch.Tensor, layout: Optional[WindowLayout] = None) -> torch.Tensor:
        """``x`` (B, nW, N, C) windows -> (B, nW, N, :attr:`out_channels`)."""
        B, nW, N, C = self._check_tokens(x)
        u, v = x.chunk(2, dim=-1) if self.split else (x, x)
        if self.norm is not None:
            u = self.norm(u)
        K = u.shape[-1] // self.groups
        # X1 to the token-minor layout (G, K, B*nW, N): the one copy of this path
        u = u.reshape(B * nW, N, K, self.groups).permute(3, 2, 0, 1).contiguous()
        return self._gate(v, self._mix(u, layout)).view(B, nW, N, -1)

    def forward_mlp(self, x: torch.Tensor, fc1: nn.Linear, act: nn.Module, fc2: nn.Linear,
                    layout: Optional[WindowLayout] = None, norm: Optional[nn.Module] = None) -> torch.Tensor:
        """``fc2(self(act(fc1(x)), layout))`` - the gated channel MLP around the unit - with the
        hidden tensor kept channel-major ``(C_hidden, tokens)`` from ``fc1`` to ``fc2``.

        ``H^T = W1 x^T + b1`` is one GEMM whose rows are the hidden channels in group-major
        order and whose columns are the tokens: exactly the layout of the token mixing
        (one batched matmul, no permute before it), the gating product is a plain
        element-wise product, and ``fc2`` reads ``Y^T`` as a transposed operand. No copy of the
        hidden tensor is made. The group-major weights are a row/column permutation of
        ``fc1``/``fc2`` (cached without autograd, like the positional matrices).

        ``norm`` (optional) is applied to ``x`` first: ``fc2(self(act(fc1(norm(x)))))``. In training
        (eager, no autocast, GELU, LayerNorm) the whole composition is one autograd function
        (:class:`~.token_mixing.GatedMLPFunction`) that keeps about half of what autograd would keep
        and recomputes the element-wise parts in backward.

        Without autograd on CPU, the windows are processed in chunks whose hidden tensor stays within
        :data:`CHUNK_BYTES` (every window is independent here): at large maps the hidden tensor
        (e.g. 108 MB at stage 0 of an 800x1344 image) otherwise streams through memory once per
        element-wise step; in chunks it stays in cache. Falls back to the plain composition when
        an FC is not a bare ``nn.Linear`` (hooks, wrappers) or ``X1`` is normalised (gMLP SGU).
        """
        if self.norm is not None or not self.split or self.combine != 'gate' or \
                not (_plain_linear(fc1) and _plain_linear(fc2)):
            return fc2(self(act(fc1(x if norm is None else norm(x))), layout))
        B, nW, N, _ = self._check_tokens(x)
        M = B * nW
        weights = self._group_major_weights(fc1, fc2)
        groupwise = self._groupwise(x)
        if not exporting(self) and _fused_training(x, act, norm) and \
                (layout is None or not layout.in_graph):
            return self._fused_mlp(x, weights, fc2.bias, act, norm, layout)
        if norm is not None:
            x = norm(x)
        flat = x.reshape(M * N, -1)
        chunks = [(0, M)]
        if not torch.is_grad_enabled() and x.device.type == 'cpu' and not exporting(self) and not groupwise:
            # (GPUs want few, large kernels; an exported graph has no size to chunk by); a chunk holds
            # windows of one mask only, when the layout numbers them by mask: one matrix per chunk
            step = max(1, CHUNK_BYTES // (fc1.out_features * N * x.element_size()))
            by_run = layout is not None and layout.ordered and self._by_run(weights)
            runs = layout.runs(0, M) if by_run else ((None, 0, M), )
            chunks = [(m, min(end, m + step)) for _, first, end in runs for m in range(first, end, step)]
        if len(chunks) == 1:
            return self._mlp_windows(flat, weights, fc2.bias, act, layout, 0).view(B, nW, N, -1)
        z = None  # allocated after the first chunk, in its dtype
        direct = not torch.is_autocast_enabled(x.device.type)  # (autocast does not cast for out= ops)
        for m, end in chunks:
            dest = z[m * N:end * N] if z is not None and direct else None
            part = self._mlp_windows(flat[m * N:end * N], weights, fc2.bias, act, layout, m, out=dest)
            if dest is None:
                z = part.new_empty(M * N, part.shape[-1]) if z is None else z
                z[m * N:end * N] = part
        return z.view(B, nW, N, -1)

    def _fused_mlp(self, x: torch.Tensor, weights, bias2: Optional[torch.Tensor], act: nn.GELU,
                   norm: Optional[nn.LayerNorm], layout: Optional[WindowLayout]) -> torch.Tensor:
        """:meth:`forward_mlp` in training, as :class:`~.token_mixing.GatedMLPFunction`."""
        w1, b1, w2 = weights
        B, nW, N, _ = x.shape
        patterns = layout.patterns if layout is not None else None
        runs = _mixing_runs(layout, 0, B * nW, self._by_run(weights))
        # the mixing is recomputed in backward where it costs less than a quarter of the FCs' work
        mixing_macs, fc_macs = self._macs_per_token(weights)
        cheap = 4 * mixing_macs <= fc_macs
        groupwise = (self.mixing, patterns) if self._groupwise(x) else None
        spec = GatedMLPSpec(self.groups, N, runs, act.approximate, None if norm is None else norm.eps, cheap,
                            groupwise)
        ln_w, ln_b = (None, None) if norm is None else (norm.weight, norm.bias)
        if groupwise is not None:  # the matrices of one group at a time, inside the function
            return GatedMLPFunction.apply(x, ln_w, ln_b, w1, b1, w2, bias2, None, None, self.token_bias, spec,
                                          *self.mixing.parameters())
        base, masked = self.mixing.matrices(patterns)
        return GatedMLPFunction.apply(x, ln_w, ln_b, w1, b1, w2, bias2, base, masked, self.token_bias, spec)

    def _mlp_windows(self, rows: torch.Tensor, weights, bias2: Optional[torch.Tensor], act: nn.Module,
                     layout: Optional[WindowLayout], start: int, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """:meth:`forward_mlp` on the token rows of windows ``start ..`` of a batch's windows (without
        autograd, written into the rows ``out`` when given)."""
        w1, b1, w2 = weights
        N = self.num_tokens
        R = rows.shape[0] // N
        half = w1.shape[0] // 2
        G, K = self.groups, half // self.groups
        rows_t = rows.t()
        h = torch.addmm(b1[:, None], w1, rows_t) if b1 is not None else torch.mm(w1, rows_t)
        h = act(h)  # (2 * half, R * N): rows [X1 | X2], each (g, k)-ordered
        u, v = h.view(2, G, K, R, N).unbind(0)  # (backward: one stack, not two zero-filled slices)
        mixed = self._mix(u, layout, start)
        if not torch.is_grad_enabled():
            y_t = mixed.mul_(v).view(half, R * N).t()
            return torch.addmm(bias2, y_t, w2.t(), out=out) if bias2 is not None else torch.mm(y_t, w2.t(), out=out)
        # with autograd, fc2 is computed transposed (Z^T = W2 Y): its input gradient then comes out
        # channel-major like Y, so the backward of the gating product and of the mixing needs no
        # transposed copies; the forward pays one strided read of the (narrower) output instead
        y = (mixed * v).view(half, R * N)
        z_t = torch.addmm(bias2[:, None], w2, y) if bias2 is not None else torch.mm(w2, y)
        return z_t.t()

    def _macs_per_token(self, weights):
        """``(token mixing, fc1 + fc2)`` multiply-adds per token of the gated MLP with ``weights``."""
        w1, _, w2 = weights
        return w2.shape[1] * self.num_tokens, w1.shape[1] * w1.shape[0] + w2.shape[1] * w2.shape[0]

    def _by_run(self, weights) -> bool:
        """Whether the token mixing costs enough next to the FCs (``weights``) to process the windows run
        by run (:data:`RUNS_MIXING_SHARE`)."""
        mixing_macs, fc_macs = self._macs_per_token(weights)
        return mixing_macs >= RUNS_MIXING_SHARE * fc_macs

    def _group_major_weights(self, fc1: nn.Linear, fc2: nn.Linear):
        """``fc1`` rows and ``fc2`` columns with channel ``k*G+g`` of each half moved to ``g*K+k``."""
        G = self.groups
        K = fc1.out_features // 2 // G

        def permute():
            w1 = fc1.weight.unflatten(0, (2, K, G)).transpose(1, 2).reshape(fc1.weight.shape)
            b1 = None if fc1.bias is None else fc1.bias.view(2, K, G).transpose(1, 2).reshape(-1)
            w2 = fc2.weight.unflatten(1, (K, G)).transpose(1, 2).reshape(fc2.weight.shape)
            return w1, b1, w2

        return cached_on_tensors(self, '_weight_cache', (fc1.weight, fc1.bias, fc2.weight), permute)

    def _groupwise(self, x: torch.Tensor) -> bool:
        """Whether the positional matrices are too large to build for all groups at once."""
        if is_compiling() or exporting(self):  # (a compiled or exported graph takes the dense form)
            return False
        return self.mixing.groups * self.num_tokens**2 * x.element_size() > GROUPWISE_BYTES

    def _check_tokens(self, x: torch.Tensor):
        if x.dim() != 4 or x.shape[2] != self.num_tokens:
            raise ValueError(f'expected windows (B, nW, N, C) with N = {self.num_tokens} tokens (window '
                             f'{self.window}), got shape {tuple(x.shape)}')
        return x.shape

    def _mix(self, u: torch.Tensor, layout: Optional[WindowLayout], start: int = 0) -> torch.Tensor:
        """``P X1 + b`` (Eq. 9) for ``u`` (G, K, R, N) holding windows ``start .. start + R`` of a
        batch's windows; padded/shifted windows use masked ``P``."""
        patterns = layout.patterns if layout is not None else None
        if self._groupwise(u) and not (layout is not None and layout.in_graph):
            run, = _mixing_runs(layout, start, u.shape[2], by_run=False)
            return GroupwiseMixingFunction.apply(self.mixing, patterns, run, u, self.token_bias,
                                                 *self.mixing.parameters())
        base, masked = self.mixing.matrices(patterns)
        if layout is not None and layout.in_graph:  # export: masks per class block of windows
            return layout.mix_windows(u, lambda m, x: apply_token_mixing(m, x, self.token_bias), base, masked,
                                      self.token_bias)
        run, = _mixing_runs(layout, start, u.shape[2], by_run=False)
        return mix_run(u, run, base, masked, self.token_bias)

    def _gate(self, v: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``X2 * (P X1 + b)`` (or ``+`` / ``Concat``, :attr:`combine`): the product also takes
        ``out`` back to channels-last (interleaved groups, channel ``k*G+g``), so no separate
        permute copy is made."""
        G, K, M, N = out.shape
        if self.combine == 'gate':
            y = v.reshape(M, N, K, G) * out.permute(2, 3, 1, 0)  # v first: y takes v's (row-major) layout
            return y.reshape(M, N, K * G)
        mixed = out.permute(2, 3, 1, 0).reshape(M, N, K * G)
        if self.combine == 'concat':
            return torch.cat([mixed, v.reshape(M, N, K * G)], dim=-1)
        return v.reshape(M, N, K * G) + mixed  # 'add'

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Resize token biases (and LRPE tables) trained with another window. The old window
        # is inferred from both the bias count and the table rows, so non-cubic windows work
        # (a video unit trained with T=16 loaded at T=24 while H, W stay).
        key = prefix + 'token_bias'
        tkey = prefix + 'mixing.relative_position_table'
        old_n = state_dict[key].numel() if key in state_dict else None
        rows = None
        if isinstance(self.mixing, LearnedPositionMixing) and tkey in state_dict:
            rows = state_dict[tkey].shape[0]
            if rows == self.mixing.relative_position_table.shape[0] and old_n in (None, self.num_tokens):
                rows = None
        if (old_n is not None and old_n != self.num_tokens) or rows is not None:
            try:
                old = infer_window(self.window, old_n, rows)
            except ValueError as err:
                raise ValueError(f'{key}: cannot map the checkpoint onto window {self.window}: {err}') from None
            if old_n is not None and old_n != self.num_tokens:
                state_dict[key] = resize_grid_values(state_dict[key].reshape(-1), old, self.window)
            if rows is not None:
                state_dict[tkey] = resize_grid_values(state_dict[tkey], [2 * w - 1 for w in old],
                                                      [2 * w - 1 for w in self.window])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        extra = f', combine={self.combine}' if self.combine != 'gate' else ''
        return f'gate_type={self.gate_type}, window={self.window}, groups={self.groups}{extra}'
