"""DeiT checkpoints and constructor options (timm ``VisionTransformer``, which the DeiT release builds) ->
:class:`~mmposmlp.models.CPVT` with DeiT's learnable position table and no PEG.

:func:`checkpoint_filter_fn` is the entry used when loading; :func:`deit_kwargs_to_ours` maps the
``VisionTransformer`` options, :func:`deit_distilled_kwargs_to_ours` those of the release's distilled
models (``deit_*_distilled_patch16_*``: CPVT with the distillation token + mmpretrain ``DeiTClsHead``) and
:func:`convert_deit_distilled` their whole files.
"""
import difflib
import re
from typing import Dict, Optional, Tuple

import torch
from mmengine.logging import print_log

from .official_options import DEIT_DISTILLED_CONSTRUCTORS, checked_options, layer_name, layernorm_eps

_BLOCK_KEYS = [('norm1.', 'ln1.'), ('attn.qkv.', 'attn.qkv.'), ('attn.proj.', 'attn.proj.'), ('norm2.', 'ln2.'),
               ('mlp.fc1.', 'ffn.fc1.'), ('mlp.fc2.', 'ffn.fc2.')]


def is_deit(state_dict: Dict[str, torch.Tensor]) -> bool:
    """True for timm ``VisionTransformer`` / DeiT key names (``blocks.*.attn.qkv`` and ``pos_embed``)."""
    return 'pos_embed' in state_dict and any(re.match(r'blocks\.\d+\.attn\.qkv\.', k) for k in state_dict)


