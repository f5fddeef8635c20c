"""Official Wave-MLP (``huawei-noah/Efficient-AI-Backbones``, ``wavemlp_pytorch``) checkpoints and
constructor options -> :class:`~mmposmlp.models.WaveMLP`.

:func:`checkpoint_filter_fn` is the entry used when loading; :func:`official_arch_to_ours` maps the
official ``WaveNet`` options.
"""
import re
from typing import Dict

import torch
from mmengine.logging import print_log

from ..checkpoints import backbone_of_whole_model
from .official_options import checked_options

BN = dict(type='BN')
GN1 = dict(type='GN', num_groups=1)  # official ``MyNorm`` = nn.GroupNorm(1, C), eps 1e-5


_BLOCK_KEYS = [
    ('attn.fc_h.', 'token_mixer.amplitude_h.'),
    ('attn.fc_w.', 'token_mixer.amplitude_w.'),
    ('attn.fc_c.', 'token_mixer.channel_fc.'),
    ('attn.tfc_h.', 'token_mixer.token_fc_h.'),
    ('attn.tfc_w.', 'token_mixer.token_fc_w.'),
    ('attn.theta_h_conv.0.', 'token_mixer.phase_h.conv.'),
    ('attn.theta_h_conv.1.', 'token_mixer.phase_h.norm.'),
    ('attn.theta_w_conv.0.', 'token_mixer.phase_w.conv.'),
    ('attn.theta_w_conv.1.', 'token_mixer.phase_w.norm.'),
    ('attn.reweight.fc1.', 'token_mixer.reweight.fc1.'),
    ('attn.reweight.fc2.', 'token_mixer.reweight.fc2.'),
    ('attn.proj.', 'token_mixer.proj.'),
    ('norm1.', 'norm1.'),
    ('norm2.', 'norm2.'),
    ('mlp.fc1.', 'ffn.fc1.'),
    ('mlp.fc2.', 'ffn.fc2.'),
]


def is_official_wavemlp(state_dict: Dict[str, torch.Tensor]) -> bool:
    """True for official (timm ``WaveNet``) key names."""
    return any(k.startswith(('network.', 'module.network.')) for k in state_dict)


