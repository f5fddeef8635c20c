"""Swin + PEG: Swin Transformer with a PEG after the first block of every stage.

Chu et al., "Conditional Positional Encodings for Vision Transformers", ICLR 2023
(https://arxiv.org/abs/2102.10882), Sec. 4.5 / B.5 / Table 15 ("Swin-tiny+PEG+GAP", 29M, 4.5G, 82.3):
"we remove its learnable PE and apply our PEG in position 0 of each stage with a GAP head". Swin's
default has no absolute PE (``use_abs_pos_embed=False``) and a GAP head already; its window
relative-position bias is kept. Everything else is mmpretrain's ``SwinTransformer`` (same keys, so
Swin checkpoints load with only the ``pegs.*`` missing).

mmpretrain is imported only when the class is first used (built from a config or accessed as
``swin_peg.SwinPEG``), so ``import mmposmlp.models`` imports no downstream library.
"""
from typing import List, Optional, Sequence

from mmengine.model import ModuleList

from mmposmlp.models.backbones.base import BackboneContractMixin, checked_frozen_stages, checked_out_indices
from mmposmlp.models.backbones.lazy_upstream import LazyUpstreamClasses, module_getattr
from mmposmlp.models.checkpoints import init_cfg_suspended, load_pretrained_init_cfg, pretrained_init_cfg
from mmposmlp.models.layers.peg import PEG


def _make_swin_peg() -> type:
    from mmpretrain.models.backbones import SwinTransformer
    from mmpretrain.models.utils import resize_pos_embed
    return _define(SwinTransformer, resize_pos_embed)


_LAZY = LazyUpstreamClasses(__name__, {'SwinPEG': _make_swin_peg}, requires={'SwinPEG': 'mmpretrain'},
                            kind='Swin + PEG backbone')
_LAZY.register_builders()
__getattr__ = module_getattr(__name__, _LAZY)  # PEP 562: a lazy class, picklable as swin_peg.SwinPEG


def get_swin_peg_class() -> type:
    """The :class:`SwinPEG` class (defined on first use, on top of mmpretrain's ``SwinTransformer``)."""
    return _LAZY.get('SwinPEG')


def _num_stages(SwinTransformer, arch) -> Optional[int]:  # noqa: N803 (the upstream class)
    """Stages of a Swin ``arch`` (a name or a dict with ``depths``); None where the upstream check refuses it."""
    if isinstance(arch, str):
        arch = SwinTransformer.arch_zoo.get(arch.lower())
    return len(arch['depths']) if isinstance(arch, dict) and 'depths' in arch else None


def swin_strides(model, patch_size: int = 4) -> List[int]:
    """Stride of every output of an mmpretrain ``SwinTransformer`` (after the stage's downsample with
    ``out_after_downsample``)."""
    n = model.num_layers
    return [patch_size * 2**(i + int(model.out_after_downsample and i < n - 1)) for i in range(n)]


