"""IMLP as a drop-in FFN of upstream vision transformers (IMLP paper, Tables 1, 6, 7).

Registered adapters (each a subclass of the upstream backbone; every block's FFN is
replaced by ``ffn_cfg``, default ``dict(type='mmposmlp.IMLP')``):

=====================================  ==========================================  ===============
type                                   subclass of                                 used by
=====================================  ==========================================  ===============
``mmposmlp.SwinTransformerIMLP``       ``mmpretrain.SwinTransformer``              ImageNet
``mmposmlp.VisionTransformerIMLP``     ``mmpretrain.VisionTransformer`` (DeiT)     ImageNet
``mmposmlp.PoolFormerIMLP``            ``mmpretrain.PoolFormer``                   ImageNet
``mmposmlp.DetSwinTransformerIMLP``    ``mmdet.SwinTransformer``                   Mask R-CNN
``mmposmlp.SegSwinTransformerIMLP``    ``mmseg.SwinTransformer``                   UperNet
=====================================  ==========================================  ===============

Each IMLP config therefore differs from its upstream config only in the backbone ``type``
and ``ffn_cfg``; all other arguments (and the upstream checkpoint conventions, e.g. mmdet's
``convert_weights`` of the official Swin release) are the upstream ones.

The token grid reaches the IMLP explicitly: Swin blocks get a ``forward`` that passes
their ``hw_shape`` to ``ffn(x, hw_shape, identity)`` (the block instances are switched to
a subclass of their upstream block class; parameters and keys are unchanged), DeiT's
backbone forward passes the patch resolution to every layer (the cls token gets no spatial
mixing, see ``IMLP(extra_tokens=...)``), PoolFormer's MLP already sees NCHW maps.

Pretrained weights of the plain upstream model load into the +IMLP model for everything
but the FFNs: the host FFN keys are dropped and the IMLP keys are reported as newly
initialised; any other missing key raises (:func:`load_state_dict_checked`). Swin's
dense-prediction output norms (``norm0``..``norm3``) may be absent from classification
checkpoints, as upstream.

The upstream libraries are imported only when an adapter is built (or its class is
accessed as a module attribute), so ``import mmposmlp.models`` never imports mmpretrain,
mmdet or mmseg.
"""
import functools
import importlib
import math
import os.path as osp
from typing import Dict, Iterable, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.logging import print_log

from mmposmlp.models.backbones.base import (BackboneContractMixin, checked_frozen_stages, checked_out_indices,
                                            feature_info_of)
from mmposmlp.models.backbones.lazy_upstream import LazyUpstreamClasses, module_getattr
from mmposmlp.models.backbones.swin_peg import swin_strides
from mmposmlp.models.checkpoints import (OTHER_MODEL_PARTS, InitCfgError, extract_state_dict, init_cfg_suspended,
                                         load_state_dict_checked, pretrained_init_cfg, strip_prefix)
from mmposmlp.models.layers.imlp import IMLP
from mmposmlp.registry import MODELS

DEFAULT_FFN_CFG = dict(type='mmposmlp.IMLP')
# Swin's out_indices norms: absent from classification checkpoints (upstream ignores them).
DENSE_OUTPUT_NORMS = ('norm?.*',)

__all__ = ['build_imlp_ffn', 'load_host_state_dict', 'ADAPTERS']


# ---------------------------------------------------------------------------------------
# generic pieces
# ---------------------------------------------------------------------------------------
def build_imlp_ffn(ffn_cfg: Optional[dict], embed_dims: int, feedforward_channels: int,
                   **host_defaults) -> nn.Module:
    """Build the replacement FFN of one block.

    ``ffn_cfg`` (``dict(type='mmposmlp.IMLP', kernel_size=5, ...)``) gets
    ``embed_dims`` / ``feedforward_channels`` (the host's width) from the host block;
    ``host_defaults`` (``ffn_drop``, ``add_identity``) fill keys the config leaves open.
    """
    cfg = dict(DEFAULT_FFN_CFG if ffn_cfg is None else ffn_cfg)
    t = cfg.pop('type', 'mmposmlp.IMLP')
    if isinstance(t, type):
        cls = t
    elif t in ('IMLP', 'mmposmlp.IMLP'):
        cls = IMLP
    else:
        cls = MODELS.get(t if t.startswith('mmposmlp.') else 'mmposmlp.' + t)
        if cls is None:
            raise KeyError(f'ffn_cfg type {t!r} is not registered in mmposmlp (e.g. use mmposmlp.IMLP)')
    for k, v in host_defaults.items():
        cfg.setdefault(k, v)
    return cls(embed_dims=embed_dims, feedforward_channels=feedforward_channels, **cfg)


