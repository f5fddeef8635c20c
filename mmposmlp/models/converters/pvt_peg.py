"""Twins-PCPVT, PVT v1 and PCPVT checkpoints of other libraries and the official constructor options ->
:class:`~mmposmlp.models.PVTPEG`.

Layouts: official Twins ``CPVTV2`` / timm ``twins``, official PVT v1 (github.com/whai362/PVT), mmdet
``PyramidVisionTransformer`` (v1), mmpretrain ``PCPVT``. :func:`checkpoint_filter_fn` is the entry used
when loading; :func:`official_arch_to_ours` / :func:`official_pvt_v1_arch_to_ours` map the official
constructor options.
"""
import fnmatch
import re
from typing import Dict, Optional, Sequence

import torch
import torch.nn as nn
from mmengine.logging import print_log

from .official_options import checked_options, layernorm_eps


def _official_key(k: str) -> Optional[str]:
    """Official Twins ``CPVTV2`` / timm ``twins`` key -> PVTPEG key (None: not a backbone key)."""
    m = re.match(r'patch_embeds\.(\d+)\.proj\.(.*)', k)
    if m:
        return f'patch_embeds.{m[1]}.projection.{m[2]}'
    if re.match(r'patch_embeds\.\d+\.norm\.', k):
        return k
    m = re.match(r'blocks\.(\d+)\.(\d+)\.(.*)', k)
    if m:
        rest = m[3].replace('mlp.fc1.', 'ffn.fc1.').replace('mlp.fc2.', 'ffn.fc2.')
        return f'stages.{m[1]}.{m[2]}.{rest}'
    m = re.match(r'pos_block\.(\d+)\.(.*)', k)
    if m:
        return f'pegs.{m[1]}.{m[2]}'
    m = re.match(r'norm_list\.(\d+)\.(.*)', k)
    if m:  # the official detection/segmentation backbone's extra_norm
        return f'norm{m[1]}.{m[2]}'
    if k.startswith('norm.'):
        return 'norm3.' + k[5:]
    return None


def _mmpretrain_key(k: str) -> Optional[str]:
    """mmpretrain ``PCPVT`` key (without 'backbone.') -> PVTPEG key."""
    if k.startswith('patch_embeds.'):
        return k
    m = re.match(r'position_encodings\.(\d+)\.proj\.(weight|bias)', k)
    if m:
        return f'pegs.{m[1]}.proj.0.{m[2]}'
    m = re.match(r'stages\.(\d+)\.(\d+)\.(.*)', k)
    if m:
        rest = m[3].replace('ffn.layers.0.0.', 'ffn.fc1.').replace('ffn.layers.1.', 'ffn.fc2.')
        return f'stages.{m[1]}.{m[2]}.{rest}'
    m = re.match(r'norm_after_stage(\d+)\.(.*)', k)
    if m:
        return f'norm{m[1]}.{m[2]}'
    return None


def _pvt_v1_key(k: str) -> Optional[str]:
    """Official PVT v1 (github.com/whai362/PVT ``PyramidVisionTransformer``, classification and
    detection/segmentation copies) key -> PVTPEG key (None: not a backbone key)."""
    m = re.match(r'patch_embed(\d+)\.(proj|norm)\.(.*)', k)
    if m:
        return f'patch_embeds.{int(m[1]) - 1}.{"projection" if m[2] == "proj" else "norm"}.{m[3]}'
    m = re.match(r'pos_embed(\d+)$', k)
    if m:
        return f'pos_embeds.{int(m[1]) - 1}.pos_embed'
    m = re.match(r'block(\d+)\.(\d+)\.(.*)', k)
    if m:
        rest = m[3].replace('mlp.fc1.', 'ffn.fc1.').replace('mlp.fc2.', 'ffn.fc2.')
        return f'stages.{int(m[1]) - 1}.{m[2]}.{rest}'
    if k.startswith('norm.'):
        return 'norm3.' + k[5:]
    if k == 'cls_token':
        return k
    return None


