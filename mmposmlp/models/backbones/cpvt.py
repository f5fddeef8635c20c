"""CPVT: a plain DeiT/ViT whose absolute position embedding is replaced by PEGs.

Chu et al., "Conditional Positional Encodings for Vision Transformers", ICLR 2023
(https://arxiv.org/abs/2102.10882). Architectures = DeiT-Ti/S/B (Table 9), PEG positions
(Table 6 / Table 12): position ``p`` is the *output of encoder block p* (``-1`` = the input of
the first block); the paper's best "0-5" setting = positions 0, 1, 2, 3, 4 (one PEG after each
of the first five encoders, footnote of Tables 2 and 4). With no absolute position embedding
the model runs at any input size without interpolation (Table 2).
"""
from typing import Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import constant_init, trunc_normal_init
from torch.nn.modules.batchnorm import _BatchNorm

from mmposmlp.models.checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from mmposmlp.models.converters.cpvt import checkpoint_filter_fn
from mmposmlp.models.layers.peg import PEG
from mmposmlp.models.layers.position_encoding import AbsolutePositionEmbedding, RelativePositionEncoding2d
from mmposmlp.registry import MODELS
from ..layers.grouped_conv import GroupedConv2d
from .base import FrozenStagesMixin
from .pvt_peg import build_ffn


class MultiheadSelfAttention(BaseModule):
    """ViT attention: ``proj(softmax(q k^T / sqrt(d)) v)`` with a fused ``qkv`` Linear.

    ``qk_input`` (optional, the same shape as ``x``): the tokens the query and key projections read,
    while the value projection reads ``x`` (CPVT Sec. 5.1, a PEG "only when calculating Q and K").
    """

    def __init__(self, embed_dims, num_heads, qkv_bias=True, attn_drop=0., proj_drop=0.):
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} must be divisible by num_heads {num_heads}')
        self.num_heads = num_heads
        self.scale = (embed_dims // num_heads) ** -0.5
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, rpe=None, hw_shape=None, num_extra_tokens=0, qk_input=None):
        """``rpe``: an optional :class:`RelativePositionEncoding2d` (Shaw et al. Eq. (3)-(4))."""
        B, N, C = x.shape
        conv_proj = getattr(self, 'conv_proj', None)
        if conv_proj is not None and qk_input is not None:
            raise ValueError('an attention with a convolutional projection cannot also take a separate '
                             'query/key input; use one or the other')
        if conv_proj is None and qk_input is None:
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:  # q, k, v each from its own input, through its third of the qkv Linear
            inputs = conv_proj(x, hw_shape, num_extra_tokens) if qk_input is None else (qk_input, qk_input, x)
            bias = self.qkv.bias.chunk(3) if self.qkv.bias is not None else (None, ) * 3
            q, k, v = (F.linear(t, w, b).reshape(B, N, self.num_heads, C // self.num_heads).transpose(1, 2)
                       for t, w, b in zip(inputs, self.qkv.weight.chunk(3), bias))
        logits = (q @ k.transpose(-2, -1)) * self.scale
        if rpe is not None:
            logits = logits + rpe.attention_logits(q, self.scale, hw_shape, num_extra_tokens)
        attn = self.attn_drop(logits.softmax(dim=-1))
        out = attn @ v
        if rpe is not None:
            extra = rpe.attention_values(attn, hw_shape, num_extra_tokens)
            if extra is not None:
                out = out + extra
        return self.proj_drop(self.proj(out.transpose(1, 2).reshape(B, N, C)))


class ConvProjection(BaseModule):
    """CvT's convolutional projection (Wu et al. 2021, Sec. 3.2) as CPVT Table 16 inserts it into one
    DeiT block: a depthwise ``k x k`` convolution (with bias) of the token grid for each of q, k and v,
    applied before the block's q/k/v linear projections. Extra tokens (cls, dist) have no grid
    position and pass unchanged, as in CvT. Stride 1 for all three (Table 16's count fixes neither
    BN nor a stride; three biased 3x3 depthwise convs give its +5,760 parameters on DeiT-tiny)."""

    def __init__(self, embed_dims: int, kernel_size: int = 3):
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'conv_proj kernel_size must be a positive odd number, got {kernel_size}')
        self.q, self.k, self.v = (GroupedConv2d(embed_dims, embed_dims, kernel_size, padding=kernel_size // 2,
                                                groups=embed_dims) for _ in range(3))

    def forward(self, x, hw_shape, num_extra_tokens=0):
        """(B, N, C) tokens -> the q, k and v inputs, each (B, N, C)."""
        B, N, C = x.shape
        extra, grid = x[:, :num_extra_tokens], x[:, num_extra_tokens:]
        grid = grid.transpose(1, 2).reshape(B, C, *hw_shape)
        return tuple(torch.cat([extra, conv(grid).flatten(2).transpose(1, 2)], dim=1)
                     for conv in (self.q, self.k, self.v))


