"""Adapters between our backbones' tuple outputs and consumers that want one tensor."""
from typing import Optional, Union

import torch
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS


@MODELS.register_module()
class SingleTensorBackbone(BaseModule):
    """Wrap a backbone so that it returns its last output as a tensor, not a tuple.

    mmaction2's ``Recognizer2D`` hands the raw backbone output to ``TSNHead``, which refuses
    tuples unless the backbone type starts with ``mmpretrain.``. Use::

        backbone=dict(type='mmposmlp.SingleTensorBackbone',
                      backbone=dict(type='mmposmlp.PosMLP', arch='tiny'))

    Checkpoints keep the inner backbone's keys under ``backbone.``. :attr:`out_channels` is the
    returned tensor's channels (an int); :attr:`out_indices` and :attr:`feature_info` hold the one
    entry of the inner backbone's that it returns (its last).
    """

    def __init__(self, backbone: dict, init_cfg: Optional[Union[dict, list]] = None):
        super().__init__(init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        channels = getattr(self.backbone, 'out_channels', None)
        #: the returned tensor's channels (an int, as mmaction2's heads take ``in_channels``)
        self.out_channels = channels[-1] if isinstance(channels, (list, tuple)) else channels
        self.out_indices = tuple(getattr(self.backbone, 'out_indices', ()))[-1:]
        self.feature_info = list(getattr(self.backbone, 'feature_info', ()))[-1:]
        #: the inner backbone's input constraints (the backbone contract)
        self.size_divisibility = getattr(self.backbone, 'size_divisibility', 1)
        self.fixed_input_size = getattr(self.backbone, 'fixed_input_size', None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.backbone(x)
        return out[-1] if isinstance(out, (tuple, list)) else out

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.train(mode)  # keep the inner frozen_stages / norm_eval policy
        return self
