"""Position encodings of a plain vision transformer: the baselines CPVT compares its PEG with.

Chu et al., "Conditional Positional Encodings for Vision Transformers", ICLR 2023
(https://arxiv.org/abs/2102.10882), Tables 1, 2, 7 and 8:

* :class:`AbsolutePositionEmbedding` - added once to the token sequence before the first encoder:
  ``'learnable'`` (DeiT's table, "LE"; resized by bicubic interpolation at other input sizes, as
  DeiT does, via mmpretrain's ``resize_pos_embed``) or ``'sincos'`` (fixed 2-D sine-cosine encoding,
  MoCo v3 / mmpretrain ``build_2d_sincos_position_embedding`` layout, recomputed for every grid).
* :class:`RelativePositionEncoding2d` - 2-D relative position encoding inside self-attention with
  offsets clipped to ``max_distance`` per axis ("we follow Shaw et al. (2018) and set the local
  range K as 8", Sec. 5.3). ``mode='key'`` / ``'key_value'``: Shaw et al. Eq. (3)-(4),
  ``e_ij = q_i (k_j + a^K_ij)^T / sqrt(d)`` and ``z_i = sum_j alpha_ij (v_j + a^V_ij)`` with
  ``a_ij`` looked up from a ``(2K+1)^2 x d`` table (shared by the heads, as in Shaw et al.).
  ``mode='bias'``: a learned scalar per head and 2-D offset added to the logits (Swin-style table
  ``(2K+1)^2 x heads``).

Extra leading tokens (the cls token) get no relative encoding (zero bias / zero embedding) and,
for the sine-cosine encoding, a zero vector (MoCo v3).
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmposmlp.registry import MODELS

ABS_POS_TYPES = ('learnable', 'sincos')
RPE_MODES = ('key', 'key_value', 'bias')


def sincos_position_embedding_2d(hw_shape: Sequence[int], embed_dims: int,
                                 temperature: float = 10000.,
                                 dtype: torch.dtype = torch.float32,
                                 device=None) -> torch.Tensor:
    """Fixed 2-D sine-cosine table ``(1, H*W, C)`` for a row-major ``H x W`` token grid.

    Channels ``[sin(r w), cos(r w), sin(c w), cos(c w)]`` with ``w_k = T^(-k / (C/4))``, r / c the
    row / column index: the layout of MoCo v3 and mmpretrain's
    ``build_2d_sincos_position_embedding`` (equal to it on square grids).
    """
    if embed_dims % 4:
        raise ValueError(f'the 2-D sine-cosine encoding needs embed_dims divisible by 4, got {embed_dims}')
    # a symbolic size (torch.export dims) stays symbolic, so a dynamic ONNX graph computes the table per size
    H, W = (s if isinstance(s, torch.SymInt) else int(s) for s in hw_shape[:2])
    quarter = embed_dims // 4
    omega = 1. / temperature ** (torch.arange(quarter, dtype=torch.float64, device=device) / quarter)
    rows = torch.arange(H, dtype=torch.float64, device=device)[:, None].expand(H, W).reshape(-1)
    cols = torch.arange(W, dtype=torch.float64, device=device)[None, :].expand(H, W).reshape(-1)
    out_r, out_c = rows[:, None] * omega, cols[:, None] * omega
    emb = torch.cat([out_r.sin(), out_r.cos(), out_c.sin(), out_c.cos()], dim=1)
    return emb[None].to(dtype)


@MODELS.register_module()
class AbsolutePositionEmbedding(BaseModule):
    """Absolute position encoding added to ``(B, extra + H*W, C)`` tokens (DeiT "LE" or 2-D sin-cos).

    Args:
        embed_dims (int): channels C.
        grid_size (tuple[int, int]): token grid of the training resolution (14 x 14 at 224 / 16).
            The learnable table has ``num_extra_tokens + H*W`` rows (DeiT: 197 x C).
        pos_type (str): 'learnable' or 'sincos'.
        num_extra_tokens (int): leading tokens (cls token) that also get a learnable entry
            (DeiT) or a zero vector (sin-cos).
        interpolate_mode (str): resize mode of the learnable table at other grids: 'bicubic' (DeiT,
            through mmpretrain's ``resize_pos_embed``, which resizes in float32) or 'bilinear' (PVT v1,
            mmdet), resized in the table's own dtype.
    """

    def __init__(self, embed_dims: int, grid_size: Tuple[int, int], pos_type: str = 'learnable',
                 num_extra_tokens: int = 1, interpolate_mode: str = 'bicubic', init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        if pos_type not in ABS_POS_TYPES:
            raise ValueError(f'unknown absolute position encoding {pos_type!r}; choose one of {ABS_POS_TYPES}')
        if interpolate_mode not in ('bicubic', 'bilinear'):
            raise ValueError(f"unknown interpolate_mode {interpolate_mode!r}; choose 'bicubic' (DeiT) or 'bilinear' "
                             '(PVT v1)')
        self.embed_dims = embed_dims
        self.grid_size = (int(grid_size[0]), int(grid_size[1]))
        self.pos_type = pos_type
        self.num_extra_tokens = num_extra_tokens
        self.interpolate_mode = interpolate_mode
        if pos_type == 'learnable':
            n = num_extra_tokens + self.grid_size[0] * self.grid_size[1]
            self.pos_embed = nn.Parameter(torch.zeros(1, n, embed_dims))
        else:
            sincos_position_embedding_2d((1, 1), embed_dims)  # validates embed_dims

    def init_weights(self):
        super().init_weights()
        if self.pos_type == 'learnable' and self.init_cfg is None:
            trunc_normal_(self.pos_embed, std=.02)  # DeiT / timm

    def table(self, hw_shape: Sequence[int], dtype=None, device=None) -> torch.Tensor:
        """The encoding ``(1, extra + H*W, C)`` for grid ``hw_shape``.

        While exporting with symbolic sizes (``torch.export`` dims: ``hw_shape`` holds ``torch.SymInt``) the
        learnable table is always resized (an identity at the training grid), so the graph does not branch on
        the example's size and serves every size."""
        symbolic = any(isinstance(s, torch.SymInt) for s in hw_shape[:2])
        hw_shape = tuple(hw_shape[:2]) if symbolic else (int(hw_shape[0]), int(hw_shape[1]))
        if self.pos_type == 'sincos':
            emb = sincos_position_embedding_2d(hw_shape, self.embed_dims, dtype=dtype or torch.float32,
                                               device=device)
            if self.num_extra_tokens:
                emb = torch.cat([emb.new_zeros(1, self.num_extra_tokens, self.embed_dims), emb], dim=1)
            return emb
        if not symbolic and hw_shape == self.grid_size:
            return self.pos_embed
        if self.interpolate_mode == 'bicubic' and not symbolic:
            from mmpretrain.models.utils import resize_pos_embed
            return resize_pos_embed(self.pos_embed, self.grid_size, hw_shape, mode=self.interpolate_mode,
                                    num_extra_tokens=self.num_extra_tokens)
        # 'bilinear' (PVT v1 / mmdet) in the table's own dtype; 'bicubic' in float32, as mmpretrain's
        # resize_pos_embed does; align_corners=False
        n, (h, w) = self.num_extra_tokens, self.grid_size
        grid = self.pos_embed[:, n:].reshape(1, h, w, -1).permute(0, 3, 1, 2)
        resized = F.interpolate(grid.float() if self.interpolate_mode == 'bicubic' else grid, size=hw_shape,
                                mode=self.interpolate_mode, align_corners=False).to(grid.dtype)
        return torch.cat([self.pos_embed[:, :n], resized.flatten(2).transpose(1, 2)], dim=1)

    def forward(self, x: torch.Tensor, hw_shape: Sequence[int]) -> torch.Tensor:
        if x.shape[1] != self.num_extra_tokens + hw_shape[0] * hw_shape[1]:
            raise ValueError(f'absolute position encoding got {x.shape[1]} tokens for grid {tuple(hw_shape)} '
                             f'and {self.num_extra_tokens} extra token(s)')
        return x + self.table(hw_shape, x.dtype, x.device)

    def extra_repr(self) -> str:
        return f'pos_type={self.pos_type!r}, grid_size={self.grid_size}, num_extra_tokens={self.num_extra_tokens}'


