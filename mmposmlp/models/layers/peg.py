"""Positional Encoding Generator (PEG) of CPVT.

Chu et al., "Conditional Positional Encodings for Vision Transformers", ICLR 2023
(https://arxiv.org/abs/2102.10882), Sec. 3.2 / Fig. 2: the token sequence
``X in R^{B x N x C}`` is reshaped to ``B x C x H x W``, a function ``F`` of the local
neighbourhood (a k x k convolution with ``(k - 1) / 2`` zero padding) produces the
conditional encodings, which are added to the input: ``PEG(X) = F(X) + X``.

Variants of ``F`` (Table 14): one depthwise 3x3 conv (default, = official Twins
``PosCNN``), a larger kernel (7x7), stacks of ``depthwise conv + BN + ReLU``, dense
(full) convs, and depthwise-separable convs (depthwise k x k followed by pointwise 1x1).
Ablations: no zero padding (Table 11, ``padding_mode``), a fixed PEG (Table 5, ``frozen``:
random init, or a learned PEG loaded through ``init_cfg=dict(type='Pretrained', ...)``).
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from .grouped_conv import GroupedConv2d

CONV_TYPES = ('depthwise', 'dense', 'separable')
PADDING_MODES = ('zeros', 'none', 'circular', 'reflect', 'replicate')


@MODELS.register_module()
class PEG(BaseModule):
    """Position encoding generator: ``x + F(x)`` with ``F`` a stack of zero-padded convs.

    Args:
        embed_dims (int): channels C.
        kernel_size (int): odd kernel k (>= 3 in the paper), zero padding (k - 1) // 2.
            Default 3.
        num_layers (int): number of conv layers stacked in ``F``. Default 1.
        conv_type (str): 'depthwise' (groups=C, the paper's default), 'dense' (full
            C->C conv, Table 14 "Dense Conv") or 'separable' (depthwise k x k + pointwise 1x1).
        norm_cfg (dict, optional): norm after every conv layer, e.g. ``dict(type='BN')``
            for Table 14's "4 * (Depthwise Conv 3x3 + BN + ReLU)". Default None.
        act_cfg (dict, optional): activation after every conv layer (after the norm),
            e.g. ``dict(type='ReLU')``. Default None.
        bias (bool | str): conv bias; 'auto' = bias unless a norm follows. Default 'auto'.
        padding_mode (str): 'zeros' (the paper's PEG: (k-1)/2 zero padding, which tells border
            tokens where they are, Sec. 3.2 / Table 11); 'none' = no padding at all (Table 11's
            "w/o zero paddings" read literally: every conv is a valid conv, the encoding
            (H-L(k-1)) x (W-L(k-1)) is added to the centre tokens and the border tokens keep
            ``x``); 'circular' / 'reflect' / 'replicate' = the size-keeping paddings of
            ``nn.Conv2d`` without zeros. Default 'zeros'.
        frozen (bool): the PEG weights get ``requires_grad=False`` (Table 5's fixed PEG: random
            init, or a learned one through ``init_cfg=dict(type='Pretrained', checkpoint=...,
            prefix='backbone.pegs.0.')``, loaded strictly). Default False.
        init_cfg (dict, optional): mmengine init config.

    The layers live in ``self.proj`` (``nn.Sequential``); with the default settings
    ``proj.0`` is the depthwise conv, exactly the official ``pos_block.{i}.proj.0``.

    Forward:
        ``forward(x, hw_shape=None, num_extra_tokens=0)``. ``x`` is either NCHW
        (``hw_shape`` ignored) or tokens ``(B, N, C)`` with ``N = num_extra_tokens + H * W``;
        leading extra tokens (cls token) are passed through untouched.
    """

    def __init__(self,
                 embed_dims: int,
                 kernel_size: int = 3,
                 num_layers: int = 1,
                 conv_type: str = 'depthwise',
                 norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None,
                 bias='auto',
                 padding_mode: str = 'zeros',
                 frozen: bool = False,
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        from mmposmlp.models.checkpoints import pretrained_init_cfg
        pretrained_init_cfg(self)  # refuse a misspelt Pretrained init_cfg when built, not when loading
        if padding_mode not in PADDING_MODES:
            raise ValueError(f'PEG padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}')
        if conv_type not in CONV_TYPES:
            raise ValueError(f'PEG conv_type must be one of {CONV_TYPES}, got {conv_type!r}')
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'PEG kernel_size must be odd (zero padding (k-1)/2 keeps the size), '
                             f'got {kernel_size}')
        if num_layers < 1:
            raise ValueError(f'PEG num_layers must be >= 1, got {num_layers}')
        self.embed_dims = embed_dims
        self.kernel_size = kernel_size
        self.num_layers = num_layers
        self.conv_type = conv_type
        self.padding_mode = padding_mode
        self.frozen = frozen
        if bias == 'auto':
            bias = norm_cfg is None
        pad = 0 if padding_mode == 'none' else (kernel_size - 1) // 2
        pad_kw = dict(padding_mode='zeros' if padding_mode == 'none' else padding_mode)
        C = embed_dims
        layers = []
        for _ in range(num_layers):
            if conv_type == 'depthwise':
                layers.append(GroupedConv2d(C, C, kernel_size, 1, pad, groups=C, bias=bias, **pad_kw))
            elif conv_type == 'dense':
                layers.append(nn.Conv2d(C, C, kernel_size, 1, pad, bias=bias, **pad_kw))
            else:  # separable
                layers.append(GroupedConv2d(C, C, kernel_size, 1, pad, groups=C, bias=False, **pad_kw))
                layers.append(nn.Conv2d(C, C, 1, bias=bias))
            if norm_cfg is not None:
                layers.append(build_norm_layer(norm_cfg, C)[1])
            if act_cfg is not None:
                layers.append(build_activation_layer(act_cfg))
        self.proj = nn.Sequential(*layers)
        if frozen:
            for p in self.parameters():
                p.requires_grad = False

    def init_weights(self):
        from mmposmlp.models.checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            load_pretrained_init_cfg(self, pretrained)
            self._is_init = True
            return
        super().init_weights()

    def encoding(self, feat: torch.Tensor) -> torch.Tensor:
        """``F(X)`` on an NCHW map, the same size as ``feat`` (see ``padding_mode='none'``)."""
        if self.padding_mode != 'none':
            return self.proj(feat)
        lost = self.num_layers * (self.kernel_size - 1)
        if min(feat.shape[-2:]) <= lost:
            raise ValueError(f'PEG without padding needs a grid larger than {self.num_layers} x '
                             f'({self.kernel_size} - 1) = {lost} per side, got {tuple(feat.shape[-2:])}')
        enc = self.proj(feat)
        dh, dw = (feat.shape[-2] - enc.shape[-2]) // 2, (feat.shape[-1] - enc.shape[-1]) // 2
        return nn.functional.pad(enc, (dw, dw, dh, dh))

    def forward(self, x: torch.Tensor, hw_shape: Optional[Sequence[int]] = None,
                num_extra_tokens: int = 0) -> torch.Tensor:
        if x.dim() == 4:
            if x.shape[1] != self.embed_dims:
                raise ValueError(f'PEG expects {self.embed_dims} channels (NCHW), got {tuple(x.shape)}')
            return self.encoding(x) + x
        if x.dim() != 3:
            raise ValueError(f'PEG expects NCHW or (B, N, C) tokens, got shape {tuple(x.shape)}')
        if hw_shape is None:
            raise ValueError('PEG on a token sequence (B, N, C) needs hw_shape=(H, W)')
        B, N, C = x.shape
        H, W = hw_shape
        if C != self.embed_dims or N != num_extra_tokens + H * W:
            raise ValueError(f'PEG got tokens {tuple(x.shape)} but hw_shape {tuple(hw_shape)}, '
                             f'{num_extra_tokens} extra token(s) and {self.embed_dims} channels: '
                             f'need N = extra + H*W and C = {self.embed_dims}')
        extra, tokens = x[:, :num_extra_tokens], x[:, num_extra_tokens:]
        feat = tokens.transpose(1, 2).reshape(B, C, H, W)
        out = (self.encoding(feat) + feat).flatten(2).transpose(1, 2)
        if num_extra_tokens:
            out = torch.cat([extra, out], dim=1)
        return out

    def extra_repr(self) -> str:
        return (f'embed_dims={self.embed_dims}, kernel_size={self.kernel_size}, '
                f'num_layers={self.num_layers}, conv_type={self.conv_type!r}'
                + (f', padding_mode={self.padding_mode!r}' if self.padding_mode != 'zeros' else '')
                + (', frozen=True' if self.frozen else ''))


def tokens_to_nchw(x: torch.Tensor, hw_shape: Tuple[int, int]) -> torch.Tensor:
    """(B, H*W, C) -> (B, C, H, W)."""
    B, _, C = x.shape
    return x.transpose(1, 2).reshape(B, C, *hw_shape)