def _convert_mmdet_pvt(state: Dict[str, torch.Tensor], ignore_keys: Sequence[str]):
    """mmdet ``PyramidVisionTransformer`` (v1; ``layers.i.{0: patch embed, 1: [pos_embed,] blocks,
    2: norm}``, fused ``attn.attn.in_proj`` = [q; kv], 1x1-conv FFN) -> PVTPEG keys.
    Returns (converted, unknown keys, ignored keys)."""
    with_pos = any(re.match(r'layers\.\d+\.1\.0\.pos_embed$', k) for k in state)
    if any('.ffn.layers.1.' in k for k in state):
        raise ValueError('this mmdet PyramidVisionTransformer checkpoint has a depthwise conv in its FFN '
                         '(use_conv_ffn, PVT v2): PVTPEG has the plain PVT v1 FFN only')
    out, unknown, ignored = {}, [], []
    for k, v in state.items():
        nk = None
        m = re.match(r'layers\.(\d+)\.0\.(projection|norm)\.(.*)', k)
        if m:
            nk = f'patch_embeds.{m[1]}.{m[2]}.{m[3]}'
        m = re.match(r'layers\.(\d+)\.1\.0\.pos_embed$', k)
        if m and with_pos:
            nk = f'pos_embeds.{m[1]}.pos_embed'
        m = re.match(r'layers\.(\d+)\.1\.(\d+)\.(.*)', k)
        if m and nk is None:
            i, j, rest = m[1], int(m[2]) - int(with_pos), m[3]
            pre = f'stages.{i}.{j}.'
            a = re.match(r'attn\.attn\.in_proj_(weight|bias)$', rest)
            f = re.match(r'ffn\.layers\.(0|3)\.(weight|bias)$', rest)
            if a:
                C = v.shape[0] // 3
                out[pre + f'attn.q.{a[1]}'], out[pre + f'attn.kv.{a[1]}'] = v[:C], v[C:]
                continue
            if f:
                out[pre + f'ffn.{"fc1" if f[1] == "0" else "fc2"}.{f[2]}'] = v.flatten(1) if v.dim() == 4 else v
                continue
            if rest.startswith('attn.attn.out_proj.'):
                nk = pre + 'attn.proj.' + rest[len('attn.attn.out_proj.'):]
            elif re.match(r'(norm1|norm2|attn\.sr|attn\.norm)\.', rest):
                nk = pre + rest
        m = re.match(r'layers\.(\d+)\.2\.(.*)', k)
        if m:
            nk = f'norm{m[1]}.{m[2]}'
        if nk is not None:
            out[nk] = v
        elif any(fnmatch.fnmatchcase(k, p) for p in ignore_keys):
            ignored.append(k)
        else:
            unknown.append(k)
    return out, unknown, ignored


def detect_pcpvt_layout(state: Dict[str, torch.Tensor]) -> str:
    """'official' (Twins/timm), 'pvt_v1' (official PVT v1), 'mmdet_pvt' (mmdet
    ``PyramidVisionTransformer``), 'mmpretrain' or 'mmposmlp' for a backbone-level state dict."""
    keys = list(state)
    if any(k.startswith(('blocks.', 'pos_block.')) for k in keys):
        return 'official'
    if any(re.match(r'(block|patch_embed|pos_embed)\d+[.]?', k) for k in keys):
        return 'pvt_v1'
    if any(k.startswith('layers.') for k in keys):
        return 'mmdet_pvt'
    if any(k.startswith(('position_encodings.', 'norm_after_stage')) or '.ffn.layers.' in k for k in keys):
        return 'mmpretrain'
    if any(k.startswith(('pegs.', 'stages.')) for k in keys):
        return 'mmposmlp'
    raise ValueError('checkpoint is neither an official Twins/timm PCPVT, an official or mmdet PVT v1, an mmpretrain '
                     f'PCPVT nor an mmposmlp PVTPEG state dict (first keys: {keys[:5]})')


