"""timm ``gmlp_*`` checkpoints -> :class:`~mmposmlp.models.GMLP` (``gate_type='sgu'``).

:func:`checkpoint_filter_fn` is the entry used when loading.
"""
import re
from typing import Dict

import torch
from mmengine.logging import print_log

from ..checkpoints import backbone_of_whole_model


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
