"""The backbone contract every mmposmlp backbone keeps (detectron2's ``Backbone``, in mmpretrain's words).

* ``out_indices``: the stages (or blocks) whose outputs ``forward`` returns, checked once by
  :func:`checked_out_indices`: an int or ints, negative ones counting from the end as Python does;
  out of range, repeated or empty is refused in one sentence naming the valid range; outputs come
  back in the order given (a backbone whose upstream ``forward`` returns stages in order refuses an
  unordered ``out_indices`` instead: ``keep_order=False``).
* ``out_channels`` and ``feature_info``: one entry per returned output, in the returned order;
  ``feature_info[k] = dict(num_chs, reduction, module)`` (timm's keys) of output ``k``.
* ``size_divisibility``: the input height and width must be multiples of it (detectron2's
  ``Backbone.size_divisibility``); 1, every backbone here, takes any size (windows and patches pad or
  floor inside). ``fixed_input_size``: ``(H, W)`` for a backbone that takes that one size only (gMLP's
  gate mixes its whole token grid); None otherwise.
* ``frozen_stages``: -1 freezes nothing, 0 the stem, ``k`` the stem and stages ``0..k-1`` (mmdet
  ResNet convention), in ``[-1, num]``, checked by :func:`checked_frozen_stages`; ``norm_eval`` keeps
  BatchNorm layers in eval mode while training. Both are re-applied on every ``train()`` call.
"""
from numbers import Integral
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from torch.nn.modules.batchnorm import _BatchNorm

OutIndices = Union[int, Sequence[int]]


def _is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def checked_out_indices(out_indices: OutIndices, num: int, unit: str = 'stages',
                        keep_order: bool = True) -> Tuple[int, ...]:
    """``out_indices`` (an int or ints; negative ones count from the end) as indices into ``num``
    ``unit``, in the order given; out of range, repeated, empty or (``keep_order=False``) unordered
    indices are refused in one sentence naming the valid range."""
    given = (out_indices, ) if _is_int(out_indices) else tuple(out_indices)
    valid = f'[{-num}, {num})'
    if not given:
        raise ValueError(f'out_indices must name at least one index in {valid} ({num} {unit}), got none')
    bad = [i for i in given if not _is_int(i) or not -num <= i < num]
    if bad:
        raise ValueError(f'out_indices must be in {valid}, got {bad[0]!r} ({num} {unit}; negative ones count '
                         'from the end)')
    indices = tuple(int(i) % num for i in given)
    repeated = sorted({i for i in indices if indices.count(i) > 1})
    if repeated:
        raise ValueError(f'out_indices {tuple(given)} names {unit[:-1]} {repeated[0]} twice: give each index in '
                         f'{valid} at most once')
    if not keep_order and list(indices) != sorted(indices):
        raise ValueError(f'out_indices {tuple(given)} must be increasing for this backbone, whose upstream forward '
                         f'returns its {unit} in order: use {tuple(sorted(indices))}')
    return indices


def checked_frozen_stages(frozen_stages: int, num: int, unit: str = 'stages') -> int:
    """``frozen_stages`` in ``[-1, num]`` (-1 none, 0 the stem, ``k`` the stem and ``k`` ``unit``), else
    refused in one sentence."""
    if not _is_int(frozen_stages) or not -1 <= frozen_stages <= num:
        raise ValueError(f'frozen_stages must be in [-1, {num}], got {frozen_stages!r} (-1 freezes nothing, 0 the '
                         f'stem, k the stem and the first k of the {num} {unit})')
    return int(frozen_stages)


def feature_info_of(out_indices: Sequence[int], channels: Sequence[int], reductions: Sequence[int],
                    module: str = 'stages') -> List[dict]:
    """timm-style ``feature_info`` of the outputs ``out_indices`` (in that order) of stages with
    ``channels`` and ``reductions`` (one per stage), the stages named ``{module}.{i}``."""
    return [dict(num_chs=int(channels[i]), reduction=int(reductions[i]), module=f'{module}.{i}')
            for i in out_indices]


class BackboneContractMixin:
    """``out_indices`` / ``out_channels`` / ``feature_info`` (see the module docstring) for a
    backbone that owns its ``forward``: :meth:`_set_out_indices` checks the indices,
    :meth:`_set_feature_info` records the returned outputs, :meth:`_ordered_outputs` returns them in
    the requested order."""

    out_indices: Tuple[int, ...] = ()
    out_channels: List[int] = []
    feature_info: List[dict] = []
    size_divisibility: int = 1
    fixed_input_size: Optional[Tuple[int, int]] = None

    def _set_out_indices(self, out_indices: OutIndices, num: int, unit: str = 'stages') -> Tuple[int, ...]:
        self.out_indices = checked_out_indices(out_indices, num, unit)
        return self.out_indices

    def _set_feature_info(self, channels: Sequence[int], reductions: Sequence[int], module: str = 'stages') -> None:
        """``out_channels`` and ``feature_info`` of the outputs, from every stage's channels and reductions."""
        self.feature_info = feature_info_of(self.out_indices, channels, reductions, module)
        self.out_channels = [info['num_chs'] for info in self.feature_info]

    def _ordered_outputs(self, outputs: Mapping[int, torch.Tensor]) -> tuple:
        """The outputs by stage index -> a tuple in ``out_indices`` order."""
        return tuple(outputs[i] for i in self.out_indices)


class FrozenStagesMixin(BackboneContractMixin):
    """``frozen_stages`` and ``norm_eval`` (see the module docstring), re-applied on every ``train()``.

    A backbone lists what ``frozen_stages`` covers in :meth:`_frozen_modules` (and, for bare
    parameters such as a cls token, :meth:`_frozen_parameters`).
    """

    frozen_stages: int = -1
    norm_eval: bool = False

    def _set_frozen_stages(self, frozen_stages: int, num: int, norm_eval: bool, unit: str = 'stages') -> None:
        self.frozen_stages = checked_frozen_stages(frozen_stages, num, unit)
        self.norm_eval = norm_eval

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
    video), with an optional norm ``norm{i}`` on each output in ``out_indices``; outputs are
    returned channels-first and contiguous."""

    def _build_outputs(self, embed_dims: Sequence[int], reductions: Sequence[int], norm_cfg: dict,
                       out_norm: bool) -> None:
        self.out_norm = out_norm
        if out_norm:
            for i in self.out_indices:
                self.add_module(f'norm{i}', build_norm_layer(norm_cfg, embed_dims[i])[1])
        self._set_feature_info(embed_dims, reductions)

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


def stage_reductions(first: int, downsamples: Sequence[bool], factor: int = 2) -> List[int]:
    """Stride of every stage: ``first`` for stage 0, times ``factor`` after each stage boundary that
    downsamples (``downsamples[i]``: before stage ``i + 1``)."""
    reductions = [first]
    for d in downsamples:
        reductions.append(reductions[-1] * (factor if d else 1))
    return reductions


__all__ = ['BackboneContractMixin', 'ChannelsLastStagesMixin', 'FrozenStagesMixin', 'checked_frozen_stages',
           'checked_out_indices', 'feature_info_of', 'stage_reductions']