def convert_pcpvt(state: Dict[str, torch.Tensor], ignore_keys: Sequence[str] = (),
                  dense: Optional[bool] = None) -> Dict[str, torch.Tensor]:
    """Backbone-level key conversion to :class:`PVTPEG`.

    Accepts official Twins ``CPVTV2`` / timm ``twins`` keys (``blocks.i.j``, ``pos_block.i.proj.0``,
    ``patch_embeds.i.proj``, final ``norm``), mmpretrain ``PCPVT`` keys (``stages.i.j``,
    ``position_encodings.i.proj``, ``ffn.layers.0.0``/``ffn.layers.1``, ``norm_after_stage{i}``)
    official PVT v1 keys (github.com/whai362/PVT: ``patch_embed{i}``, ``pos_embed{i}``,
    ``block{i}.j``, ``norm``, ``cls_token``), mmdet ``PyramidVisionTransformer`` (v1) keys
    (``layers.i.*``, fused ``in_proj`` split into ``q`` / ``kv``, 1x1-conv FFN weights flattened)
    and our own keys (returned unchanged). The classifier ``head.*`` is left out (see
    :func:`convert_pcpvt_head`); any other key with no place in :class:`PVTPEG` (e.g. a
    ``cls_token`` or the official segmentation backbone's ``norm_list.*``) raises, unless it
    matches one of the fnmatch patterns ``ignore_keys`` (then it is dropped and logged).

    ``dense``: the source is the official detection/segmentation ``CPVTV2``
    (``segmentation/gvt.py``, ``detection/gvt.py``), whose forward returns the four stage maps
    (``norm_list.i`` -> ``norm{i}`` with ``extra_norm``) and never uses its final ``norm``: that
    one is dropped (logged). ``None`` (default): dense exactly when ``norm_list.*`` is present.
    """
    layout = detect_pcpvt_layout(state)
    if layout == 'mmposmlp':
        return dict(state)
    fn = {'official': _official_key, 'pvt_v1': _pvt_v1_key, 'mmpretrain': _mmpretrain_key,
          'mmdet_pvt': lambda k: None}[layout]
    if dense is None:
        dense = layout == 'official' and any(k.startswith('norm_list.') for k in state)
    out, unknown, ignored = {}, [], []
    if layout == 'mmdet_pvt':
        out, unknown, ignored = _convert_mmdet_pvt(state, ignore_keys)
        state = {}
    if dense and layout == 'official':
        unused = [k for k in state if k.startswith('norm.')]
        if unused:
            print_log(f'PCPVT conversion: dropped the final norm {unused} that the official dense CPVTV2 never '
                      'applies', logger='current')
        state = {k: v for k, v in state.items() if not k.startswith('norm.')}
    for k, v in state.items():
        nk = fn(k)
        if nk is not None:
            out[nk] = v
        elif any(fnmatch.fnmatchcase(k, p) for p in ignore_keys):
            ignored.append(k)
        elif not k.startswith('head.'):
            unknown.append(k)
    if unknown:
        raise KeyError(f'{len(unknown)} keys of the {layout} PCPVT checkpoint have no place in PVTPEG: {unknown[:10]}'
                       f'{"..." if len(unknown) > 10 else ""}; drop them explicitly with ignore_keys (CLI: '
                       '--ignore-keys) if that is intended')
    if ignored:
        print_log(f'PCPVT conversion: dropped {len(ignored)} keys matching {list(ignore_keys)}: {ignored[:10]}',
                  logger='current')
    head = [k for k in state if k.startswith('head.') and fn(k) is None]
    if head:
        print_log(f'PCPVT conversion: the classifier keys {head} are not backbone weights (convert_pcpvt_head '
                  'maps them to an mmpretrain head)', logger='current')
    return out


