"""Behaviour every mmposmlp backbone shares: ``frozen_stages`` and ``norm_eval`` in ``train()``."""
from typing import Iterable, List

import torch.nn as nn
from torch.nn.modules.batchnorm import _BatchNorm


class FrozenStagesMixin:
    """``frozen_stages`` (mmdet ResNet convention: -1 freezes nothing, 0 the stem, ``k`` the
    stem and stages ``0..k-1`` with their output norms) and ``norm_eval`` (BatchNorm layers
    stay in eval mode while training), both re-applied on every ``train()`` call.

    A backbone lists what ``frozen_stages`` covers in :meth:`_frozen_modules` (and, for bare
    parameters such as a cls token, :meth:`_frozen_parameters`).
    """

    frozen_stages: int = -1
    norm_eval: bool = False

    def _frozen_modules(self) -> List[nn.Module]:
        raise NotImplementedError

    def _frozen_parameters(self) -> Iterable[nn.Parameter]:
        return ()

    def _freeze_stages(self) -> None:
        if self.frozen_stages < 0:
            return
        for m in self._frozen_modules():
            m.eval()
            for p in m.parameters():
                p.requires_grad = False
        for p in self._frozen_parameters():
            p.requires_grad = False

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self