class _SwinPEGParts(BackboneContractMixin):
    """What :class:`SwinPEG` adds to mmpretrain's ``SwinTransformer``: the PEGs, run after their blocks,
    loaded and frozen with the stages."""

    def _build_pegs(self, peg_positions: Sequence[int], peg_cfg: Optional[dict]) -> None:
        depths = [len(stage.blocks) for stage in self.stages]
        self.peg_positions = tuple(sorted(set(int(p) for p in peg_positions)))
        bad = [p for p in self.peg_positions if not 0 <= p < min(depths)]
        if bad:
            raise ValueError(f'SwinPEG peg_positions {bad} out of range: each stage has {depths} blocks')
        peg_cfg = dict(peg_cfg or {})
        self.pegs = ModuleList([
            ModuleList([PEG(stage.embed_dims, **peg_cfg) for _ in self.peg_positions])
            for stage in self.stages])

    def _run_stage(self, i, stage, x, hw_shape):
        for j, block in enumerate(stage.blocks):
            x = block(x, hw_shape)
            if j in self.peg_positions:
                x = self.pegs[i][self.peg_positions.index(j)](x, hw_shape)
        if stage.downsample is not None and self.out_after_downsample:
            x, out_shape = stage.downsample(x, hw_shape)
        else:
            out_shape = hw_shape
        return x, out_shape

    def init_weights(self):
        """Swin's own init; a ``Pretrained`` init_cfg (keys checked, unknown ones refused) is then
        loaded strictly except for the PEGs (a Swin checkpoint has none)."""
        cfg = pretrained_init_cfg(self)
        if cfg is None:
            return super().init_weights()
        with init_cfg_suspended(self):
            super().init_weights()
        load_pretrained_init_cfg(self, cfg, allowed_missing=['pegs.*'])

    def _freeze_stages(self):
        super()._freeze_stages()
        for i in range(min(self.frozen_stages, len(getattr(self, 'pegs', ())))):
            self.pegs[i].eval()
            for p in self.pegs[i].parameters():
                p.requires_grad = False


def _define(SwinTransformer, resize_pos_embed):  # noqa: N803 (the upstream class)

    class SwinPEG(_SwinPEGParts, SwinTransformer):
        """mmpretrain ``SwinTransformer`` with one :class:`mmposmlp.PEG` per stage.

        Args:
            peg_positions (Sequence[int]): block index inside each stage after which the PEG is applied
                (one value for all stages). Default (0, ) = "position 0 of each stage" (Sec. 4.5).
            peg_cfg (dict, optional): kwargs of :class:`mmposmlp.PEG` (default depthwise 3x3, zero padding).
            **kwargs: every ``SwinTransformer`` argument (arch, img_size, drop_path_rate, out_indices,
                use_abs_pos_embed, ...). ``out_indices`` follow the backbone contract (checked, negative ones
                from the end, outputs in the order given); ``frozen_stages`` keeps mmpretrain's convention
                (``k`` freezes the stem and stages ``0..k``), in ``[-1, stages - 1]``.

        Params (1000 classes, GAP head): Swin-T 28,288,354 + 10 x (96 + 192 + 384 + 768) = 28,302,754.
        """

        def __init__(self, *args, peg_positions: Sequence[int] = (0, ), peg_cfg: Optional[dict] = None,
                     out_indices=(3, ), frozen_stages: int = -1, **kwargs):
            num = _num_stages(SwinTransformer, args[0] if args else kwargs.get('arch', 'tiny'))
            if num is not None:
                out_indices = checked_out_indices(out_indices, num)
                checked_frozen_stages(frozen_stages, num - 1)  # (mmpretrain: k freezes stages 0..k)
            super().__init__(*args, out_indices=sorted(out_indices), frozen_stages=frozen_stages, **kwargs)
            self.out_indices = tuple(out_indices)
            self._set_feature_info(self.num_features, swin_strides(self, kwargs.get('patch_size', 4)))
            self._build_pegs(peg_positions, peg_cfg)

        def forward(self, x):
            x, hw_shape = self.patch_embed(x)
            if self.use_abs_pos_embed:
                x = x + resize_pos_embed(self.absolute_pos_embed, self.patch_resolution, hw_shape,
                                         self.interpolate_mode, self.num_extra_tokens)
            x = self.drop_after_pos(x)
            outs = {}
            for i, stage in enumerate(self.stages):
                x, hw_shape = self._run_stage(i, stage, x, hw_shape)
                if i in self.out_indices:
                    out = getattr(self, f'norm{i}')(x)
                    outs[i] = out.view(-1, *hw_shape, self.num_features[i]).permute(0, 3, 1, 2).contiguous()
                if stage.downsample is not None and not self.out_after_downsample:
                    x, hw_shape = stage.downsample(x, hw_shape)
            return self._ordered_outputs(outs)

    return SwinPEG
