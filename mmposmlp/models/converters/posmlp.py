"""Official ``Zhicaiwww/PosMLP`` checkpoints and constructor options -> :class:`~mmposmlp.models.PosMLP`.

:func:`checkpoint_filter_fn` is the one entry used when loading (init_cfg and
``tools/model_converters/posmlp2mmposmlp.py``); :func:`official_arch_to_ours` maps the official
constructor options.
"""
from typing import Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
from mmengine.logging import print_log

from ..layers.gating import PositionalGatingUnit
from .official_options import POSMLP, checked_options, layernorm_eps


def _axes_to_ours(value: torch.Tensor, both_sides: bool) -> torch.Tensor:
    """Official GQPE coordinates ``(dx, -dy)`` -> ours ``(dy, dx)``: ``D v`` (rows) and, for a
    free (non-symmetric) ``Sigma``, ``D Sigma D^T`` (rows and columns), ``D = [[0, -1], [1, 0]]``."""
    value = torch.stack([-value[:, 1], value[:, 0]], dim=1)
    if both_sides:
        value = torch.stack([-value[..., 1], value[..., 0]], dim=-1)
    return value


class _Layout(NamedTuple):
    """What the key mapping needs to know about the whole official state dict."""
    last: int  # index of the last level (its final ``norm``)
    ln_stem: bool  # LayerNorm stem (no running statistics)
    qpe_units: frozenset  # ``...gate_unit`` prefixes of the QPE gates
    symmetric: bool
    absolute_bias: bool


_DROP = ('', None)  # a key the official forward never reads, or a buffer we rebuild


def convert_official_posmlp(state: Dict[str, torch.Tensor], symmetric: bool = True,
                            absolute_bias: bool = True) -> Dict[str, torch.Tensor]:
    """Official ``Zhicaiwww/PosMLP`` keys -> ours (backbone keys; ``head.*`` kept as is).

    * ``patch_embed.projs.i``/``norms.i`` -> ``patch_embed.i.conv``/``.bn`` (``.ln`` for the
      LayerNorm stem, recognised by its missing running statistics); the linear stem
      (``stem=PatchEmbed``) ``patch_embed.proj`` -> ``patch_embed.projection``;
      ``levels.i.pool`` -> ``stages.i.downsample``; ``levels.i.encoder.j`` -> ``stages.i.blocks.j``;
      ``proj_c_e``/``proj_c_s`` -> ``fc1``/``fc2``; final ``norm`` -> ``norm{last}``;
      ``absolute_pos_embed`` (1, 3136, C), read by the official code as ``reshape(1, -1, 56, 56)``,
      -> (1, C, 56, 56) in the same memory order.
    * GQPE: the official offsets are ``(dx, dy) = (x_n - x_m, y_m - y_n)``; ours are
      ``(dy', dx') = (y_n - y_m, x_n - x_m)``. With ``D = [[0, -1], [1, 0]]`` (swap axes, flip y)
      the centres map to ``D c`` and ``Gamma`` to ``D Gamma``, so ``Sigma -> D Sigma D^T``: exact.
      ``symmetric=False`` (official option: ``Sigma`` is the parameter itself) maps it to
      ``D Sigma D^T`` directly.
    * ``token_proj_n_bias`` (1, N, 1) -> ``token_bias`` (N,), except with ``absolute_bias=False``
      (official QPE option: the bias exists but is never added), where it is dropped;
      ``token_proj_n_weight`` (1, N, N) -> ``token_weight`` for LRPE-M (``quadratic=False,
      pos_only=False``); next to a QPE (``quadratic=True, pos_only=False``) the official forward
      never reads it, and it is dropped. The SGU gate unit's ``norm_list.0`` / ``proj_list.0``
      -> ``gate.norm`` / ``gate.mixing.weight`` + ``gate.token_bias``. The constant buffers
      (``rel_indices``, ``window_relative_position_index``) are dropped (we rebuild them).
    * Any other key raises.
    """
    layout = _Layout(
        last=max((int(k.split('.')[1]) for k in state if k.startswith('levels.')), default=3),
        ln_stem='patch_embed.norms.0.weight' in state and 'patch_embed.norms.0.running_mean' not in state,
        qpe_units=frozenset(k.rsplit('.pos.', 1)[0] for k in state if k.endswith('.pos.attention_centers')),
        symmetric=symmetric, absolute_bias=absolute_bias)
    out = {}
    for key, value in state.items():
        item = _DROP if key.endswith(('rel_indices', 'window_relative_position_index')) \
            else _convert_key(key, value, layout)
        if item is None:
            raise KeyError(f'unexpected key {key!r} in an official PosMLP checkpoint (not a key of the official '
                           'PosMLP model with PoSGU/SGU gates): is it a PosMLP (models/posmlp.py) state dict?')
        if item is not _DROP:
            out[item[0]] = item[1]
    return out


