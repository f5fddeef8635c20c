"""Isotropic gMLP backbone (Liu et al., "Pay Attention to MLPs", NeurIPS 2021,
https://arxiv.org/abs/2105.08050) with any gating unit of PosMLP (Wang et al., ACM MM 2022,
https://arxiv.org/abs/2207.07284): the backbone of PosMLP Tables 1, 3 and 10 ("gMLP").

A 16x16 patch embedding, ``num_layers`` blocks ``x + DropPath(fc2(gate(GELU(fc1(LN(x))))))`` and a
final LayerNorm. The gate is :class:`~mmposmlp.models.layers.gating.PositionalGatingUnit` over one
window covering the whole token grid: ``'sgu'`` is gMLP's spatial gating unit (Eq. 1, the dense token
FC ``W`` tied to the ``N`` tokens of ``img_size``), the other gate types are PosMLP's PoSGU variants
(Eq. 9-14). Either way the model takes ``img_size`` inputs only.

``converters.gmlp.convert_timm_gmlp`` maps timm's ``gmlp_*`` (``MlpMixer`` with ``SpatialGatingBlock``) state
dicts to ours: timm's ``gmlp_s16_224`` is gMLP-S with SGU, parameter for parameter.
"""
import copy
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from .base import FrozenStagesMixin
from ..checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from ..converters.gmlp import checkpoint_filter_fn
from ..layers.gating import GATE_TYPES, PositionalGatingUnit, init_gated_mlp_weights

LN6 = dict(type='LN', eps=1e-6)
#: gMLP's gate norm on ``X1``: ``nn.LayerNorm`` with its default eps (as timm's ``SpatialGatingUnit``)
GATE_LN = dict(type='LN', eps=1e-5)