def relative_offset_index(hw_shape: Sequence[int], max_distance: int, num_extra_tokens: int = 0,
                          device=None) -> torch.Tensor:
    """``(N, N)`` int64 index into a ``(2K+1)^2 + 1`` row table for query ``i`` and key ``j`` of a row-major
    grid: ``(clip(r_j - r_i) + K) * (2K+1) + clip(c_j - c_i) + K``; pairs involving an extra token
    index the last row (the "no position" entry, kept at zero)."""
    H, W = int(hw_shape[0]), int(hw_shape[1])
    K = int(max_distance)
    rows = torch.arange(H, device=device).repeat_interleave(W)
    cols = torch.arange(W, device=device).repeat(H)
    dr = (rows[None, :] - rows[:, None]).clamp(-K, K) + K
    dc = (cols[None, :] - cols[:, None]).clamp(-K, K) + K
    idx = dr * (2 * K + 1) + dc
    if num_extra_tokens:
        n = num_extra_tokens + H * W
        full = torch.full((n, n), (2 * K + 1) ** 2, dtype=idx.dtype, device=device)
        full[num_extra_tokens:, num_extra_tokens:] = idx
        idx = full
    return idx


@MODELS.register_module()
class RelativePositionEncoding2d(BaseModule):
    """2-D relative position encoding of self-attention (Shaw et al. 2018, clipped at K per axis).

    Args:
        head_dims (int): channels per head d (the key / value embeddings have this size).
        num_heads (int): heads (the size of the ``'bias'`` table).
        max_distance (int): K; offsets beyond +-K per axis share the boundary entry. CPVT Sec. 5.3: 8.
        mode (str): 'key' (``a^K`` on the keys), 'key_value' (Shaw et al.: ``a^K`` and ``a^V``) or
            'bias' (one scalar per head and offset added to the logits).

    Tables: ``key_table`` / ``value_table`` ``((2K+1)^2, d)`` or ``bias_table`` ``((2K+1)^2, heads)``
    (a zero entry for the cls-token pairs is appended at lookup), i.e. ``(2K+1)^2 d`` learned
    parameters per table, or ``(2K+1)^2 heads`` in bias mode (K = 13, 3 heads: 2,187).
    """

    def __init__(self, head_dims: int, num_heads: int, max_distance: int = 8, mode: str = 'key_value',
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        if mode not in RPE_MODES:
            raise ValueError(f'unknown relative position encoding mode {mode!r}; choose one of {RPE_MODES}')
        if max_distance < 1:
            raise ValueError(f'relative position max_distance must be >= 1, got {max_distance}')
        self.head_dims, self.num_heads = head_dims, num_heads
        self.max_distance, self.mode = int(max_distance), mode
        rows = (2 * self.max_distance + 1) ** 2
        if mode == 'bias':
            self.bias_table = nn.Parameter(torch.zeros(rows, num_heads))
        else:
            self.key_table = nn.Parameter(torch.zeros(rows, head_dims))
            if mode == 'key_value':
                self.value_table = nn.Parameter(torch.zeros(rows, head_dims))

    def init_weights(self):
        super().init_weights()
        if self.init_cfg is None:
            for p in self.parameters():
                trunc_normal_(p, std=.02)

    @staticmethod
    def _gather(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        padded = torch.cat([table, table.new_zeros(1, table.shape[1])], dim=0)
        return padded[idx]

    def attention_logits(self, q: torch.Tensor, scale: float, hw_shape, num_extra_tokens: int):
        """The term added to ``q k^T * scale``: ``(B or 1, heads, N, N)``."""
        idx = relative_offset_index(hw_shape, self.max_distance, num_extra_tokens, q.device)
        if idx.shape[0] != q.shape[-2]:
            raise ValueError(f'relative position encoding got {q.shape[-2]} tokens for grid {tuple(hw_shape)} '
                             f'and {num_extra_tokens} extra token(s)')
        if self.mode == 'bias':
            return self._gather(self.bias_table, idx).permute(2, 0, 1)[None].to(q.dtype)
        a_k = self._gather(self.key_table, idx).to(q.dtype)  # (N, N, d)
        return torch.einsum('bhnd,nmd->bhnm', q, a_k) * scale

    def attention_values(self, attn: torch.Tensor, hw_shape, num_extra_tokens: int) -> Optional[torch.Tensor]:
        """The term added to ``attn @ v`` (``'key_value'`` mode), else None."""
        if self.mode != 'key_value':
            return None
        idx = relative_offset_index(hw_shape, self.max_distance, num_extra_tokens, attn.device)
        a_v = self._gather(self.value_table, idx).to(attn.dtype)
        return torch.einsum('bhnm,nmd->bhnd', attn, a_v)

    def extra_repr(self) -> str:
        return f'mode={self.mode!r}, max_distance={self.max_distance}, num_heads={self.num_heads}'