def _convert_key(key: str, value: torch.Tensor, layout: _Layout) -> Optional[Tuple[str, torch.Tensor]]:
    """One official key -> ``(our key, value)``; ``_DROP``; ``None`` for a key we do not know."""
    if key.startswith('levels.'):
        return _level_key(key, value, layout)
    if key.startswith('norm.'):
        return f'norm{layout.last}.' + key[len('norm.'):], value
    if key.startswith('head.'):
        return key, value
    return _stem_key(key, value, layout.ln_stem)


def _stem_key(key: str, value: torch.Tensor, ln_stem: bool) -> Optional[Tuple[str, torch.Tensor]]:
    """The patch embedding (convolutional or linear stem) and the absolute position embedding."""
    for prefix, layer in (('patch_embed.projs.', 'conv'), ('patch_embed.norms.', 'ln' if ln_stem else 'bn')):
        if key.startswith(prefix):
            i, rest = key[len(prefix):].split('.', 1)
            return f'patch_embed.{i}.{layer}.{rest}', value
    if key in ('patch_embed.proj.weight', 'patch_embed.proj.bias'):
        return key.replace('.proj.', '.projection.'), value
    if key in ('patch_embed.norm.weight', 'patch_embed.norm.bias'):
        return key, value
    if key == 'absolute_pos_embed':
        return key, value.reshape(1, -1, 56, 56)
    return None


def _level_key(key: str, value: torch.Tensor, layout: _Layout) -> Optional[Tuple[str, torch.Tensor]]:
    """``levels.i.*``: downsampling, blocks, channel MLP and the gate unit (SGU or PoSGU)."""
    new = key.replace('levels.', 'stages.', 1).replace('.pool.', '.downsample.') \
        .replace('.encoder.', '.blocks.').replace('.proj_c_e.', '.fc1.').replace('.proj_c_s.', '.fc2.')
    if '.gate_unit.' not in key:
        return new, value
    unit = key.split('.gate_unit.', 1)[0] + '.gate_unit'
    gate = new.split('.gate_unit.', 1)[0] + '.gate.'
    leaf = key.rsplit('.', 1)[1]
    if '.gate_unit.pos.' in key:
        return _positional_key(leaf, value, gate, unit in layout.qpe_units, layout)
    if key == unit + '.token_proj_n_weight':
        if unit in layout.qpe_units:
            return _DROP  # quadratic=True, pos_only=False: the official forward never reads it
        return gate + 'mixing.token_weight', value.reshape(value.shape[-2], value.shape[-1])
    if key.startswith(unit + '.proj_list.0.') or key.startswith(unit + '.norm_list.0.'):
        if '.norm_list.0.' in key:
            return gate + 'norm.' + leaf, value
        return gate + ('mixing.weight' if leaf == 'weight' else 'token_bias'), value
    return None


def _positional_key(leaf: str, value: torch.Tensor, gate: str, qpe: bool,
                    layout: _Layout) -> Optional[Tuple[str, torch.Tensor]]:
    """``gate_unit.pos.*``: the positional mixing of a PoSGU (GQPE centres/spreads, LRPE table)."""
    if leaf == 'token_proj_n_bias':
        if qpe and not layout.absolute_bias:
            return _DROP  # official absolute_bias=False: created, never added
        return gate + 'token_bias', value.reshape(-1)
    if leaf == 'window_relative_position_bias_table':
        return gate + 'mixing.relative_position_table', value
    if leaf == 'attention_centers':
        return gate + 'mixing.centers', _axes_to_ours(value, False)
    if leaf == 'attention_spreads':
        return gate + 'mixing.spreads', _axes_to_ours(value, not layout.symmetric) if value.dim() == 3 else value
    return None