class CPVTBlock(BaseModule):
    """Pre-norm transformer encoder block (DeiT)."""

    def __init__(self, embed_dims, num_heads, feedforward_channels, qkv_bias=True, drop_rate=0.,
                 attn_drop_rate=0., drop_path_rate=0., norm_cfg=dict(type='LN', eps=1e-6),
                 ffn_cfg=None, with_cp=False, rpe=None):
        super().__init__()
        self.with_cp = with_cp
        self.rpe = rpe
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = MultiheadSelfAttention(embed_dims, num_heads, qkv_bias, attn_drop_rate, drop_rate)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.ln2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.ffn = build_ffn(ffn_cfg, embed_dims, feedforward_channels, drop_rate)

    def forward(self, x, hw_shape=None, shared_rpe=None, num_extra_tokens=0, qk_x=None):
        """``qk_x`` (optional): tokens whose ``ln1`` feeds the attention's query and key in place of
        ``x``'s; the value and the residual stream keep ``x``."""
        rpe = self.rpe if self.rpe is not None else shared_rpe

        def _inner(x, qk_x):
            qk_input = None if qk_x is None else self.ln1(qk_x)
            x = x + self.drop_path(self.attn(self.ln1(x), rpe, hw_shape, num_extra_tokens, qk_input))
            return x + self.drop_path(self.ffn(self.ln2(x), hw_shape))

        if self.with_cp and x.requires_grad:
            return cp.checkpoint(_inner, x, qk_x, use_reentrant=False)
        return _inner(x, qk_x)


