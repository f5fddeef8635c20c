"""timm ``gmlp_*`` checkpoints and constructor options -> :class:`~mmposmlp.models.GMLP` (``gate_type='sgu'``).

:func:`checkpoint_filter_fn` is the entry used when loading; :func:`timm_gmlp_kwargs_to_ours` maps timm's
``MlpMixer`` options.
"""
import re
from typing import Dict

import torch
from mmengine.logging import print_log

from ..checkpoints import backbone_of_whole_model
from .official_options import checked_options, layer_name, layernorm_eps


_TIMM_BLOCK_KEYS = [
    ('norm.', 'norm.'),
    ('mlp_channels.fc1.', 'fc1.'),
    ('mlp_channels.fc2.', 'fc2.'),
    ('mlp_channels.gate.norm.', 'gate.norm.'),
    ('mlp_channels.gate.proj.weight', 'gate.mixing.weight'),
    ('mlp_channels.gate.proj.bias', 'gate.token_bias'),
]


def is_timm_gmlp(state_dict: Dict[str, torch.Tensor]) -> bool:
    """True for timm ``gmlp_*`` key names (``stem.proj`` and ``blocks.*.mlp_channels.gate``)."""
    return any(re.match(r'(module\.)?blocks\.\d+\.mlp_channels\.gate\.', k) for k in state_dict)


def convert_timm_gmlp(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """timm ``gmlp_*`` state dict -> mmpretrain ``ImageClassifier`` keys of ours (``backbone.*`` for
    :class:`GMLP` with ``gate_type='sgu'``, ``head.fc.*`` for ``LinearClsHead``); unknown keys raise.

    timm's ``SpatialGatingUnit`` normalises, mixes and gates with the *second* half of ``fc1``'s
    output; ours (PosMLP Eq. 9) with the first, so the two halves of ``fc1`` swap (``fc2`` reads the
    gated half, the same channels in both).
    """
    out = {}
    for key, value in state_dict.items():
        k = key[7:] if key.startswith('module.') else key
        new = None
        if k.startswith('stem.proj.'):
            new = 'backbone.patch_embed.' + k[len('stem.proj.'):]
        elif k.startswith('norm.'):
            new = 'backbone.' + k
        elif k.startswith('head.'):
            new = 'head.fc.' + k[len('head.'):]
        else:
            m = re.match(r'blocks\.(\d+)\.(.*)', k)
            if m:
                for old_p, new_p in _TIMM_BLOCK_KEYS:
                    if m.group(2).startswith(old_p):
                        new = f'backbone.layers.{m.group(1)}.{new_p}{m.group(2)[len(old_p):]}'
                        if new_p == 'fc1.':
                            value = torch.cat(value.chunk(2, dim=0)[::-1])
                        break
        if new is None:
            raise KeyError(f'unexpected key {key!r} in a timm gMLP checkpoint: is this a timm gmlp_* '
                           '(MlpMixer with SpatialGatingBlock) state dict?')
        out[new] = value
    return out


def checkpoint_filter_fn(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Converter for ``init_cfg`` loading: timm keys are converted, ours pass through; the result is
    stripped to backbone keys when it has ``backbone.`` keys."""
    if is_timm_gmlp(state_dict):
        print_log('GMLP: converting timm gMLP keys', logger='current')
        state_dict = convert_timm_gmlp(state_dict)
    return backbone_of_whole_model(state_dict, 'GMLP')


def timm_gmlp_kwargs_to_ours(kwargs: dict) -> dict:
    """timm ``MlpMixer`` kwargs of a gMLP (``gmlp_*``: ``block_layer=SpatialGatingBlock``,
    ``mlp_layer=GatedMlp``; classes as objects or names) -> our :class:`GMLP` kwargs with the SGU gate.

    The keys are checked against :data:`~.official_options.TIMM_GMLP`. Refused with the reason: other
    blocks (``MixerBlock``, ``ResBlock``: MLP-Mixer / ResMLP), a pair ``mlp_ratio`` (MixerBlock's),
    ``stem_norm=True`` (our patch embedding has no norm), another activation or norm, block dropout
    (``proj_drop_rate``) and ``drop_path_rate`` > 0 (timm drops every block at the same rate, ours
    at a linearly rising one). ``num_classes``, ``drop_rate``, ``global_pool`` and ``nlhb`` belong to
    the head; ``device``/``dtype`` only place the parameters.
    """
    a = checked_options('timm_gmlp', kwargs)
    for key, want in (('block_layer', 'SpatialGatingBlock'), ('mlp_layer', 'GatedMlp'), ('act_layer', 'GELU')):
        if layer_name(a[key]) != want:
            raise ValueError(f'timm MlpMixer {key}={a[key]!r} is not a gMLP part: only {want} has an equivalent '
                             'in GMLP (MixerBlock / ResBlock are MLP-Mixer / ResMLP)')
    if not isinstance(a['mlp_ratio'], (int, float)):
        raise ValueError(f"timm MlpMixer mlp_ratio={a['mlp_ratio']!r} is MixerBlock's (tokens, channels) pair; "
                         'SpatialGatingBlock takes one ratio, e.g. mlp_ratio=6')
    for key in ('proj_drop_rate', 'drop_path_rate'):
        if a[key]:
            raise ValueError(f'timm MlpMixer {key}={a[key]} is not supported: GMLP has no dropout inside the '
                             'blocks and its stochastic depth rises linearly where timm uses one rate for all')
    if a['stem_norm']:
        raise ValueError('timm MlpMixer stem_norm=True normalises the patch embedding, which GMLP does not')
    if a['global_pool'] != 'avg':
        raise ValueError(f"timm MlpMixer global_pool={a['global_pool']!r}: only 'avg' (what the gMLP classifier "
                         'configs pool by) is supported')
    dims = int(a['embed_dim'])
    return dict(arch=dict(num_layers=int(a['num_blocks']), embed_dims=dims,
                          feedforward_channels=int(dims * a['mlp_ratio'])),
                img_size=a['img_size'], patch_size=int(a['patch_size']), in_channels=int(a['in_chans']),
                gate_type='sgu', norm_cfg=dict(type='LN', eps=layernorm_eps(a['norm_layer'])))
