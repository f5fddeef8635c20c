"""Official LVT (``Chenglin-Yang/LVT``: ``lite_vision_transformer`` / ``lvt_cls``) checkpoints and constructor
options -> :class:`~mmposmlp.models.LVT` + :class:`~mmposmlp.models.LVTClassAttentionHead`.

:func:`checkpoint_filter_fn` is the entry used when loading; :func:`official_lvt_kwargs` maps the
official constructor options.
"""
import re
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
from mmengine.logging import print_log

from ..checkpoints import strip_prefix
from .official_options import checked_options


_OFFICIAL_BLOCK = [
    (r'attn\.ds\.(weight|bias)', r'attn.atrous.\1'),
    (r'attn\.norm\.(weight|bias)', r'attn.sr_norm.\1'),
    (r'attn\.(q|kv|proj|sr|attn)\.(weight|bias)', r'attn.\1.\2'),
    (r'attn\.weight\.weight', 'attn.tap_proj'),
    (r'mlp\.depconv\.(weight|bias)', r'mlp.dwconv.\1'),
    (r'mlp\.(fc1|fc2)\.(weight|bias)', r'mlp.\1.\2'),
    (r'(norm1|norm2)\.(weight|bias)', r'\1.\2'),
]


def is_official_lvt(state_dict: Dict[str, torch.Tensor]) -> bool:
    """True for the official key layout (``backbone.<stage>.0.proj`` / ``backbone.<stage>.1.<block>``)."""
    return any(re.match(r'(module\.)?backbone\.\d+\.0\.proj\.weight$', k) for k in state_dict)