def convert_deit(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """DeiT / timm ``VisionTransformer`` backbone keys -> :class:`CPVT` keys (``pos_embed`` ->
    ``abs_pos_embed.pos_embed``, ``blocks.i`` -> ``layers.i``, final ``norm`` -> ``ln1``); the classifier
    ``head.*`` / ``head_dist.*`` is left out; any other key raises."""
    out = {}
    for key, value in state_dict.items():
        new = None
        if key in ('cls_token', 'dist_token'):
            new = key
        elif key == 'pos_embed':
            new = 'abs_pos_embed.pos_embed'
        elif key.startswith('patch_embed.proj.'):
            new = 'patch_embed.' + key[len('patch_embed.proj.'):]
        elif key.startswith('norm.'):
            new = 'ln1.' + key[len('norm.'):]
        elif key.startswith(('head.', 'head_dist.')):
            continue
        else:
            m = re.match(r'blocks\.(\d+)\.(.*)', key)
            for old_p, new_p in _BLOCK_KEYS if m else ():
                if m.group(2).startswith(old_p):
                    new = f'layers.{m.group(1)}.{new_p}{m.group(2)[len(old_p):]}'
                    break
        if new is None:
            raise KeyError(f'unexpected key {key!r} in a DeiT checkpoint: it has no counterpart in CPVT '
                           '(a plain timm VisionTransformer: no LayerScale, register tokens or fc_norm)')
        out[new] = value
    return out


def checkpoint_filter_fn(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """init_cfg loading: DeiT keys converted (classifier left out, logged), ours passed through."""
    if not is_deit(state_dict):
        return state_dict
    head = [k for k in state_dict if k.startswith(('head.', 'head_dist.'))]
    if head:
        print_log(f'CPVT: the DeiT classifier keys {head} are not backbone weights; left unused', logger='current')
    return convert_deit(state_dict)


#: VisionTransformer options that must keep the DeiT value, with what a different value would build
_DEIT_FIXED = dict(
    global_pool=('token', 'another pooling than the class token'), class_token=(True, 'no class token'),
    pos_embed=('learn', 'another position embedding'), qk_norm=(False, 'normalised queries and keys'),
    scale_attn_norm=(False, 'a norm inside the attention'), scale_mlp_norm=(False, 'a norm inside the MLP'),
    proj_bias=(True, 'projections without bias'), init_values=(None, 'LayerScale'),
    no_embed_class=(False, 'a position table without the class row'), reg_tokens=(0, 'register tokens'),
    pre_norm=(False, 'a norm before the blocks'), final_norm=(True, 'no final norm'),
    fc_norm=(None, 'a norm after pooling'), dynamic_img_size=(False, 'per-input resized position tables'),
    dynamic_img_pad=(False, 'padded inputs'), patch_drop_rate=(0., 'patch dropout'),
    embed_norm_layer=(None, 'a norm in the patch embedding'))


def deit_kwargs_to_ours(kwargs: dict) -> dict:
    """timm ``VisionTransformer`` kwargs of a DeiT model (``deit_tiny_patch16_224``: ``embed_dim=192,
    depth=12, num_heads=3, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6)``; classes as
    objects or names) -> our :class:`CPVT` kwargs (``pos_embed_type='learnable'``, no PEG).

    The keys are checked against :data:`~.official_options.DEIT`; a value CPVT cannot build is refused
    naming what it would build (:data:`_DEIT_FIXED`, other block/attention/MLP/embedding classes or
    activations, different ``pos_drop_rate`` and ``proj_drop_rate``: CPVT has one ``drop_rate``).
    ``num_classes``, ``drop_rate`` (the head's), ``pool_include_prefix`` (avg pooling only),
    ``weight_init``, ``fix_init`` (initialisation), ``device``/``dtype`` need no counterpart.
    """
    a = checked_options('deit', kwargs)
    for key, (want, builds) in _DEIT_FIXED.items():
        if a[key] != want and not (key == 'fc_norm' and a[key] is False):
            raise ValueError(f'DeiT/timm VisionTransformer {key}={a[key]!r} builds {builds}, which CPVT does not '
                             f'have; only {key}={want!r} converts')
    for key, want in (('embed_layer', 'PatchEmbed'), ('block_fn', 'Block'), ('mlp_layer', 'Mlp'),
                      ('attn_layer', 'Attention'), ('act_layer', 'GELU')):
        if (a[key] is not None or key != 'act_layer') and layer_name(a[key]) != want:
            raise ValueError(f'DeiT/timm VisionTransformer {key}={a[key]!r} is not supported: only {want} has an '
                             'equivalent in CPVT')
    if a['pos_drop_rate'] != a['proj_drop_rate']:
        raise ValueError(f"DeiT/timm VisionTransformer pos_drop_rate={a['pos_drop_rate']} and proj_drop_rate="
                         f"{a['proj_drop_rate']} differ; CPVT has one drop_rate for both")
    dims = int(a['embed_dim'])
    eps = 1e-6 if a['norm_layer'] is None else layernorm_eps(a['norm_layer'])
    return dict(arch=dict(embed_dims=dims, num_layers=int(a['depth']), num_heads=int(a['num_heads']),
                          feedforward_channels=int(dims * a['mlp_ratio'])),
                img_size=a['img_size'], patch_size=int(a['patch_size']), in_channels=int(a['in_chans']),
                peg_positions=(), pos_embed_type='learnable', with_cls_token=True, out_type='cls_token',
                qkv_bias=bool(a['qkv_bias']), drop_rate=float(a['pos_drop_rate']),
                attn_drop_rate=float(a['attn_drop_rate']), drop_path_rate=float(a['drop_path_rate']),
                norm_cfg=dict(type='LN', eps=eps))


# ---------------------------------------------------------------------------------------------- distilled DeiT
def is_deit_distilled(state_dict: Dict[str, torch.Tensor]) -> bool:
    """True for a whole distilled DeiT file's keys (timm keys with ``dist_token`` and ``head_dist``)."""
    return is_deit(state_dict) and 'dist_token' in state_dict and any(k.startswith('head_dist.') for k in state_dict)


def convert_deit_distilled(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """A whole distilled DeiT state dict (``DistilledVisionTransformer``) -> mmpretrain ``ImageClassifier``
    keys of CPVT (``with_dist_token=True``) + ``DeiTClsHead``: ``head`` / ``head_dist`` ->
    ``head.layers.head`` / ``head.layers.head_dist``."""
    heads = {f'head.layers.{k}': v for k, v in state_dict.items() if k.startswith(('head.', 'head_dist.'))}
    return {**{'backbone.' + k: v for k, v in convert_deit(state_dict).items()}, **heads}


def _deit_constructor(constructor: Optional[str], kwargs: dict) -> Tuple[dict, Optional[str]]:
    """The options ``constructor`` sets itself and the URL its ``pretrained=True`` loads."""
    if constructor is None:
        return {}, None
    if constructor not in DEIT_DISTILLED_CONSTRUCTORS:
        close = difflib.get_close_matches(constructor, list(DEIT_DISTILLED_CONSTRUCTORS), n=1, cutoff=0.0)
        raise ValueError(f'{constructor!r} is not a distilled DeiT constructor of the release (models.py); the '
                         f'closest is {close[0]!r}.')
    fixed, url = DEIT_DISTILLED_CONSTRUCTORS[constructor]
    twice = sorted(set(fixed) & set(kwargs))
    if twice:
        raise ValueError(f'{constructor} sets {twice} itself (the release raises TypeError when they are passed '
                         'again); leave them out or give the options without the constructor.')
    return fixed, url


def _distilled_checks(a: dict, url: Optional[str]) -> None:
    if a['hybrid_backbone'] is not None:
        raise ValueError('DeiT DistilledVisionTransformer hybrid_backbone builds a CNN feature-map embedding '
                         '(HybridEmbed), which CPVT does not have; only hybrid_backbone=None converts.')
    head_dim = int(a['embed_dim']) // int(a['num_heads'])
    if a['qk_scale'] is not None and a['qk_scale'] != head_dim ** -0.5:
        raise ValueError(f"DeiT DistilledVisionTransformer qk_scale={a['qk_scale']!r} is not CPVT's fixed "
                         f'head_dim ** -0.5 = {head_dim ** -0.5:g}; only qk_scale=None (or that value) converts.')
    if a['pretrained'] and url is None:
        raise ValueError('DeiT pretrained=True loads the file of one constructor; name it (constructor='
                         "'deit_tiny_distilled_patch16_224', ...) or set the backbone's init_cfg checkpoint to the "
                         'file.')


def deit_distilled_kwargs_to_ours(kwargs: dict, constructor: Optional[str] = None) -> Tuple[dict, Optional[dict]]:
    """The options of the DeiT release's distilled models -> ``(CPVT kwargs, DeiTClsHead kwargs or None)``.

    ``kwargs`` are those of ``DistilledVisionTransformer`` (timm 0.3.2 ``VisionTransformer``, the version the
    release pins), or, with ``constructor`` (``'deit_tiny_distilled_patch16_224'``, ...), those passed to that
    function, which adds its own (:data:`~.official_options.DEIT_DISTILLED_CONSTRUCTORS`). Checked against
    :data:`~.official_options.DEIT_DISTILLED`: every key is read there; ``drop_rate`` is CPVT's ``drop_rate``
    (after the position embedding and in every block, as in timm 0.3.2), ``num_classes`` the head's
    (``0``: no head), ``pretrained=True`` the constructor's file as the backbone's ``init_cfg``; a
    ``hybrid_backbone`` or a ``qk_scale`` other than ``head_dim ** -0.5`` is refused.
    """
    fixed, url = _deit_constructor(constructor, kwargs)
    a = checked_options('deit_distilled', {**fixed, **kwargs})
    _distilled_checks(a, url)
    dims = int(a['embed_dim'])
    backbone = dict(arch=dict(embed_dims=dims, num_layers=int(a['depth']), num_heads=int(a['num_heads']),
                              feedforward_channels=int(dims * a['mlp_ratio'])),
                    img_size=a['img_size'], patch_size=int(a['patch_size']), in_channels=int(a['in_chans']),
                    peg_positions=(), pos_embed_type='learnable', with_cls_token=True, with_dist_token=True,
                    out_type='cls_token', qkv_bias=bool(a['qkv_bias']), drop_rate=float(a['drop_rate']),
                    attn_drop_rate=float(a['attn_drop_rate']), drop_path_rate=float(a['drop_path_rate']),
                    norm_cfg=dict(type='LN', eps=layernorm_eps(a['norm_layer'])))
    if a['pretrained']:
        backbone['init_cfg'] = dict(type='Pretrained', checkpoint=url)
    head = dict(num_classes=int(a['num_classes']), in_channels=dims) if int(a['num_classes']) > 0 else None
    return backbone, head