def _ffn_drop_of(ffn: nn.Module) -> float:
    for m in ffn.modules():
        if isinstance(m, nn.Dropout):
            return float(m.p)
    return 0.


def _replace_mmcv_ffn(block: nn.Module, ffn_cfg: Optional[dict]) -> nn.Module:
    """Replace ``block.ffn`` (an mmcv ``FFN``) by an IMLP with the same residual/drop path."""
    old = block.ffn
    gamma = getattr(old, 'gamma2', None)
    if gamma is not None and not isinstance(gamma, nn.Identity):
        raise NotImplementedError('IMLP adapters do not support a host FFN with layer scale '
                                  '(layer_scale_init_value > 0); set it to 0.')
    linears = [m for m in old.modules() if isinstance(m, nn.Linear)]
    embed_dims, hidden = linears[0].in_features, linears[0].out_features
    new = build_imlp_ffn(ffn_cfg, embed_dims, hidden, ffn_drop=_ffn_drop_of(old),
                         add_identity=bool(getattr(old, 'add_identity', True)))
    if isinstance(new.dropout_layer, nn.Identity):
        new.dropout_layer = old.dropout_layer  # the host's DropPath (stochastic depth rate)
    block.ffn = new
    return new


def _arch_entry(arch, zoo: dict, key: str):
    """``arch[key]`` of an upstream arch (a name in ``zoo`` or a dict), None where upstream refuses the arch."""
    if isinstance(arch, str):
        arch = zoo.get(arch.lower(), zoo.get(arch))
    return arch.get(key) if isinstance(arch, dict) else None


def _contract_kwargs(kwargs: dict, num: Optional[int], frozen_max: Optional[int], out_default,
                     frozen_default: int = -1) -> dict:
    """``kwargs`` with ``out_indices`` checked by the backbone contract (increasing: the upstream forward returns
    its outputs in order) and passed on as a list, and ``frozen_stages`` range-checked (in the upstream's own
    convention, up to ``frozen_max``); unchanged where ``num`` is None (upstream refuses the arch itself)."""
    if num is None:
        return kwargs
    kwargs = dict(kwargs)
    kwargs['out_indices'] = list(checked_out_indices(kwargs.get('out_indices', out_default), num, keep_order=False))
    checked_frozen_stages(kwargs.get('frozen_stages', frozen_default), frozen_max)
    return kwargs