def model_convert_kwargs(model: nn.Module) -> dict:
    """The :func:`convert_official_posmlp` options implied by one of our models."""
    units = [m for m in model.modules() if isinstance(m, PositionalGatingUnit)]
    symmetric = {getattr(u.mixing, 'symmetric', True) for u in units} or {True}
    bias = {u.token_bias is not None for u in units if hasattr(u.mixing, 'centers')} or {True}
    if len(symmetric) > 1 or len(bias) > 1:
        raise ValueError('an official PosMLP checkpoint sets symmetric/absolute_bias for the whole model; '
                         'this model mixes values: build it from official_arch_to_ours')
    return dict(symmetric=symmetric.pop(), absolute_bias=bias.pop())


def checkpoint_filter_fn(state: Dict[str, torch.Tensor],
                        model: Optional[nn.Module] = None) -> Dict[str, torch.Tensor]:
    """Accept official checkpoints directly in ``init_cfg`` (converted on the fly, with the
    options of ``model``)."""
    if any(k.startswith('levels.') for k in state):
        state = convert_official_posmlp(state, **(model_convert_kwargs(model) if model is not None else {}))
    head = [k for k in state if k.startswith('head.')]
    if head:
        print_log(f'PosMLP: the classifier keys {head} of the checkpoint are not backbone weights; left unused',
                  logger='current')
    return {k: v for k, v in state.items() if not k.startswith('head.')}


def official_arch_to_ours(arch: dict) -> dict:
    """Constructor kwargs of the official ``PosMLP`` (test vectors' ``arch_json``; non-JSON
    arguments as strings, e.g. ``"gate_unit": "SGU"``) -> ours.

    The keys are checked against :data:`~.official_options.POSMLP` (unknown keys refused, ignored
    ones logged); every read option is mapped or refused with a ``ValueError`` naming it. Read
    options with no effect on a trained model's function are accepted: ``img_size``/``in_chans``
    (the official ConvPE ignores them; ``stem=PatchEmbed`` reads ``in_chans`` and asserts
    ``img_size``, which ours does not need), ``num_classes`` (the head), ``att_std``
    (initialisation), ``drop_rate``/``drop_path_rate`` (mapped; training only).
    """
    a = checked_options('posmlp', arch)
    lists = _checked_stage_lists(a)
    _check_layers(a)
    linear_stem = _last_name(a['stem']) == 'PatchEmbed'
    eps = layernorm_eps(a['norm_layer'])
    gate, gate_cfg = _gate(a, sum(lists['depths']), eps)
    if a['shift'] and a['num_blocks'] != 1:
        raise ValueError('official shift=True with num_blocks != 1 does not run (PosMLPLayer.forward_shift calls a '
                         'missing self.window_partition); with num_blocks=1 it shifts nothing and maps to shift=False')
    ours = dict(arch=dict(embed_dims=lists['embed_dims'], depths=lists['depths'], groups=lists['gamma'],
                          mlp_ratios=lists['mlp_ratio'], window_sizes=lists['win_size']),
                in_channels=int(a['in_chans'] if linear_stem else a['in_chan']), gate_type=gate, shift=False,
                drop_rate=float(a['drop_rate']), drop_path_rate=float(a['drop_path_rate']),
                norm_cfg=dict(type='LN', eps=eps))
    if linear_stem:
        ours['patch_embed_cfg'] = dict(type='linear', patch_size=16, norm_cfg=dict(type='LN', eps=1e-5))
    else:
        ours['stem_norm_cfg'] = dict(type=a['stem_norm'], eps=1e-6)
    ours.update(downsample_norm_cfg=dict(type=a['downsample_norm'], eps=1e-6),
                downsample_depthwise=bool(a['depth_conv']))
    if gate_cfg:
        ours['gate_cfg'] = gate_cfg
    if a['ape']:
        if lists['embed_dims'][0] != 96:
            raise ValueError('official ape=True builds a (1, 3136, 96) embedding: it only runs with embed_dims[0]=96')
        ours['ape_size'] = (56, 56)
    return ours


def _last_name(layer) -> str:
    """``'timm.layers.PatchEmbed'`` -> ``'PatchEmbed'`` (the official layer arguments, as strings)."""
    return str(layer).split('.')[-1]


