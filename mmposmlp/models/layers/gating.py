"""Positional gating units: PoSGU (image), PoTGU / PoSTGU (video) and gMLP's SGU.

``Z = (P X1 + b) * X2`` (PosMLP Eq. 9-14): the input is split into ``X1`` (first half of the
channels) and ``X2`` (second half); ``X1`` is mixed across the tokens of a window by a
positional matrix ``P`` per channel group, a per-position bias ``b`` is added, and the
result gates ``X2``. Channel ``c`` of ``X1`` belongs to group ``c mod G`` (interleaved, as in
the official code). The same unit serves spatial (2D window), temporal (1D) and joint
spatio-temporal (3D) mixing: only ``window`` changes.
"""
import math
from typing import Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer

from mmposmlp.registry import MODELS
from .relative_position import (DenseTokenMixing, GaussianPositionMixing, LearnedPositionMixing,
                                infer_window, resize_grid_values)
from .windows import WindowLayout

#: preset name -> (mixing, kwargs). ``groups`` comes from the stage.
GATE_TYPES = {
    'ggqpe': ('gqpe', dict(generalized=True)),  # group-wise generalized QPE (PosMLP default)
    'gqpe': ('gqpe', dict(generalized=False)),  # official ``generalized=False``
    'glrpe': ('lrpe', dict()),  # group-wise LRPE
    'lrpe': ('lrpe', dict(single_group=True)),  # one table for all channels
    'lrpe-m': ('lrpe', dict(single_group=True, token_fc=True)),  # LRPE + token FC W, Eq. (10)
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


def apply_token_mixing(matrix: torch.Tensor, u: torch.Tensor,
                       bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``out[g, ..., m] = sum_n matrix[g, m, n] u[g, ..., n] (+ bias[m])`` for ``u`` (G, ..., N).

    The token axis is innermost, so all windows, batch items and channels of a group form the
    rows of one matrix and the mixing is a single batched matmul over the groups (``P`` enters
    transposed, a free view); the per-position bias rides along as ``baddbmm``'s input.
    """
    G, N = u.shape[0], u.shape[-1]
    rows = u.reshape(G, -1, N)
    mat = matrix.to(u.dtype).transpose(1, 2)
    if bias is None:
        out = torch.bmm(rows, mat)
    elif torch.jit.is_tracing():
        # FLOP counters (fvcore, mmengine.analysis) trace the model and know bmm, not baddbmm
        out = torch.bmm(rows, mat) + bias.to(u.dtype).view(1, 1, N)
    else:
        out = torch.baddbmm(bias.to(u.dtype).view(1, 1, N), rows, mat)
    return out.view(u.shape)


@MODELS.register_module()
class PositionalGatingUnit(nn.Module):
    """Positional gating unit (PoSGU / PoTGU / PoSTGU, and gMLP's SGU for ablations).

    Args:
        in_channels: channels of the input; the output has ``in_channels // 2``.
        window: window size per axis, e.g. ``(14, 14)``, ``(16,)`` or ``(16, 7, 7)``.
        groups: channel groups ``s`` of the group-wise encodings.
        gate_type: one of :data:`GATE_TYPES` (``'ggqpe'`` default).
        norm_cfg: norm on ``X1`` (only the SGU baseline uses one, as in gMLP).
    """

    def __init__(self, in_channels: int, window: Sequence[int], groups: int = 1,
                 gate_type: str = 'ggqpe', norm_cfg: Optional[dict] = None):
        super().__init__()
        if gate_type not in GATE_TYPES:
            raise KeyError(f'unknown gate_type {gate_type!r}; choose one of {sorted(GATE_TYPES)}')
        mixing, kwargs = GATE_TYPES[gate_type]
        kwargs = dict(kwargs)
        if in_channels % 2:
            raise ValueError(f'a gating unit splits its input in two halves; in_channels={in_channels} is odd')
        half = in_channels // 2
        if kwargs.pop('single_group', False):
            groups = 1
        if half % groups:
            raise ValueError(f'the gate half ({half} channels) is not divisible by groups={groups}')
        self.gate_type = gate_type
        self.window = tuple(window)
        self.groups = groups
        self.num_tokens = math.prod(self.window)
        use_norm = kwargs.pop('norm', False)
        if mixing == 'gqpe':
            self.mixing = GaussianPositionMixing(self.window, groups, **kwargs)
        elif mixing == 'lrpe':
            self.mixing = LearnedPositionMixing(self.window, groups, **kwargs)
        else:
            self.mixing = DenseTokenMixing(self.window)
        self.norm = build_norm_layer(norm_cfg or dict(type='LN', eps=1e-6), half)[1] if use_norm else None
        self.token_bias = nn.Parameter(torch.zeros(self.num_tokens))

    def init_weights(self):
        self.mixing.init_weights()
        if isinstance(self.mixing, DenseTokenMixing):
            nn.init.ones_(self.token_bias)
        else:
            nn.init.zeros_(self.token_bias)

    def forward(self, x: torch.Tensor, layout: Optional[WindowLayout] = None) -> torch.Tensor:
        """``x`` (B, nW, N, C) windows -> (B, nW, N, C // 2)."""
        B, nW, N, C = self._check_tokens(x)
        u, v = x.chunk(2, dim=-1)
        if self.norm is not None:
            u = self.norm(u)
        K = u.shape[-1] // self.groups
        # X1 to the token-minor layout (G, K, B*nW, N): the one copy of this path
        u = u.reshape(B * nW, N, K, self.groups).permute(3, 2, 0, 1).contiguous()
        return self._gate(v, self._mix(u, layout, B, nW)).view(B, nW, N, -1)

    def forward_projected(self, x: torch.Tensor, fc: nn.Linear, act: nn.Module,
                          layout: Optional[WindowLayout] = None) -> torch.Tensor:
        """``self(act(fc(x)), layout)`` with ``X1`` computed directly in the token-minor layout.

        ``X1^T = W1 x^T + b1`` is one GEMM whose output rows are the (group-major reordered)
        channels and whose columns are the tokens, i.e. exactly the layout the mixing needs:
        no permute of the hidden tensor before or after the mixing (the way back is fused into
        the gating product). Falls back to the plain path when ``fc`` is not a bare
        ``nn.Linear`` (hooks, wrappers) or ``X1`` is normalised (the gMLP SGU).
        """
        if (self.norm is not None or type(fc) is not nn.Linear or fc._forward_hooks
                or fc._forward_pre_hooks):
            return self(act(fc(x)), layout)
        B, nW, N, _ = self._check_tokens(x)
        half = fc.out_features // 2
        G = self.groups
        K = half // G
        # rows of W1's X1 half in group-major order (channel k*G+g -> row g*K+k)
        w_u = fc.weight[:half].unflatten(0, (K, G)).transpose(0, 1).reshape(half, -1)
        flat = x.reshape(B * nW * N, -1)
        if fc.bias is not None:
            u = torch.addmm(fc.bias[:half].view(K, G).t().reshape(half, 1), w_u, flat.t())
        else:
            u = torch.mm(w_u, flat.t())
        u = act(u).view(G, K, B * nW, N)
        v = act(F.linear(x, fc.weight[half:], None if fc.bias is None else fc.bias[half:]))
        return self._gate(v, self._mix(u, layout, B, nW)).view(B, nW, N, -1)

    def _check_tokens(self, x: torch.Tensor):
        if x.dim() != 4 or x.shape[2] != self.num_tokens:
            raise ValueError(f'expected windows (B, nW, N, C) with N = {self.num_tokens} tokens (window '
                             f'{self.window}), got shape {tuple(x.shape)}')
        return x.shape

    def _mix(self, u: torch.Tensor, layout: Optional[WindowLayout], B: int, nW: int) -> torch.Tensor:
        """``P X1 + b`` (Eq. 9) for ``u`` (G, K, B*nW, N); padded/shifted windows use masked ``P``."""
        patterns = layout.patterns if layout is not None else None
        base, masked = self.mixing.matrices(patterns)
        out = apply_token_mixing(base, u, self.token_bias)
        if masked is not None and layout.masked_patterns:
            # windows that need a mask (padding, shift seams) are recomputed; interior windows,
            # usually the majority, keep the unmasked result (no gather/scatter of the bulk)
            G, K, _, N = u.shape
            u5, out5 = u.reshape(G, K, B, nW, N), out.view(G, K, B, nW, N)
            for k in layout.masked_patterns:
                idx = layout.pattern_windows[k]
                out5.index_copy_(3, idx, apply_token_mixing(masked[k], u5.index_select(3, idx), self.token_bias))
        return out

    def _gate(self, v: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``X2 * (P X1 + b)``: the product also takes ``out`` back to channels-last
        (interleaved groups, channel ``k*G+g``), so no separate permute copy is made."""
        G, K, M, N = out.shape
        y = v.reshape(M, N, K, G) * out.permute(2, 3, 1, 0)  # v first: y takes v's (row-major) layout
        return y.reshape(M, N, K * G)

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
        return f'gate_type={self.gate_type}, window={self.window}, groups={self.groups}'
