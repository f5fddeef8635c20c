"""Norm layers the mmcv builders lack."""
import torch
import torch.nn as nn

from mmposmlp.registry import MODELS


@MODELS.register_module('LN2d')
class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW map (any memory format), e.g. the PosMLP
    LayerNorm-stem variant (official ``stem_norm='LN'``). ``build_norm_layer`` names it ``ln``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def channels_first_norm_cfg(norm_cfg: dict) -> dict:
    """``norm_cfg`` for an NCHW map: ``LN`` becomes :class:`LayerNorm2d` (over channels)."""
    cfg = dict(norm_cfg)
    if cfg.get('type') in ('LN', nn.LayerNorm):
        cfg['type'] = LayerNorm2d
    return cfg