def convert_pcpvt_head(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Classifier weights as mmpretrain ``LinearClsHead`` keys (``fc.weight``/``fc.bias``)."""
    out = {}
    for k, v in state.items():
        m = re.match(r'head\.(?:fc\.)?(weight|bias)$', k)
        if m:
            out[f'fc.{m[1]}'] = v
    return out



def drop_unused_cls_slot(state: Dict[str, torch.Tensor], model: nn.Module) -> Dict[str, torch.Tensor]:
    """A PVT v1 classifier's last position table holds a class-token slot first; a backbone
    without class token (the dense PVT v1 of the official detection code and mmdet) drops it."""
    if model.pos_embeds is None or model.with_cls_token:
        return state
    key = f'pos_embeds.{model.num_stages - 1}.pos_embed'
    rows = model.pos_embeds[-1].pos_embed.shape[1]
    if key in state and state[key].dim() == 3 and state[key].shape[1] == rows + 1:
        state = dict(state)
        state[key] = state[key][:, 1:]
        print_log(f'PVTPEG: dropped the class-token slot of {key} (the backbone has no class token)',
                  logger='current')
    return state


def checkpoint_filter_fn(state: Dict[str, torch.Tensor], model: Optional[nn.Module] = None,
                         ignore_keys: Sequence[str] = ()) -> Dict[str, torch.Tensor]:
    """init_cfg loading: :func:`convert_pcpvt`, then (with ``model``) :func:`drop_unused_cls_slot`."""
    state = convert_pcpvt(state, ignore_keys)
    return drop_unused_cls_slot(state, model) if model is not None else state


def official_arch_to_ours(arch: dict, dense: bool = False) -> dict:
    """Official Twins ``CPVTV2`` constructor kwargs (``norm_layer`` as a string, e.g.
    ``"partial(nn.LayerNorm, eps=1e-6)"``) -> our :class:`PVTPEG` kwargs.

    ``dense=False``: the classifier (``gvt.py``): ``out_indices=(3,)`` and the final norm as
    ``norm3``; ``dense=True``: the detection/segmentation backbone, returning the 4 stage maps
    (``F4``: the last only), normed when ``extra_norm``. The keys are checked against
    :data:`~.official_options.TWINS_PCPVT`; every option is mapped or refused (``ValueError``
    naming it); no-ops accepted: ``img_size`` (only an assertion officially), ``num_classes``
    (the head). ``block_cls`` other than ``Block`` (``SBlock``/``GroupBlock``, the timm-block
    variants of Twins-SVT) is refused.
    """
    a = checked_options('twins_pcpvt', arch)
    if not dense and (a['F4'] or a['extra_norm']):
        raise ValueError('official F4/extra_norm exist only in the detection/segmentation CPVTV2: pass dense=True')
    if str(a['block_cls']).split('.')[-1] != 'Block':
        raise ValueError(f"official block_cls={a['block_cls']!r} is not supported: only Block (spatial-reduction "
                         'attention, PCPVT) has an equivalent here')
    eps = layernorm_eps(a['norm_layer'])
    n = len(a['depths'])
    ours = dict(arch=dict(depths=list(a['depths']), embed_dims=list(a['embed_dims']), num_heads=list(a['num_heads']),
                          mlp_ratios=list(a['mlp_ratios']), sr_ratios=list(a['sr_ratios'])),
                in_channels=int(a['in_chans']), patch_sizes=[int(a['patch_size'])] + [2] * (n - 1),
                qkv_bias=bool(a['qkv_bias']), qk_scale=a['qk_scale'], drop_rate=float(a['drop_rate']),
                attn_drop_rate=float(a['attn_drop_rate']), drop_path_rate=float(a['drop_path_rate']),
                norm_cfg=dict(type='LN', eps=eps))
    if dense:
        ours.update(out_indices=(n - 1, ) if a['F4'] else tuple(range(n)), norm_after_stage=bool(a['extra_norm']))
    else:
        ours.update(out_indices=(n - 1, ), norm_after_stage=[False] * (n - 1) + [True])
    return ours


def official_pvt_v1_arch_to_ours(arch: dict, dense: bool = False) -> dict:
    """Official PVT v1 ``PyramidVisionTransformer`` kwargs (``norm_layer`` as a string) -> our
    :class:`PVTPEG` kwargs: learnable per-stage tables at ``img_size``, no PEG; the classifier
    (``dense=False``) keeps the class token and returns it after the final norm (``norm3``), the
    detection/segmentation copy (``dense=True``) returns the four maps (``F4``: the last only).

    Refused, naming the option: ``num_stages`` other than 4 (the official code indexes stage 4
    by hand), ``patch_size`` other than 4 (the official tables of stages 2-4 are sized from
    ``img_size // 2**(i+1)``, which is the stage grid only with a 4x4 stem), an ``img_size`` not
    divisible by the total stride, ``norm_layer`` other than LayerNorm, ``F4`` / ``pretrained``
    without ``dense``, options outside :data:`~.official_options.PVT_V1`. No-ops: ``num_classes``
    (the head), ``pretrained=None``.
    """
    a = checked_options('pvt_v1', arch)
    if not dense and (a['F4'] or a['pretrained'] is not None):
        raise ValueError('official F4/pretrained exist only in the detection/segmentation PVT v1: pass dense=True')
    if a['pretrained'] is not None:
        raise ValueError("official pretrained=... loads a file inside the constructor: load it with init_cfg=dict("
                         "type='Pretrained', checkpoint=...) instead")
    if int(a['num_stages']) != 4 or len(a['depths']) != 4:
        raise ValueError(f"official PVT v1 num_stages={a['num_stages']} (depths {a['depths']}) is not supported: the "
                         'official model hard-codes stage 4 (class token, final norm)')
    if int(a['patch_size']) != 4:
        raise ValueError(f"official PVT v1 patch_size={a['patch_size']} is not supported: its stage 2-4 position "
                         'tables are sized img_size // 2**(i+1) // 2, the stage grid only with patch_size=4')
    if int(a['img_size']) % 32:
        raise ValueError(f"official PVT v1 img_size={a['img_size']} is not supported: it must be divisible by the "
                         'total stride 32 (non-divisible sizes give stage tables off the stage grids)')
    eps = layernorm_eps(a['norm_layer'])
    ours = dict(arch=dict(depths=list(a['depths']), embed_dims=list(a['embed_dims']), num_heads=list(a['num_heads']),
                          mlp_ratios=list(a['mlp_ratios']), sr_ratios=list(a['sr_ratios'])),
                in_channels=int(a['in_chans']), patch_sizes=[4, 2, 2, 2], qkv_bias=bool(a['qkv_bias']),
                qk_scale=a['qk_scale'], drop_rate=float(a['drop_rate']), attn_drop_rate=float(a['attn_drop_rate']),
                drop_path_rate=float(a['drop_path_rate']), norm_cfg=dict(type='LN', eps=eps),
                peg_after_block=None, pos_embed_type='learnable', pretrain_img_size=int(a['img_size']))
    if dense:
        ours.update(out_indices=(3, ) if a['F4'] else (0, 1, 2, 3))
    else:
        ours.update(with_cls_token=True, out_type='cls_token', out_indices=(3, ),
                    norm_after_stage=[False, False, False, True])
    return ours