class IMLPAdapterMixin(BackboneContractMixin):
    """Bookkeeping shared by the adapters: which FFNs are IMLPs, checkpoint loading, and the backbone contract
    (``out_indices`` checked before the upstream ``__init__``, ``out_channels`` / ``feature_info`` after it)."""

    def _set_contract(self, channels, reductions, module: str = 'stages') -> None:
        """``out_indices`` as a tuple; ``out_channels`` / ``feature_info`` from every output position's channels
        and reductions."""
        self.out_indices = tuple(self.out_indices)
        self.feature_info = feature_info_of(self.out_indices, channels, reductions, module)
        self.out_channels = [info['num_chs'] for info in self.feature_info]

    imlp_allowed_missing: Tuple[str, ...] = ()

    def _register_imlp(self, names: List[str]):
        self.imlp_ffn_names = list(names)

    def imlp_ffn_patterns(self) -> List[str]:
        return [f'{n}.*' for n in self.imlp_ffn_names]

    def _host_ffn_keys(self, state: Dict[str, torch.Tensor]) -> List[str]:
        """Keys of ``state`` that belong to a host (non-IMLP) FFN.

        An FFN of the state dict is a host FFN when any of its keys is absent from the IMLP
        or has another shape; then all its keys are host keys (a PoolFormer ``mlp.fc2.bias``
        has the IMLP's shape but is still the host's).
        """
        own = nn.Module.state_dict(self)
        host = set()
        for k, v in state.items():
            for n in self.imlp_ffn_names:
                if k.startswith(n + '.') and (k not in own or tuple(own[k].shape) != tuple(v.shape)):
                    host.add(n)
        return [k for k in state if any(k.startswith(n + '.') for n in host)]

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Upstream ``init_weights`` (mmdet/mmseg Swin) ends in ``self.load_state_dict(sd, False)``:
        non-strict loads and any state dict with host-FFN keys go through
        :func:`load_host_state_dict` (reported, checked); strict loads of IMLP state dicts
        are plain ``nn.Module.load_state_dict``."""
        if getattr(self, '_imlp_in_checked_load', False):
            return nn.Module.load_state_dict(self, state_dict, strict=strict, assign=assign)
        has_host = bool(self._host_ffn_keys(state_dict))
        if strict and not has_host:
            return nn.Module.load_state_dict(self, state_dict, strict=True, assign=assign)
        # an upstream non-strict load of a whole detector / segmentor / classifier checkpoint: its
        # heads and necks are left unused (logged by name); any other unknown key still raises
        return load_host_state_dict(self, state_dict, source='state_dict',
                                    allowed_unexpected=() if strict else OTHER_MODEL_PARTS)

    def _init_imlp_ffns(self):
        for n in self.imlp_ffn_names:
            m = self.get_submodule(n)
            if hasattr(m, 'reset_fc_parameters'):
                m.reset_fc_parameters()

    def _pretrained_cfg(self) -> Optional[dict]:
        """The checked ``Pretrained`` init_cfg (unknown keys refused in one sentence), else None."""
        return pretrained_init_cfg(self)

    def _load_pretrained_cfg(self, cfg: dict):
        path = cfg['checkpoint']
        map_location = cfg.get('map_location', 'cpu')
        if osp.isfile(path):
            from mmposmlp.utils.compat import safe_torch_load
            ckpt = safe_torch_load(path, map_location=map_location)
        else:
            from mmengine.runner.checkpoint import CheckpointLoader
            ckpt = CheckpointLoader.load_checkpoint(path, map_location=map_location)
        state = extract_state_dict(ckpt, prefer_ema=cfg.get('prefer_ema', True), source=path)
        state = {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}
        state = strip_prefix(state, cfg.get('prefix'))
        return load_host_state_dict(self, state, source=path, allowed_unexpected=cfg.get('ignore_keys', ()))


def load_host_state_dict(model: nn.Module, state: Dict[str, torch.Tensor], source: str = 'checkpoint',
                         allowed_missing: Iterable[str] = (), logger=None,
                         allowed_unexpected: Iterable[str] = ()):
    """Load a plain (host-FFN) or IMLP checkpoint into an IMLP adapter, loudly.

    Host FFN keys (under a replaced FFN, absent from the IMLP or of another shape) are
    dropped; the IMLP keys are allowed to be missing and are reported as newly initialised;
    every other missing key raises :class:`CheckpointMismatchError`, and so does any other
    checkpoint key with no place in ``model`` unless it matches ``allowed_unexpected``.
    Returns the ``_IncompatibleKeys`` of the load.
    """
    dropped = model._host_ffn_keys(state)
    kept = {k: v for k, v in state.items() if k not in set(dropped)}
    model._imlp_in_checked_load = True
    try:
        result = load_state_dict_checked(
            model, kept,
            allowed_missing=tuple(model.imlp_ffn_patterns()) + tuple(model.imlp_allowed_missing)
            + tuple(allowed_missing),
            allowed_unexpected=allowed_unexpected, source=source, logger=logger)
    finally:
        model._imlp_in_checked_load = False
    new_ffn = [k for k in result.missing_keys if any(k.startswith(n + '.') for n in model.imlp_ffn_names)]
    print_log(f'IMLP: {len(dropped)} host-FFN keys of {source} dropped (those FFNs are IMLPs now); '
              f'{len(new_ffn)} IMLP keys in {len(model.imlp_ffn_names)} FFNs newly initialised '
              f'(e.g. {new_ffn[:3]})', logger=logger or 'current')
    model.imlp_load_report = dict(dropped_host_ffn_keys=dropped, new_imlp_keys=new_ffn,
                                  missing_keys=list(result.missing_keys),
                                  unexpected_keys=list(result.unexpected_keys))
    return result


def _swin_block_forward(self, x: torch.Tensor, hw_shape):
    """Swin block (mmpretrain/mmdet/mmseg share this structure) with an hw_shape-aware FFN."""

    def _inner(x):
        identity = x
        x = self.attn(self.norm1(x), hw_shape)
        x = x + identity
        return self.ffn(self.norm2(x), hw_shape=hw_shape, identity=x)

    if getattr(self, 'with_cp', False) and x.requires_grad:
        return cp.checkpoint(_inner, x, use_reentrant=False)
    return _inner(x)


# upstream Swin block classes and the names of their IMLP subclasses (module attributes, so
# that models stay picklable: ``imlp_variants.DetSwinBlockIMLP`` etc. resolve lazily)
_BLOCK_BASES = {
    'PretrainSwinBlockIMLP': ('mmpretrain.models.backbones.swin_transformer', 'SwinBlock'),
    'DetSwinBlockIMLP': ('mmdet.models.backbones.swin', 'SwinBlock'),
    'SegSwinBlockIMLP': ('mmseg.models.backbones.swin', 'SwinBlock'),
}


def _make_block(name: str) -> type:
    mod, cls = _BLOCK_BASES[name]
    return type(name, (getattr(importlib.import_module(mod), cls), ), {
        'forward': _swin_block_forward,
        '__doc__': f'{mod}.{cls} whose FFN receives hw_shape (IMLP).',
    })


_BLOCKS = LazyUpstreamClasses(__name__, {n: functools.partial(_make_block, n) for n in _BLOCK_BASES},
                              requires={n: mod.split('.')[0] for n, (mod, _) in _BLOCK_BASES.items()},
                              kind='IMLP Swin block')


def _imlp_block_class(base: type) -> type:
    """Subclass of an upstream Swin block whose forward passes hw_shape to the FFN."""
    for name, (mod, cls) in _BLOCK_BASES.items():
        if base.__module__ == mod and base.__name__ == cls:
            return _BLOCKS.get(name)
    raise NotImplementedError(f'no IMLP block for {base.__module__}.{base.__name__}')


def _install_swin(backbone: nn.Module, ffn_cfg: Optional[dict]) -> List[str]:
    names = []
    for si, stage in enumerate(backbone.stages):
        for bi, block in enumerate(stage.blocks):
            _replace_mmcv_ffn(block, ffn_cfg)
            block.__class__ = _imlp_block_class(type(block))
            names.append(f'stages.{si}.blocks.{bi}.ffn')
    return names


# ---------------------------------------------------------------------------------------
# adapters (built on first use)
# ---------------------------------------------------------------------------------------
class _PretrainedInitMixin(IMLPAdapterMixin):
    """mmpretrain adapters: a ``Pretrained`` init_cfg is a random init of everything (IMLPs included), then
    the checked load."""

    def init_weights(self):
        cfg = self._pretrained_cfg()
        if cfg is None:
            return super().init_weights()
        with init_cfg_suspended(self):
            super().init_weights()
        self._load_pretrained_cfg(cfg)


def _make_pretrain_swin() -> type:
    from mmpretrain.models.backbones import SwinTransformer

    class SwinTransformerIMLP(_PretrainedInitMixin, SwinTransformer):
        """mmpretrain ``SwinTransformer`` whose FFNs are IMLPs (Table 1: Swin-T/S/B + IMLP).

        Args:
            ffn_cfg (dict): config of the replacement FFN. Default ``dict(type='mmposmlp.IMLP')``
                (r = 2, n = 3); Swin-B + IMLP* of Table 1 uses ``kernel_size=5``.
            **kwargs: the arguments of mmpretrain's ``SwinTransformer``.
        """
        imlp_allowed_missing = DENSE_OUTPUT_NORMS

        def __init__(self, *args, ffn_cfg: Optional[dict] = None, **kwargs):
            depths = _arch_entry(args[0] if args else kwargs.get('arch', 'tiny'), SwinTransformer.arch_zoo, 'depths')
            num = None if depths is None else len(depths)
            super().__init__(*args, **_contract_kwargs(kwargs, num, num and num - 1, (3, )))
            self._register_imlp(_install_swin(self, ffn_cfg))
            self._set_contract(self.num_features, swin_strides(self, kwargs.get('patch_size', 4)))

    return SwinTransformerIMLP


def _make_vit() -> type:
    from mmpretrain.models.backbones import VisionTransformer
    from mmpretrain.models.utils import resize_pos_embed

    class VisionTransformerIMLP(_PretrainedInitMixin, VisionTransformer):
        """mmpretrain ``VisionTransformer`` (DeiT archs) whose FFNs are IMLPs (Table 1).

        The cls token gets no spatial mixing (``IMLP(extra_tokens=...)``); the patch tokens
        form the ``patch_resolution`` grid. Args: ``ffn_cfg`` as :class:`SwinTransformerIMLP`, plus mmpretrain's args.
        """

        def __init__(self, *args, ffn_cfg: Optional[dict] = None, **kwargs):
            num = _arch_entry(args[0] if args else kwargs.get('arch', 'base'), VisionTransformer.arch_zoo,
                              'num_layers')
            super().__init__(*args, **_contract_kwargs(kwargs, num, num, -1))
            self._set_contract([self.embed_dims] * self.num_layers,
                               [kwargs.get('patch_size', 16)] * self.num_layers, module='layers')
            names = []
            for i, layer in enumerate(self.layers):
                if not hasattr(layer, 'ffn') or not hasattr(layer.ffn, 'layers'):
                    raise NotImplementedError('VisionTransformerIMLP supports ffn_type="origin" only')
                ffn = _replace_mmcv_ffn(layer, ffn_cfg)
                if ffn.num_extra_tokens is None:
                    ffn.num_extra_tokens = self.num_extra_tokens
                names.append(f'layers.{i}.ffn')
            self._register_imlp(names)

        def forward(self, x):
            B = x.shape[0]
            x, patch_resolution = self.patch_embed(x)
            if self.cls_token is not None:
                x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
            x = x + resize_pos_embed(self.pos_embed, self.patch_resolution, patch_resolution,
                                     mode=self.interpolate_mode, num_extra_tokens=self.num_extra_tokens)
            x = self.pre_norm(self.drop_after_pos(x))
            outs = []
            for i, layer in enumerate(self.layers):
                x = x + layer.attn(layer.ln1(x))
                x = layer.ffn(layer.ln2(x), hw_shape=patch_resolution, identity=x)
                if i == len(self.layers) - 1 and self.final_norm:
                    x = self.ln1(x)
                if i in self.out_indices:
                    outs.append(self._format_output(x, patch_resolution))
            return tuple(outs)

    return VisionTransformerIMLP


def _make_poolformer() -> type:
    from mmpretrain.models.backbones import PoolFormer

    class PoolFormerIMLP(_PretrainedInitMixin, PoolFormer):
        """mmpretrain ``PoolFormer`` whose channel MLPs (1x1 convs on NCHW) are IMLPs (Table 1).

        Args: ``ffn_cfg`` as :class:`SwinTransformerIMLP`; M48 + IMLP* uses ``kernel_size=5``.
        """

        def __init__(self, *args, ffn_cfg: Optional[dict] = None, **kwargs):
            dims = _arch_entry(args[0] if args else kwargs.get('arch', 's12'), PoolFormer.arch_settings,
                               'embed_dims')
            num = None if dims is None else len(dims) + sum(a != b for a, b in zip(dims, dims[1:]))
            super().__init__(*args, **_contract_kwargs(kwargs, num, num, -1, frozen_default=0))
            # network entry j: stage j // 2 (even j) or the downsample into stage (j + 1) // 2 (odd j)
            self._set_contract([dims[(j + 1) // 2] for j in range(num)], [4 * 2**((j + 1) // 2) for j in range(num)],
                               module='network')
            names = []
            for i, stage in enumerate(self.network):
                if not isinstance(stage, nn.Sequential):
                    continue  # a downsampling PatchEmbed
                for j, block in enumerate(stage):
                    old = block.mlp
                    block.mlp = build_imlp_ffn(ffn_cfg, old.fc1.in_channels, old.fc1.out_channels,
                                               ffn_drop=float(old.drop.p), add_identity=False)
                    names.append(f'network.{i}.{j}.mlp')
            self._register_imlp(names)

    return PoolFormerIMLP


def _make_dense_swin(lib: str) -> Dict[str, type]:
    SwinTransformer = importlib.import_module(f'{lib}.models.backbones.swin').SwinTransformer
    name = {'mmdet': 'DetSwinTransformerIMLP', 'mmseg': 'SegSwinTransformerIMLP'}[lib]

    def __init__(self, *args, ffn_cfg: Optional[dict] = None, **kwargs):
        num = len(kwargs.get('depths', (2, 2, 6, 2)))
        SwinTransformer.__init__(self, *args, **_contract_kwargs(kwargs, num, num, (0, 1, 2, 3)))
        self._register_imlp(_install_swin(self, ffn_cfg))
        strides = kwargs.get('strides', (4, 2, 2, 2))
        self._set_contract(self.num_features, [math.prod(strides[:i + 1]) for i in range(num)])

    def init_weights(self):
        # Upstream init: from scratch it inits every Linear (IMLPs included); with a
        # Pretrained init_cfg it converts/strips/resizes and calls self.load_state_dict,
        # which the mixin routes through load_host_state_dict. IMLPs are initialised first.
        cfg = pretrained_init_cfg(self)
        unused = [k for k in cfg or () if k not in ('type', 'checkpoint')]
        if unused:
            raise InitCfgError(f"{name}: init_cfg keys {unused} are not followed by {lib}'s SwinTransformer, "
                               "whose Pretrained loading reads only 'checkpoint'; remove them (to choose a "
                               "prefix or the EMA weights, convert the file first).")
        self._init_imlp_ffns()
        SwinTransformer.init_weights(self)

    cls = type(name, (IMLPAdapterMixin, SwinTransformer), {
        '__init__': __init__, 'init_weights': init_weights,
        'imlp_allowed_missing': DENSE_OUTPUT_NORMS,
        '__doc__': f"""``{lib}.SwinTransformer`` whose FFNs are IMLPs ({'Table 6, Mask R-CNN'
        if lib == 'mmdet' else 'Table 7, UperNet'}).

        Args:
            ffn_cfg (dict): config of the replacement FFN. Default ``dict(type='mmposmlp.IMLP')``.
            **kwargs: the arguments of {lib}'s ``SwinTransformer`` (same config keys as
                the upstream {lib} Swin configs, e.g. ``convert_weights`` for mmdet).
        """})
    return {name: cls}


_ADAPTERS = LazyUpstreamClasses(
    __name__, {
        'SwinTransformerIMLP': _make_pretrain_swin,
        'VisionTransformerIMLP': _make_vit,
        'PoolFormerIMLP': _make_poolformer,
        'DetSwinTransformerIMLP': functools.partial(_make_dense_swin, 'mmdet'),
        'SegSwinTransformerIMLP': functools.partial(_make_dense_swin, 'mmseg'),
    },
    requires={'SwinTransformerIMLP': 'mmpretrain', 'VisionTransformerIMLP': 'mmpretrain',
              'PoolFormerIMLP': 'mmpretrain', 'DetSwinTransformerIMLP': 'mmdet',
              'SegSwinTransformerIMLP': 'mmseg'},
    kind='IMLP adapter')
_ADAPTERS.register_builders()
ADAPTERS = _ADAPTERS.names
# PEP 562: the adapters and blocks are module attributes, picklable as imlp_variants.<name>
__getattr__ = module_getattr(__name__, _ADAPTERS, _BLOCKS)


def get_adapter_class(name: str) -> type:
    """The adapter class ``name`` (imports its upstream library on first use)."""
    return _ADAPTERS.get(name)
