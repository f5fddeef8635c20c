"""Positional Encoding Generator (PEG) of CPVT.

Chu et al., "Conditional Positional Encodings for Vision Transformers", ICLR 2023
(https://arxiv.org/abs/2102.10882), Sec. 3.2 / Fig. 2: the token sequence
``X in R^{B x N x C}`` is reshaped to ``B x C x H x W``, a function ``F`` of the local
neighbourhood (a k x k convolution with ``(k - 1) / 2`` zero padding) produces the
conditional encodings, which are added to the input: ``PEG(X) = F(X) + X``.

Variants of ``F`` (Table 14): one depthwise 3x3 conv (default, = official Twins
``PosCNN``), a larger kernel (7x7), stacks of ``depthwise conv + BN + ReLU``, dense
(full) convs, and depthwise-separable convs (depthwise k x k followed by pointwise 1x1).
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS

CONV_TYPES = ('depthwise', 'dense', 'separable')


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
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
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
        if bias == 'auto':
            bias = norm_cfg is None
        pad = (kernel_size - 1) // 2
        C = embed_dims
        layers = []
        for _ in range(num_layers):
            if conv_type == 'depthwise':
                layers.append(nn.Conv2d(C, C, kernel_size, 1, pad, groups=C, bias=bias))
            elif conv_type == 'dense':
                layers.append(nn.Conv2d(C, C, kernel_size, 1, pad, bias=bias))
            else:  # separable
                layers.append(nn.Conv2d(C, C, kernel_size, 1, pad, groups=C, bias=False))
                layers.append(nn.Conv2d(C, C, 1, bias=bias))
            if norm_cfg is not None:
                layers.append(build_norm_layer(norm_cfg, C)[1])
            if act_cfg is not None:
                layers.append(build_activation_layer(act_cfg))
        self.proj = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, hw_shape: Optional[Sequence[int]] = None,
                num_extra_tokens: int = 0) -> torch.Tensor:
        if x.dim() == 4:
            if x.shape[1] != self.embed_dims:
                raise ValueError(f'PEG expects {self.embed_dims} channels (NCHW), got {tuple(x.shape)}')
            return self.proj(x) + x
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
        out = (self.proj(feat) + feat).flatten(2).transpose(1, 2)
        if num_extra_tokens:
            out = torch.cat([extra, out], dim=1)
        return out

    def extra_repr(self) -> str:
        return (f'embed_dims={self.embed_dims}, kernel_size={self.kernel_size}, '
                f'num_layers={self.num_layers}, conv_type={self.conv_type!r}')


def tokens_to_nchw(x: torch.Tensor, hw_shape: Tuple[int, int]) -> torch.Tensor:
    """(B, H*W, C) -> (B, C, H, W)."""
    B, _, C = x.shape
    return x.transpose(1, 2).reshape(B, C, *hw_shape)