def convert_official_wavemlp(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Official ``WaveNet`` state dict -> mmpretrain ``ImageClassifier`` keys of ours.

    Returns keys ``backbone.*`` (for ``WaveMLP(out_indices=(3,))``; the official final ``norm``
    becomes ``backbone.norm3``) and ``head.fc.*`` (``LinearClsHead``). Official dense-prediction
    keys ``norm0/2/4/6`` (``fork_feat``) map to ``backbone.norm0-3``. Unknown keys raise.
    """
    # ``network`` interleaves stages and Downsamples; a transition without downsampling
    # (official ``transitions[i] = False``) removes a Downsample and shifts the later indices, so
    # each index is classified by its keys (a Downsample holds ``proj``/``norm`` directly)
    kinds = {}
    for key in state_dict:
        m = re.match(r'(?:module\.)?network\.(\d+)\.(.*)', key)
        if m:
            kind = 'ds' if m.group(2).startswith(('proj.', 'norm.')) else 'stage'
            kinds.setdefault(int(m.group(1)), kind)
    place, stages = {}, 0
    for idx in sorted(kinds):
        if kinds[idx] == 'stage':
            place[idx] = stages
            stages += 1
        else:
            place[idx] = stages - 1  # our downsamples[i - 1] precedes stage i
    out = {}
    for key, value in state_dict.items():
        k = key[7:] if key.startswith('module.') else key
        new = None
        if k.startswith('patch_embed.'):
            new = 'backbone.' + k
        elif k.startswith('head.'):
            new = 'head.fc.' + k[len('head.'):]
        elif k.startswith('norm.'):
            new = 'backbone.norm3.' + k[len('norm.'):]
        elif re.match(r'norm[0246]\.', k):
            new = f'backbone.norm{int(k[4]) // 2}.' + k[6:]
        else:
            m = re.match(r'network\.(\d+)\.(.*)', k)
            if m:
                idx, rest = int(m.group(1)), m.group(2)
                if kinds[idx] == 'ds':  # Downsample: proj / norm
                    new = f'backbone.downsamples.{place[idx]}.{rest}'
                else:
                    mb = re.match(r'(\d+)\.(.*)', rest)
                    if mb:
                        for old_p, new_p in _BLOCK_KEYS:
                            if mb.group(2).startswith(old_p):
                                new = (f'backbone.stages.{place[idx]}.{mb.group(1)}.' + new_p
                                       + mb.group(2)[len(old_p):])
                                break
        if new is None:
            raise KeyError(f'unexpected key {key!r} in an official Wave-MLP checkpoint: is this '
                           'a WaveNet (wavemlp_pytorch/models/wavemlp.py) state dict?')
        out[new] = value
    return out


def checkpoint_filter_fn(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Converter for ``init_cfg`` loading: official keys are converted, ours pass through;
    the result is stripped to backbone keys when it has ``backbone.`` keys."""
    if is_official_wavemlp(state_dict):
        print_log('WaveMLP: converting official Wave-MLP keys', logger='current')
        state_dict = convert_official_wavemlp(state_dict)
    return backbone_of_whole_model(state_dict, 'WaveMLP')


def official_arch_to_ours(arch: dict) -> dict:
    """Official ``WaveNet`` constructor kwargs (test vectors' ``arch_json``; ``norm_layer`` as
    ``"nn.BatchNorm2d"`` or ``"MyNorm"``) -> our :class:`WaveMLP` kwargs.

    The keys are checked against :data:`~.official_options.WAVEMLP`: unknown keys are refused, the
    ones the official code ignores are accepted and logged (``img_size``, ``patch_size``, ``in_chans``:
    the stem is hard-wired to a 3-channel 7x7/4 conv; ``qk_scale``, ``attn_drop_rate``, ``drop_rate``:
    never used by the blocks; ``args``). Every read option is mapped or refused (``ValueError`` naming
    it); ``num_classes`` is the head. ``fork_feat=True`` (the
    detection/segmentation model) maps to ``out_indices=(0, 1, 2, 3)`` with the output norms
    ``norm0-3`` (official ``norm0/2/4/6``).
    """
    a = checked_options('wavemlp', arch)
    for k in ('layers', 'embed_dims', 'mlp_ratios'):
        if a[k] is None or len(a[k]) != 4:
            raise ValueError(f'official {k}={a[k]!r}: our WaveMLP needs 4 stages')
    dims = list(a['embed_dims'])
    transitions = list(a['transitions'] if a['transitions'] is not None else [True] * 4)
    if a['fork_feat'] and not all(transitions[i] or dims[i] != dims[i + 1] for i in range(3)):
        raise ValueError('official fork_feat=True with a transition without downsampling normalises the outputs '
                         'of network[0, 2, 4, 6], which are then not the 4 stages: not supported')
    for i in range(3):
        if not transitions[i] and dims[i] != dims[i + 1]:
            raise ValueError(f'official transitions[{i}]=False with changing channels builds Downsample(patch_size=1),'
                             ' which asserts patch_size == 2: that model does not build')
    norm = {'nn.BatchNorm2d': BN, 'BatchNorm2d': BN, 'MyNorm': GN1}.get(str(a['norm_layer']))
    if norm is None:
        raise ValueError(f"official norm_layer={a['norm_layer']!r} is not supported: use nn.BatchNorm2d or MyNorm "
                         '(GroupNorm(1, C))')
    return dict(arch=dict(depths=list(a['layers']), embed_dims=dims, mlp_ratios=list(a['mlp_ratios']),
                          norm_cfg=norm, stem_norm=bool(a['ds_use_norm']),
                          phase_mode='fc' if a['mode'] == 'fc' else 'depthwise'),
                qkv_bias=bool(a['qkv_bias']), downsamples=[bool(t) for t in transitions[:3]],
                drop_path_rate=float(a['drop_path_rate']),
                out_indices=(0, 1, 2, 3) if a['fork_feat'] else (3, ))