@MODELS.register_module()
class CPVT(FrozenStagesMixin, BaseModule):
    """Conditional Position encoding Vision Transformer (CPVT-Ti/S/B).

    Architectures (CPVT Table 9 = DeiT; params with 1000-class head, 5 PEGs, cls token)::

        arch        | embed_dims | depth | heads | mlp | params (ours) | paper (Table 9 / Table 4)
        tiny  (ti)  | 192        | 12    | 3     | 768 | 5.69M         | 6M / 6M
        small (s)   | 384        | 12    | 6     | 1536| 21.99M        | 22M / 23M
        base  (b)   | 768        | 12    | 12    | 3072| 86.45M        | 86M / 88M

    Args:
        arch (str | dict): 'tiny'/'ti'/'deit-tiny', 'small'/'s'/'deit-small', 'base'/'b'/'deit-base'
            or a dict with embed_dims, num_layers, num_heads, feedforward_channels.
        img_size: unused by the model (kept for config symmetry; any input size works).
        patch_size (int): 16. Non-divisible inputs are floored (strided conv, as DeiT).
        in_channels (int): 3.
        peg_positions (Sequence[int]): PEG positions; ``p >= 0`` = after block ``p``, ``-1`` =
            before the first block. Default (0, 1, 2, 3, 4) = the paper's "0-5" (Table 12).
        peg_cfg (dict): kwargs of :class:`mmposmlp.PEG` (kernel_size, num_layers, conv_type...).
        peg_target (str): where each PEG's output goes. 'tokens' (default, the paper's PEG): it
            replaces the token stream. 'qk' (Sec. 5.1, "only adding it when calculating Q and K"):
            the PEG at position ``p`` feeds only the query and key of block ``p + 1``'s attention
            (through that block's ``ln1``), while the value, the residual stream and every other
            block keep the un-encoded tokens; the extra tokens pass the PEG unchanged as usual.
            Refused for a PEG after the last block (no attention follows) and for a block that
            also has a convolutional projection (``conv_proj_blocks``).
        with_cls_token (bool): prepend a cls token (passed through the PEGs untouched).
        with_dist_token (bool): also prepend DeiT's distillation token after the cls token
            (Touvron et al. 2021, Sec. 5; CPVT Table 4's hard-distilled rows): the tokens are
            ``[cls, dist, patches]``, both extra tokens pass the PEGs untouched, and
            ``out_type='cls_token'`` returns ``(cls, dist)`` as mmpretrain's
            ``DistilledVisionTransformer`` does (for ``DeiTClsHead`` /
            :class:`mmposmlp.DeiTDistillationHead`). Needs ``with_cls_token=True``.
        out_type (str): 'cls_token' (CPVT), 'avg_featmap' (CPVT-GAP: mean of patch tokens, then
            ``ln2``), 'featmap' (NCHW) or 'raw' — mmpretrain ``VisionTransformer`` convention.
        final_norm (bool): LayerNorm ``ln1`` on all tokens after the last block. The GAP configs
            use ``final_norm=False`` with ``out_type='avg_featmap'`` (norm after pooling), as
            mmpretrain does.
        out_indices (Sequence[int]): blocks whose outputs are returned. Default -1.
        drop_rate, attn_drop_rate, drop_path_rate (float): DeiT: 0, 0, 0.1.
        qkv_bias (bool): True.
        norm_cfg (dict): LN eps 1e-6 (DeiT).
        ffn_cfg (dict, optional): channel MLP (default :class:`mmposmlp.PVTMlp`), built with
            embed_dims / feedforward_channels / ffn_drop and called as ``ffn(x, hw_shape)``; with
            a cls token ``x`` holds ``1 + H*W`` tokens (the leading token is not on the grid).
        frozen_stages (int): -1 none; 0 the patch embed and cls token; ``k`` also the first ``k``
            blocks with the PEGs placed before them (shared convention, ``FrozenStagesMixin``).
        pos_embed_type (str, optional): absolute position encoding, added after the cls token is
            prepended (DeiT; other places: ``pos_embed_positions``): None (CPVT), 'learnable' (DeiT "LE", a
            ``(extra + (img_size/patch)^2) x C`` table, bicubic-resized at other sizes) or
            'sincos' (fixed 2-D sine-cosine, recomputed for every grid). Tables 1, 3, 7, 8.
        pos_embed_positions (Sequence[int], optional): where the absolute encodings are added, in
            ``peg_positions``' convention: ``-1`` = once before block 0 (DeiT, the default),
            ``p >= 0`` = after block ``p``, each position its own encoding (its own learnable
            ``(extra + H*W) x C`` table, cls row included, like DeiT's). Sec. 5.3's "LE not only at
            the beginning but also in the next 5 layers" = ``(-1, 0, 1, 2, 3, 4)``. At a position
            with a PEG too, the encoding is added first and the PEG reads the sum. Needs
            ``pos_embed_type``.
        rpe_cfg (dict, optional): 2-D relative position encoding in the attention of every block
            (Tables 1, 7, 8): kwargs of :class:`mmposmlp.RelativePositionEncoding2d`
            (``max_distance``, ``mode``) plus ``shared`` (one table used by all blocks, default
            False = one per block).
        conv_proj_blocks (Sequence[int]): blocks whose attention takes CvT's convolutional projection
            (:class:`ConvProjection`: a biased depthwise 3x3 conv per q/k/v before the projections),
            Table 16's "DeiT + Convolutional Projection" at position 0. Default none.
        norm_eval, with_cp, init_cfg: as usual; a Pretrained init raises on missing keys and on
            checkpoint keys with no place in the backbone unless ``ignore_keys=[patterns]``.
    """
    arch_zoo = {
        **dict.fromkeys(['ti', 'tiny', 'deit-tiny', 't'],
                        dict(embed_dims=192, num_layers=12, num_heads=3, feedforward_channels=768)),
        **dict.fromkeys(['s', 'small', 'deit-small'],
                        dict(embed_dims=384, num_layers=12, num_heads=6, feedforward_channels=1536)),
        **dict.fromkeys(['b', 'base', 'deit-base'],
                        dict(embed_dims=768, num_layers=12, num_heads=12, feedforward_channels=3072)),
    }
    essential_keys = ('embed_dims', 'num_layers', 'num_heads', 'feedforward_channels')
    OUT_TYPES = ('raw', 'cls_token', 'featmap', 'avg_featmap')
    PEG_TARGETS = ('tokens', 'qk')

    def __init__(self,
                 arch='tiny',
                 img_size=224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 peg_positions: Sequence[int] = (0, 1, 2, 3, 4),
                 peg_cfg: Optional[dict] = None,
                 peg_target: str = 'tokens',
                 with_cls_token: bool = True,
                 with_dist_token: bool = False,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 out_indices=-1,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 ffn_cfg: Optional[dict] = None,
                 pos_embed_type: Optional[str] = None,
                 pos_embed_positions: Optional[Sequence[int]] = None,
                 rpe_cfg: Optional[dict] = None,
                 conv_proj_blocks: Sequence[int] = (),
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self)  # refuse a misspelt Pretrained init_cfg when built, not when loading
        arch = self._parse_arch(arch)
        self.embed_dims = C = arch['embed_dims']
        self.num_layers = arch['num_layers']
        self._set_tokens(out_type, with_cls_token, with_dist_token)
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.peg_positions = self._positions('peg_positions', peg_positions)
        self.peg_target = self._checked_peg_target(peg_target)
        self._set_out_indices(out_indices, self.num_layers, unit='blocks')
        self._set_frozen_stages(frozen_stages, self.num_layers, norm_eval, unit='blocks')
        self.final_norm = final_norm

        self.patch_embed = nn.Conv2d(in_channels, C, patch_size, patch_size)
        if with_cls_token:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, C))
        if with_dist_token:
            self.dist_token = nn.Parameter(torch.zeros(1, 1, C))
        self._build_abs_pos_embeds(pos_embed_type, pos_embed_positions, img_size)
        self.drop_after_pos = nn.Dropout(drop_rate)
        self._build_layers(arch, rpe_cfg, dict(peg_cfg or {}), drop_path_rate,
                           dict(qkv_bias=qkv_bias, drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                                norm_cfg=norm_cfg, ffn_cfg=ffn_cfg, with_cp=with_cp))
        self._add_conv_projections(conv_proj_blocks)
        if final_norm:
            self.ln1 = build_norm_layer(norm_cfg, C)[1]
        if out_type == 'avg_featmap':
            self.ln2 = build_norm_layer(norm_cfg, C)[1]
        self._set_feature_info([C] * self.num_layers, [patch_size] * self.num_layers, module='layers')
        self._freeze_stages()

    def _parse_arch(self, arch) -> dict:
        if isinstance(arch, str):
            if arch.lower() not in self.arch_zoo:
                raise ValueError(f'unknown CPVT arch {arch!r}; choose one of {sorted(self.arch_zoo)} '
                                 f'or pass a dict with {self.essential_keys}')
            return self.arch_zoo[arch.lower()]
        missing = set(self.essential_keys) - set(arch)
        if missing:
            raise ValueError(f'custom CPVT arch is missing {sorted(missing)}; needs {self.essential_keys}')
        return arch

    def _set_tokens(self, out_type: str, with_cls_token: bool, with_dist_token: bool) -> None:
        """``out_type`` and the extra tokens (cls, then DeiT's distillation token)."""
        if out_type not in self.OUT_TYPES:
            raise ValueError(f'unknown out_type {out_type!r}; choose one of {self.OUT_TYPES}')
        if out_type == 'cls_token' and not with_cls_token:
            raise ValueError("out_type='cls_token' needs with_cls_token=True (or use out_type='avg_featmap')")
        if with_dist_token and not with_cls_token:
            raise ValueError('with_dist_token=True needs with_cls_token=True (DeiT puts the distillation token '
                             'after the cls token); set both or neither.')
        self.out_type = out_type
        self.with_cls_token = with_cls_token
        self.with_dist_token = with_dist_token
        self.num_extra_tokens = int(with_cls_token) + int(with_dist_token)

    def _checked_peg_target(self, peg_target: str) -> str:
        if peg_target not in self.PEG_TARGETS:
            raise ValueError(f'unknown peg_target {peg_target!r}; choose one of {self.PEG_TARGETS}')
        if peg_target == 'qk' and not self.peg_positions:
            raise ValueError("peg_target='qk' needs at least one PEG in peg_positions (or use the default "
                             "peg_target='tokens' without PEGs)")
        if peg_target == 'qk' and self.peg_positions[-1] == self.num_layers - 1:
            raise ValueError(f"peg_target='qk' feeds the query and key of the block after each PEG, and no "
                             f'block follows position {self.num_layers - 1}; use positions -1 .. '
                             f'{self.num_layers - 2}')
        return peg_target

    def _build_abs_pos_embeds(self, pos_embed_type: Optional[str], positions: Optional[Sequence[int]],
                              img_size) -> None:
        """The absolute position encodings: ``abs_pos_embed`` at -1, ``block_pos_embeds`` after blocks."""
        self.pos_embed_type = pos_embed_type
        if pos_embed_type is None and positions is not None:
            raise ValueError(f'pos_embed_positions={tuple(positions)} needs pos_embed_type '
                             "('learnable' or 'sincos'); drop pos_embed_positions for a model without one")
        if pos_embed_type is None:
            positions = []
        else:
            positions = self._positions('pos_embed_positions', (-1, ) if positions is None else positions)
        if pos_embed_type is not None and not positions:
            raise ValueError('pos_embed_positions is empty; give at least one position (-1 = DeiT) or set '
                             'pos_embed_type=None')
        self.pos_embed_positions = positions
        grid = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        grid = (grid[0] // self.patch_size, grid[1] // self.patch_size)

        def new_abs_pos_embed():
            return AbsolutePositionEmbedding(self.embed_dims, grid, pos_embed_type, self.num_extra_tokens)

        if -1 in positions:
            self.abs_pos_embed = new_abs_pos_embed()
        after_blocks = [p for p in positions if p >= 0]
        if after_blocks:
            self.block_pos_embeds = ModuleList([new_abs_pos_embed() for _ in after_blocks])
        self._block_pos_embed_index = {p: i for i, p in enumerate(after_blocks)}

    def _build_layers(self, arch: dict, rpe_cfg: Optional[dict], peg_cfg: dict, drop_path_rate: float,
                      block_cfg: dict) -> None:
        """The PEGs and the encoder blocks, with a relative position encoding per block or one shared
        (``rpe_cfg``)."""
        with_rpe = rpe_cfg is not None
        rpe_cfg = dict(rpe_cfg or {})
        heads = arch['num_heads']
        head_dims = self.embed_dims // heads
        rpe_shared = bool(rpe_cfg.pop('shared', False))
        if with_rpe and rpe_shared:
            self.rpe = RelativePositionEncoding2d(head_dims, heads, **rpe_cfg)
        self.rpe_cfg = rpe_cfg
        self.pegs = ModuleList([PEG(self.embed_dims, **peg_cfg) for _ in self.peg_positions])
        self._peg_index = {p: i for i, p in enumerate(self.peg_positions)}
        dpr = torch.linspace(0, drop_path_rate, self.num_layers).tolist()
        self.layers = ModuleList([
            CPVTBlock(self.embed_dims, heads, arch['feedforward_channels'], drop_path_rate=dpr[i],
                      rpe=RelativePositionEncoding2d(head_dims, heads, **rpe_cfg) if with_rpe and not rpe_shared
                      else None, **block_cfg)
            for i in range(self.num_layers)])

    def _add_conv_projections(self, conv_proj_blocks: Sequence[int]) -> None:
        """CvT's convolutional projection in the attention of each block of ``conv_proj_blocks``."""
        blocks = sorted(set(int(b) for b in conv_proj_blocks))
        bad = [b for b in blocks if not 0 <= b < self.num_layers]
        if bad:
            raise ValueError(f'conv_proj_blocks {bad} out of range: blocks are 0 .. {self.num_layers - 1}')
        both = [b for b in blocks if self.peg_target == 'qk' and b - 1 in self.peg_positions]
        if both:
            raise ValueError(f"blocks {both} would take both a convolutional projection and, with "
                             f"peg_target='qk', the PEG output as query/key input; drop them from "
                             f'conv_proj_blocks or move the PEGs')
        self.conv_proj_blocks = blocks
        for b in blocks:
            self.layers[b].attn.conv_proj = ConvProjection(self.embed_dims)

    def init_weights(self):
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            load_pretrained_init_cfg(self, pretrained, converter=checkpoint_filter_fn)
            return
        super().init_weights()
        if self.init_cfg is None:
            # DeiT/timm init: Linear trunc-normal .02, LN 1/0, cls token trunc-normal .02
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    trunc_normal_init(m, std=.02, bias=0.)
                elif isinstance(m, (nn.LayerNorm, _BatchNorm)):
                    constant_init(m, 1., 0.)
            if self.with_cls_token:
                nn.init.trunc_normal_(self.cls_token, std=.02)
            if self.with_dist_token:
                nn.init.trunc_normal_(self.dist_token, std=.02)

    def _positions(self, name, positions):
        """Sorted distinct positions in the PEG convention (-1 = before block 0, ``p`` = after block ``p``),
        refused in one sentence when one is out of range."""
        positions = sorted(set(int(p) for p in positions))
        bad = [p for p in positions if not -1 <= p < self.num_layers]
        if bad:
            raise ValueError(f'{name} {bad} out of range: use -1 (before block 0) .. '
                             f'{self.num_layers - 1} (after the last block)')
        return positions

    def _frozen_modules(self):
        mods = [self.patch_embed, self.drop_after_pos]
        if hasattr(self, 'abs_pos_embed'):
            mods.append(self.abs_pos_embed)
        mods += [self.layers[i] for i in range(min(self.frozen_stages, self.num_layers))]
        mods += [self.block_pos_embeds[i] for p, i in self._block_pos_embed_index.items() if p < self.frozen_stages]
        return mods + [self.pegs[i] for p, i in self._peg_index.items() if p < self.frozen_stages]

    def _frozen_parameters(self):
        return [getattr(self, n) for n in ('cls_token', 'dist_token') if hasattr(self, n)]

    def _position(self, pos, x, hw):
        """Position ``pos`` (after block ``pos``; -1 = before block 0): its absolute encoding (after
        blocks only; the one at -1 is added with the cls token), then its PEG. Returns the tokens and
        the query/key input of the next block (None = the tokens themselves)."""
        idx = self._block_pos_embed_index.get(pos)
        if idx is not None:
            x = self.block_pos_embeds[idx](x, hw)
        idx = self._peg_index.get(pos)
        if idx is None:
            return x, None
        encoded = self.pegs[idx](x, hw, self.num_extra_tokens)
        return (x, encoded) if self.peg_target == 'qk' else (encoded, None)

    def forward(self, x):
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'CPVT expects (B, {self.in_channels}, H, W) images, got {tuple(x.shape)}')
        if min(x.shape[2:]) < self.patch_size:
            raise ValueError(f'input {tuple(x.shape[2:])} is smaller than one {self.patch_size}px patch')
        B = x.shape[0]
        x = self.patch_embed(x)
        hw = (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)
        if self.with_cls_token:
            extra = [self.cls_token] + ([self.dist_token] if self.with_dist_token else [])
            x = torch.cat([t.expand(B, -1, -1) for t in extra] + [x], dim=1)
        if hasattr(self, 'abs_pos_embed'):
            x = self.abs_pos_embed(x, hw)
        x = self.drop_after_pos(x)
        x, qk = self._position(-1, x, hw)
        outs = {}
        shared_rpe = getattr(self, 'rpe', None)
        for i, layer in enumerate(self.layers):
            x = layer(x, hw, shared_rpe, self.num_extra_tokens, qk)
            x, qk = self._position(i, x, hw)
            if i == self.num_layers - 1 and self.final_norm:
                x = self.ln1(x)
            if i in self.out_indices:
                outs[i] = self._format_output(x, hw)
        return self._ordered_outputs(outs)

    def _format_output(self, x, hw):
        if self.out_type == 'raw':
            return x
        if self.out_type == 'cls_token':
            return (x[:, 0], x[:, 1]) if self.with_dist_token else x[:, 0]
        patch = x[:, self.num_extra_tokens:]
        if self.out_type == 'featmap':
            return patch.transpose(1, 2).reshape(x.shape[0], -1, *hw)
        return self.ln2(patch.mean(dim=1))