class GMLPBlock(BaseModule):
    """``x + DropPath(fc2(gate(GELU(fc1(LN(x))))))`` on (B, N, C) tokens (gMLP Fig. 1, PosMLP Fig. 1a)."""

    def __init__(self, embed_dims: int, feedforward_channels: int, grid: Sequence[int], gate_type: str,
                 groups: int, norm_cfg: dict, gate_norm_cfg: dict, drop_path_rate: float = 0.,
                 with_cp: bool = False, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.with_cp = with_cp
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]
        self.fc1 = nn.Linear(embed_dims, feedforward_channels)
        self.act = nn.GELU()
        self.gate = PositionalGatingUnit(feedforward_channels, grid, groups=groups, gate_type=gate_type,
                                         norm_cfg=gate_norm_cfg)
        self.fc2 = nn.Linear(self.gate.out_channels, embed_dims)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def _inner_forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        y = self.gate.forward_mlp(self.norm(x).view(B, 1, N, C), self.fc1, self.act, self.fc2)
        return x + self.drop_path(y.view(B, N, C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._inner_forward, x, use_reentrant=False)
        return self._inner_forward(x)


@MODELS.register_module()
class GMLP(FrozenStagesMixin, BaseModule):
    """Isotropic gMLP (`Pay Attention to MLPs <https://arxiv.org/abs/2105.08050>`_, Table 1 there)
    with gMLP's SGU or a PosMLP gating unit (`PosMLP <https://arxiv.org/abs/2207.07284>`_ Tables 1, 3).

    =========  ======  ======  ===========  =====================  ==============
    arch       layers  d       d_ffn        gMLP paper params*     gMLP paper FLOPs
    =========  ======  ======  ===========  =====================  ==============
    ti / tiny  30      128     768          6M                     1.4G
    s / small  30      256     1536         20M                    4.5G
    b / base   30      512     3072         73M                    15.8G
    =========  ======  ======  ===========  =====================  ==============

    (* with SGU and the 1000-class head, patch 16 at 224x224. PosMLP Table 3 reports gMLP-S as
    19.4M / 4.42G.)

    Args:
        arch (str | dict): a name above or a dict with ``num_layers``, ``embed_dims`` and
            ``feedforward_channels``.
        img_size (int | Sequence[int]): the only input size (the gate mixes the whole token grid).
            Defaults to 224.
        patch_size (int): side of the non-overlapping patch embedding. Defaults to 16.
        in_channels (int): input channels. Defaults to 3.
        gate_type (str): a :data:`~mmposmlp.models.layers.gating.GATE_TYPES` name: ``'sgu'``
            (gMLP, default), ``'lrpe-m'``, ``'lrpe'``, ``'glrpe'``, ``'ggqpe'`` (PosMLP Table 1) ...
        groups (int): channel groups ``s`` of the group-wise gates (PosMLP Table 3: ``s = 8`` for all
            layers); ignored by the single-group gates (``'sgu'``, ``'lrpe'``, ``'lrpe-m'``). Defaults to 8.
        out_indices (int | Sequence[int]): blocks whose outputs are returned as (B, C, H, W) maps;
            the last block's output goes through the final norm. Defaults to -1.
        norm_cfg (dict): block and final norm. Defaults to LN (eps 1e-6).
        gate_norm_cfg (dict): the SGU's norm on ``X1``. Defaults to LN (eps 1e-5, ``nn.LayerNorm``).
        final_norm (bool): final LayerNorm after the last block. Defaults to True.
        drop_path_rate (float): stochastic depth, linearly increasing over the blocks.
        frozen_stages (int): -1 freezes nothing, 0 the patch embedding, ``k`` it and the first ``k``
            blocks (``num_layers``: also the final norm).
        norm_eval (bool): keep every BatchNorm in eval mode while training (gMLP has none).
        with_cp (bool): gradient checkpointing per block.
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=...)`` loads our weights or a
            timm ``gmlp_*`` checkpoint (converted by ``converters.gmlp.convert_timm_gmlp``); missing keys fail.
    """

    arch_zoo = {
        **dict.fromkeys(['ti', 'tiny'], dict(num_layers=30, embed_dims=128, feedforward_channels=768)),
        **dict.fromkeys(['s', 'small'], dict(num_layers=30, embed_dims=256, feedforward_channels=1536)),
        **dict.fromkeys(['b', 'base'], dict(num_layers=30, embed_dims=512, feedforward_channels=3072)),
    }

    def __init__(self,
                 arch: Union[str, dict] = 's',
                 img_size: Union[int, Sequence[int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 gate_type: str = 'sgu',
                 groups: int = 8,
                 out_indices: Union[int, Sequence[int]] = -1,
                 norm_cfg: dict = LN6,
                 gate_norm_cfg: dict = GATE_LN,
                 final_norm: bool = True,
                 drop_path_rate: float = 0.,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self)  # refuse a misspelt Pretrained init_cfg when built, not when loading
        arch = self._parse_arch(arch)
        if gate_type not in GATE_TYPES:
            raise ValueError(f'unknown gate_type {gate_type!r}; choose one of {sorted(GATE_TYPES)}')
        self.arch_settings = arch
        self.num_layers = arch['num_layers']
        self.embed_dims = arch['embed_dims']
        self.feedforward_channels = arch['feedforward_channels']
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if len(self.img_size) != 2 or any(s % patch_size for s in self.img_size):
            raise ValueError(f'img_size {img_size} must be two sides divisible by patch_size={patch_size}')
        self.patch_size = patch_size
        self.grid = tuple(s // patch_size for s in self.img_size)
        self.fixed_input_size = self.img_size  # the backbone contract's statement of it
        self.in_channels = in_channels
        self.gate_type = gate_type

        self._set_out_indices(out_indices, self.num_layers, unit='blocks')
        self._set_frozen_stages(frozen_stages, self.num_layers, norm_eval, unit='blocks')

        self.patch_embed = nn.Conv2d(in_channels, self.embed_dims, patch_size, patch_size)
        dpr = [drop_path_rate * k / (self.num_layers - 1) if self.num_layers > 1 else 0.
               for k in range(self.num_layers)]
        self.layers = nn.ModuleList([
            GMLPBlock(self.embed_dims, self.feedforward_channels, self.grid, gate_type, groups, norm_cfg,
                      gate_norm_cfg, drop_path_rate=dpr[k], with_cp=with_cp) for k in range(self.num_layers)])
        self.final_norm = final_norm
        if final_norm:
            self.norm = build_norm_layer(norm_cfg, self.embed_dims)[1]
        self._set_feature_info([self.embed_dims] * self.num_layers, [patch_size] * self.num_layers, module='layers')
        self._freeze_stages()

    def _parse_arch(self, arch) -> dict:
        required = {'num_layers', 'embed_dims', 'feedforward_channels'}
        if isinstance(arch, str):
            key = arch.lower()
            if key not in self.arch_zoo:
                raise ValueError(f'unknown gMLP arch {arch!r}; choose one of {sorted(self.arch_zoo)} or pass a dict '
                                 f'with {sorted(required)}')
            return copy.deepcopy(self.arch_zoo[key])
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a str or dict, got {type(arch).__name__}')
        if set(arch) != required:
            raise ValueError(f'a custom gMLP arch dict needs exactly the keys {sorted(required)}; missing '
                             f'{sorted(required - set(arch))}, unknown {sorted(set(arch) - required)}')
        return {k: int(v) for k, v in arch.items()}

    def forward(self, x: torch.Tensor):
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'GMLP expects an (N, {self.in_channels}, H, W) tensor, got {tuple(x.shape)}')
        if tuple(x.shape[2:]) != self.img_size:
            raise ValueError(f'this GMLP (gate_type={self.gate_type!r}) mixes a fixed grid of '
                             f'{self.grid[0]}x{self.grid[1]} tokens and takes {self.img_size[0]}x{self.img_size[1]} '
                             f'inputs only, got {x.shape[2]}x{x.shape[3]}: resize the input or build it with '
                             f'img_size={tuple(x.shape[2:])}.')
        x = self.patch_embed(x)
        B, C, H, W = x.shape
        x = x.flatten(2).transpose(1, 2)
        outs = {}
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i == self.num_layers - 1 and self.final_norm:
                x = self.norm(x)
            if i in self.out_indices:
                outs[i] = x.transpose(1, 2).reshape(B, C, H, W)
        return self._ordered_outputs(outs)

    def _frozen_modules(self):
        modules = [self.patch_embed] + list(self.layers[:self.frozen_stages])
        if self.frozen_stages == self.num_layers and self.final_norm:
            modules.append(self.norm)
        return modules

    def init_weights(self):
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            load_pretrained_init_cfg(self, pretrained, converter=checkpoint_filter_fn)
            self._is_init = True
            return
        super().init_weights()
        if self.init_cfg is None:
            init_gated_mlp_weights(self)
