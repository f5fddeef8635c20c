"""Behaviour every mmposmlp backbone shares: ``frozen_stages`` and ``norm_eval`` in ``train()``."""
from typing import Iterable, List, Sequence

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from torch.nn.modules.batchnorm import _BatchNorm


def checked_out_indices(out_indices, num: int) -> List[int]:
    """``out_indices`` (an int or ints; negative ones count from the end) as sorted unique indices into
    ``num`` stages or blocks; any out of range is refused in one sentence."""
    if isinstance(out_indices, int):
        out_indices = [out_indices]
    out_indices = [i + num if i < 0 else i for i in out_indices]
    for i in out_indices:
        if not 0 <= i < num:
            raise ValueError(f'out_indices must be in [-{num}, {num}), got {i}')
    return sorted(set(out_indices))


def checked_frozen_stages(frozen_stages: int, num: int) -> int:
    """``frozen_stages`` in [-1, num] (the :class:`FrozenStagesMixin` convention), else refused."""
    if not -1 <= frozen_stages <= num:
        raise ValueError(f'frozen_stages must be in [-1, {num}], got {frozen_stages}')
    return frozen_stages


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


class ChannelsLastStagesMixin(FrozenStagesMixin):
    """A ``patch_embed`` stem and ``stages`` that run channels-last (the PosMLP family, image and
    video), with an optional norm ``norm{i}`` on each output in ``out_indices`` (stage ``i`` at
    stride ``2**(i+2)``); outputs are returned channels-first and contiguous."""

    def _build_outputs(self, embed_dims: Sequence[int], norm_cfg: dict, out_norm: bool) -> None:
        self.out_norm = out_norm
        if out_norm:
            for i in self.out_indices:
                self.add_module(f'norm{i}', build_norm_layer(norm_cfg, embed_dims[i])[1])
        self.out_channels = [embed_dims[i] for i in self.out_indices]
        self.feature_info = [dict(num_chs=c, reduction=2**(i + 2), module=f'stages.{i}')
                             for i, c in enumerate(embed_dims)]

    def _output(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Stage ``i``'s channels-last output -> (normed) channels-first, contiguous."""
        out = getattr(self, f'norm{i}')(x) if self.out_norm else x
        return out.movedim(out.dim() - 1, 1).contiguous()  # (a negative dim breaks the TorchScript ONNX exporter)

    def _new_output_norm_keys(self) -> List[str]:
        """Output norms a classification checkpoint cannot hold (all but the last stage's)."""
        return [f'norm{i}.*' for i in self.out_indices if i != len(self.stages) - 1]

    def _frozen_modules(self) -> List[nn.Module]:
        frozen = [self.patch_embed] + [self.stages[i] for i in range(min(self.frozen_stages, len(self.stages)))]
        if self.out_norm:
            frozen += [getattr(self, f'norm{i}') for i in self.out_indices if i < self.frozen_stages]
        return frozen