def _official_block_value(new_key: str, value: torch.Tensor) -> torch.Tensor:
    if new_key.endswith('attn.tap_proj'):
        # official: a 1x1 conv over tap-major (k*k*C) channels with k*k groups -> per-tap C x C matrices
        out_c, in_c = value.shape[:2]
        return value.reshape(out_c // in_c, in_c, in_c)
    if re.search(r'mlp\.fc[12]\.weight$', new_key) and value.dim() == 4:
        return value.reshape(value.shape[:2])  # 1x1 conv -> linear
    return value


def convert_official_lvt(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Official LVT state dict -> our keys; every key is mapped or refused.

    * ``lvt_cls`` (the released ImageNet model): ``backbone.*`` -> :class:`LVT` ``backbone.stages.*``;
      ``post_network``, ``cls_token``, ``norm``, ``head``, ``aux_head`` -> :class:`LVTClassAttentionHead`
      ``head.blocks``, ``head.cls_token``, ``head.norm``, ``head.fc``, ``head.aux_fc``;
    * ``with_cls_head=False`` (dense-prediction backbone): ``downstream_norms.i`` -> ``backbone.norm{i}``.

    The plain ``lvt`` classifier (mean-pooled ``norm`` + ``head`` without ``post_network``) is refused.
    """
    state = {k[7:] if k.startswith('module.') else k: v for k, v in state_dict.items()}
    if not is_official_lvt(state):
        raise ValueError('not an official LVT state dict: no backbone.<stage>.0.proj.weight key (official '
                         'lite_vision_transformer layout)')
    has_post = any(k.startswith('post_network.') for k in state)
    if not has_post and any(k.startswith(('head.', 'norm.')) for k in state):
        raise ValueError('this official LVT checkpoint is the plain lvt classifier (mean-pooled norm + head, '
                         'no post_network); only lvt_cls (class-attention head) and with_cls_head=False '
                         'checkpoints convert: use lvt_cls weights.')
    out = {}
    for key, value in state.items():
        new = None
        m = re.match(r'backbone\.(\d+)\.0\.(proj|norm)\.(weight|bias)$', key)
        if m:
            new = f'backbone.stages.{m.group(1)}.patch_embed.{m.group(2)}.{m.group(3)}'
        m = m or re.match(r'backbone\.(\d+)\.1\.(\d+)\.(.+)$', key)
        if new is None and m:
            for pat, rep in _OFFICIAL_BLOCK:
                if re.fullmatch(pat, m.group(3)):
                    new = f'backbone.stages.{m.group(1)}.blocks.{m.group(2)}.' + re.sub(pat, rep, m.group(3))
                    value = _official_block_value(new, value)
                    break
        m = re.match(r'downstream_norms\.(\d+)\.(weight|bias)$', key)
        if m:
            new = f'backbone.norm{m.group(1)}.{m.group(2)}'
        m = re.match(r'post_network\.(\d+)\.(norm1|norm2)\.(weight|bias)$', key) or re.match(
            r'post_network\.(\d+)\.(attn\.(?:q|kv|proj)|mlp\.fc1|mlp\.fc2)\.(weight|bias)$', key)
        if m:
            new = f'head.blocks.{m.group(1)}.{m.group(2)}.{m.group(3)}'
        if key == 'cls_token':
            new = 'head.cls_token'
        m = re.match(r'(norm|head|aux_head)\.(weight|bias)$', key)
        if m:
            new = 'head.' + {'norm': 'norm', 'head': 'fc', 'aux_head': 'aux_fc'}[m.group(1)] + '.' + m.group(2)
        if new is None:
            raise KeyError(f'unexpected key {key!r} in an official LVT checkpoint (lite_vision_transformer / '
                           'lvt_cls); it has no counterpart in mmposmlp.LVT + LVTClassAttentionHead')
        out[new] = value
    return out


def checkpoint_filter_fn(state_dict: Dict[str, torch.Tensor], prefix: Optional[str] = None) -> Dict[str, torch.Tensor]:
    """init_cfg loading: an official checkpoint (``lvt_cls``, ``with_cls_head=False``, or a whole official
    segmentor / detector whose ``backbone.backbone.*`` is LVT) is converted first, then the ``backbone.*`` part
    is taken (``prefix``: None = ``'backbone.'`` when present); what is left unused is logged by part."""
    state = {k[7:] if k.startswith('module.') else k: v for k, v in state_dict.items()}
    if prefix is None:
        inner = {k[9:]: v for k, v in state.items() if k.startswith('backbone.')}
        if is_official_lvt(state):
            state = convert_official_lvt(state)
        elif inner and is_official_lvt(inner):  # a whole official segmentor / detector
            state = {**convert_official_lvt(inner), **{k: v for k, v in state.items() if not k.startswith('backbone.')}}
        prefix = 'backbone.' if any(k.startswith('backbone.') for k in state) else ''
    others = sorted({k.split('.')[0] for k in state if prefix and not k.startswith(prefix)})
    state = strip_prefix(state, prefix)
    if is_official_lvt({'backbone.' + k: v for k, v in state.items()}):
        state = strip_prefix(convert_official_lvt({'backbone.' + k: v for k, v in state.items()}), 'backbone.')
    if others:
        print_log(f'LVT: using the {prefix}* weights of a whole-model checkpoint; its {others} parts are left '
                  'unused', logger='current')
    return state


_OFFICIAL_ACTS = {'nn.SiLU(True)': 'SiLU', 'nn.SiLU()': 'SiLU', 'nn.ReLU(True)': 'ReLU', 'nn.ReLU()': 'ReLU',
                  'nn.GELU()': 'GELU', 'nn.Sigmoid()': 'Sigmoid', 'nn.Tanh()': 'Tanh'}


def official_lvt_kwargs(arch: dict) -> Tuple[dict, Optional[dict]]:
    """Official LVT constructor options (``lite_vision_transformer`` / ``lvt_cls`` kwargs, ``rasa_cfg`` as a
    dict) -> ``(LVT kwargs, LVTClassAttentionHead kwargs or None)``. The keys are checked against
    :data:`~.official_options.LVT`, ``rasa_cfg``'s own keys as ``rasa_cfg.<key>`` rows (``patch_size`` and
    ``drop_rate`` are accepted and logged: the official network never reads them); every read option is mapped
    or refused in one sentence, ``rasa_cfg['init']`` accepted because it only sets the initial weights."""
    a = checked_options('lvt', arch)
    if arch.get('norm_layer', 'nn.LayerNorm') not in ('nn.LayerNorm', nn.LayerNorm):
        raise ValueError(f"official LVT option norm_layer={arch['norm_layer']!r} is not supported; only "
                         "nn.LayerNorm (the default) converts")
    if arch.get('with_cls_head', True) and 'post_layers' not in arch:
        raise ValueError('official LVT with_cls_head=True without post_layers is the plain lvt classifier '
                         '(mean-pooled norm + head), which does not convert; use lvt_cls or with_cls_head=False')
    post = arch.get('post_layers')
    if post is not None and any(p != 'ca' for p in post):
        raise ValueError(f"official LVT post_layers {post!r} are not all 'ca' (class attention), the only "
                         "post layer the official code builds")
    rasa = {k[len('rasa_cfg.'):]: v for k, v in a.items() if k.startswith('rasa_cfg.')}
    sa_layers = list(arch.get('sa_layers', ['csa', 'rasa', 'rasa', 'rasa']))
    if 'rasa' in sa_layers and not arch.get('rasa_cfg'):
        raise ValueError("official LVT sa_layers use 'rasa' but rasa_cfg is None, which the official code "
                         "cannot run; give rasa_cfg")
    act = rasa['act_layer']
    if act not in _OFFICIAL_ACTS:
        raise ValueError(f'official LVT rasa_cfg act_layer {act!r} is not supported; use one of '
                         f'{sorted(_OFFICIAL_ACTS)}')
    if rasa['init'] not in ('kaiming', 'dirac'):
        raise ValueError(f"official LVT rasa_cfg init {rasa['init']!r} is not 'kaiming' or 'dirac'")
    backbone = dict(
        arch=dict(depths=list(arch['layers']), embed_dims=list(arch['embed_dims']),
                  num_heads=list(arch['num_heads']), mlp_ratios=list(arch['mlp_ratios']),
                  depthwise_mlp=[bool(d) for d in arch['mlp_depconv']],
                  sr_ratios=list(arch.get('sr_ratios', [1, 1, 1, 1])), sa_layers=sa_layers),
        in_channels=arch.get('in_chans', 3), rasa_recursions=int(rasa['r_num']),
        atrous_rates=rasa['atrous_rates'], atrous_act_cfg=dict(type=_OFFICIAL_ACTS[act]),
        qkv_bias=bool(arch.get('qkv_bias', False)), qk_scale=arch.get('qk_scale'),
        attn_drop_rate=arch.get('attn_drop_rate', 0.), drop_path_rate=arch.get('drop_path_rate', 0.))
    if not arch.get('with_cls_head', True):
        backbone.update(out_indices=tuple(range(len(arch['layers']))), out_norm=True)
        return backbone, None
    head = dict(num_classes=arch.get('num_classes', 1000), in_channels=arch['embed_dims'][-1],
                num_heads=arch['num_heads'][-1], mlp_ratio=arch['mlp_ratios'][-1], num_blocks=len(post))
    return backbone, head
