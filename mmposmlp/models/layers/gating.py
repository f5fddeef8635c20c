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


def apply_token_mixing(matrix: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``out[b, w, m, k*G+g] = sum_n matrix[g, m, n] x[b, w, n, k*G+g]`` for (B, nW, N, C)."""
    B, nW, N, C = x.shape
    G = matrix.shape[0]
    x = x.reshape(B * nW, N, C // G, G).permute(3, 1, 0, 2).reshape(G, N, -1)
    out = torch.bmm(matrix.to(x.dtype), x)
    return out.reshape(G, N, B * nW, C // G).permute(2, 1, 3, 0).reshape(B, nW, N, C)


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
        if x.shape[2] != self.num_tokens:
            raise ValueError(f'{x.shape[2]} tokens per window, but this unit was built for window '
                             f'{self.window} ({self.num_tokens} tokens)')
        u, v = x.chunk(2, dim=-1)
        if self.norm is not None:
            u = self.norm(u)
        patterns = layout.patterns if layout is not None else None
        base, masked = self.mixing.matrices(patterns)
        out = apply_token_mixing(base, u)
        if masked is not None:
            # windows that need a mask (padding, shift seams) are recomputed; interior windows,
            # usually the majority, keep the unmasked result (no gather/scatter of the bulk)
            for k in layout.masked_patterns:
                idx = layout.pattern_windows[k]
                out[:, idx] = apply_token_mixing(masked[k], u[:, idx])
        out = out + self.token_bias.to(out.dtype)[None, None, :, None]
        return out * v

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