def _checked_stage_lists(a: dict) -> dict:
    """The per-level lists, one entry per official level."""
    n = int(a['num_levels'])
    lists = {k: list(a[k]) for k in ('embed_dims', 'win_size', 'gamma', 'depths', 'mlp_ratio')}
    if any(len(v) != n for v in lists.values()):
        raise ValueError(f'official num_levels={n} but embed_dims/win_size/gamma/depths/mlp_ratio have lengths '
                         f'{[len(v) for v in lists.values()]} (the official model asserts they match)')
    return lists


def _check_layers(a: dict) -> None:
    """Refuse the official layer choices with no equivalent here.

    The official ``stem=PatchEmbed`` is a 16x16 linear embedding (PosMLP's own ``patch_size`` is not
    passed on) with ``nn.LayerNorm`` (eps 1e-5), taking ``in_chans`` channels and ignoring
    ``stem_norm``; ``pool_layer=PatchMerging`` does not run.
    """
    if _last_name(a['pool_layer']) == 'PatchMerging':
        raise ValueError("official pool_layer='PatchMerging' does not run (its LayerNorm and 1x1 reduction are built "
                         'for in_chan channels but get the 4*in_chan concatenation): use ConvPatchMerging; our '
                         "downsample_cfg=dict(type='linear') is the working Swin form it was meant to be")
    for name, ok in (('gate_layer', ('PosMLPLayer', )), ('pool_layer', ('ConvPatchMerging', )),
                     ('stem', ('ConvPatchEmbed', 'PatchEmbed')), ('act_layer', ('nn.GELU', )),
                     ('global_pool', ('avg', ))):
        if _last_name(a[name]) not in [_last_name(o) for o in ok]:
            raise ValueError(f'official {name}={a[name]!r} is not supported: only {" or ".join(map(repr, ok))} '
                             'has an equivalent here')
    linear_stem = _last_name(a['stem']) == 'PatchEmbed'
    for name in ('stem_norm', 'downsample_norm'):
        if name == 'stem_norm' and linear_stem:
            continue  # not read by the official linear stem
        if a[name] not in ('BN', 'LN'):
            raise ValueError(f"official {name}={a[name]!r} is not supported: use 'BN' or 'LN'")
    if a['pretrained'] not in (None, ''):
        raise ValueError('official pretrained=<path> loads weights at construction: convert that file instead')


def _gate(a: dict, num_blocks: int, eps: float) -> Tuple[str, dict]:
    """Official ``gate_unit``/``chunks``/``quadratic``/``pos_only``/... -> our ``gate_type`` and ``gate_cfg``."""
    chunks, gate_unit = int(a['chunks']), str(a['gate_unit'])
    if gate_unit == 'SGU':
        if chunks != 2:
            raise ValueError(f'official SGU with chunks={chunks} is not supported: only chunks=2 (gMLP SGU) '
                             'has an equivalent here')
        if num_blocks > 26:
            raise ValueError('official SGU drops the token-FC bias of blocks after the 26th: depths summing to '
                             f'{num_blocks} are not supported')
        return 'sgu', ({} if eps == 1e-6 else dict(norm_cfg=dict(type='LN', eps=eps)))
    if gate_unit != 'PoSGU':
        raise ValueError(f"official gate_unit={gate_unit!r} is not supported: use 'PoSGU' or 'SGU'")
    if chunks not in (1, 2):
        raise ValueError(f'official PoSGU with chunks={chunks} does not build (its FC2 expects '
                         'hidden/chunks channels but gets hidden/2): use chunks 1 or 2')
    gate_cfg = {} if chunks == 2 else dict(split=False)
    if not a['quadratic']:
        return ('glrpe' if a['pos_only'] else 'glrpe-m'), gate_cfg
    if not a['absolute_bias']:
        gate_cfg['token_bias'] = False
    if not a['use_softmax']:
        gate_cfg['softmax'] = False
    if a['generalized'] and not a['symmetric']:
        gate_cfg['symmetric'] = False
    return ('ggqpe' if a['generalized'] else 'gqpe'), gate_cfg


def official_convert_kwargs(arch: dict) -> dict:
    """The :func:`convert_official_posmlp` options of an official constructor-kwargs dict."""
    a = {**POSMLP['read'], **arch}
    quadratic_gen = a['gate_unit'] == 'PoSGU' and a['quadratic']
    return dict(symmetric=bool(a['symmetric']) or not (quadratic_gen and a['generalized']),
                absolute_bias=bool(a['absolute_bias']) or not quadratic_gen)
