"""Official ``zhouds1918/PosMLP_Video`` checkpoints and yacs configs -> :class:`~mmposmlp.models.PosMLPVideo`;
image-mode weights inflated to a video model.

:func:`checkpoint_filter_fn` is the entry used when loading; :func:`official_cfg_to_ours` maps the
release's config tree.
"""
from typing import Dict

import torch
import torch.nn as nn
from mmengine.logging import print_log

from ..layers.relative_position import LearnedPositionMixing


def convert_official_posmlp_video(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Official ``zhouds1918/PosMLP_Video`` (SlowFast ``PosMLP_Video``) keys -> ours.

    * ``patch_embed1.proj{1,2}``/``norm{1,2}`` -> ``patch_embed.{0,1}.conv``/``.bn``;
      ``patch_embed{s+1}.proj/norm`` (s>=1) -> ``stages.s.downsample.conv/norm``.
    * ``blocks{s}.{j}.fc.encoder`` -> ``stages.{s-1}.blocks.{j}.spatial`` (PoSGU branch),
      ``t_fc.encoder`` -> ``.temporal`` (PoTGU); ``gate_unit.pos.window_relative_position_bias_table``
      -> ``gate_{s,t}.mixing.relative_position_table`` (same Swin index for space; the
      official temporal index is ``i - j + T - 1`` with i = query, which is ours in 1D);
      ``token_proj_n_bias`` (1, N, 1) -> ``token_bias`` (N,); index buffers dropped.
    * final ``norm`` -> ``norm3``; ``head.*`` kept (the tool maps it to ``cls_head.fc_cls``).
    """
    out = {}
    stages = sorted({int(k.split('.')[0][len('blocks'):]) for k in state if k.startswith('blocks')})
    last = (stages[-1] - 1) if stages else 3
    for key, value in state.items():
        if key.endswith('window_relative_position_index'):
            continue
        new = key
        if key.startswith('patch_embed1.'):
            rest = key[len('patch_embed1.'):]
            kind, param = rest.split('.', 1)
            idx = int(kind[-1]) - 1
            new = f'patch_embed.{idx}.{"conv" if kind.startswith("proj") else "bn"}.{param}'
        elif key.startswith('patch_embed'):
            head, rest = key.split('.', 1)
            s = int(head[len('patch_embed'):]) - 1
            new = f'stages.{s}.downsample.' + rest.replace('proj.', 'conv.', 1)
        elif key.startswith('blocks'):
            head, j, branch, rest = key.split('.', 3)
            s = int(head[len('blocks'):]) - 1
            name, gate = ('spatial', 'gate_s') if branch == 'fc' else ('temporal', 'gate_t')
            rest = rest[len('encoder.'):]
            if rest.startswith('gate_unit.pos.'):
                leaf = rest[len('gate_unit.pos.'):]
                if leaf == 'token_proj_n_bias':
                    rest, value = f'{gate}.token_bias', value.reshape(-1)
                elif leaf == 'window_relative_position_bias_table':
                    rest = f'{gate}.mixing.relative_position_table'
                else:
                    raise KeyError(f'unexpected official key {key}')
            new = f'stages.{s}.blocks.{j}.{name}.{rest}'
        elif key.startswith('norm.'):
            new = f'norm{last}.' + key[len('norm.'):]
        out[new] = value
    return out


def checkpoint_filter_fn(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    if any(k.startswith('patch_embed1.') for k in state):
        state = convert_official_posmlp_video(state)
    head = [k for k in state if k.startswith(('head.', 'cls_head.'))]
    if head:
        print_log(f'PosMLPVideo: the classifier keys {head} of the checkpoint are not backbone weights; left unused',
                  logger='current')
    return {k: v for k, v in state.items() if not k.startswith(('head.', 'cls_head.'))}


#: the cfg keys the official ``PosMLP_Video.__init__`` reads (section -> keys)
OFFICIAL_CFG_KEYS = {
    None: {'WIN_SIZE', 'WIN_SIZE_T', 'POSGAMMA'},
    'POSMLP_VIDEO': {'SHIFT', 'LAYERS', 'TRANSITIONS', 'EMBED_DIMS', 'PATCH_SIZE', 'DROP_DEPTH_RATE',
                     'PRETRAIN_PATH'},
    'MODEL': {'NUM_CLASSES'},
    'DATA': {'TRAIN_CROP_SIZE', 'INPUT_CHANNEL_NUM'},
}


def official_cfg_to_ours(cfg: dict) -> dict:
    """The official yacs cfg tree (test vector ``arch_json``) -> our constructor kwargs.

    Every key ``PosMLP_Video`` reads is mapped; unknown keys in ``POSMLP_VIDEO`` are refused
    (other sections of a SlowFast cfg, e.g. ``SOLVER``, are not model options). No-ops in the
    released code, accepted: ``SHIFT`` (its layers' shift size is hard-wired to 0, so
    ``SHIFT=True`` partitions the same windows), ``PATCH_SIZE`` and ``TRAIN_CROP_SIZE`` (unused
    by the modules), ``PRETRAIN_PATH`` (initialisation), ``NUM_CLASSES`` (the head).
    ``TRANSITIONS[i] = False`` removes the downsampling before stage ``i + 1`` when the channels
    stay; when they change, the official ``Downsample`` ignores its patch size and still
    halves the map, as ours does.
    """
    for section, known in OFFICIAL_CFG_KEYS.items():
        if section is None:
            continue
        unknown = sorted(set(cfg.get(section, {})) - known)
        if section == 'POSMLP_VIDEO' and unknown:
            raise ValueError(f'unknown official POSMLP_VIDEO options {unknown}; known: {sorted(known)}')
    pv = cfg['POSMLP_VIDEO']
    dims = list(pv['EMBED_DIMS'])
    n = len(pv['LAYERS'])
    if n != 4 or len(dims) != 4:
        raise ValueError(f'the official PosMLP_Video has exactly 4 stages; LAYERS/EMBED_DIMS have {n}/{len(dims)}')
    transitions = list(pv.get('TRANSITIONS', [True] * 4))
    wins = [(t, w, w) for t, w in zip(cfg['WIN_SIZE_T'], cfg['WIN_SIZE'])]
    in_channels = list(cfg.get('DATA', {}).get('INPUT_CHANNEL_NUM', [3]))
    if len(in_channels) != 1:
        raise ValueError(f'official INPUT_CHANNEL_NUM={in_channels} has several pathways; PosMLP_Video reads one')
    return dict(arch=dict(embed_dims=dims, depths=list(pv['LAYERS']), mlp_ratio=2,
                          groups=list(cfg['POSGAMMA']), window_sizes=[list(w) for w in wins]),
                in_channels=int(in_channels[0]),
                downsamples=[bool(transitions[i]) or dims[i] != dims[i + 1] for i in range(3)],
                block_type='PoTGU+PoSGU', gate_type='glrpe', drop_path_rate=float(pv.get('DROP_DEPTH_RATE', 0.1)))


def inflate_image_state_dict(state: Dict[str, torch.Tensor], video: nn.Module,
                             temporal_init: str = 'random') -> Dict[str, torch.Tensor]:
    """Image-mode backbone weights -> a full video state dict for ``video``.

    Every weight is taken from ``state`` except the units that span time, which the image
    model does not have (identity gates): they come from ``video``'s own initialisation
    (``'random'``, the paper: "randomly initialized") or are set to the identity
    (``'identity'``: offset-0 entry 1, others and the token bias 0, so the inflated model
    reproduces the image model frame by frame). Returns the state dict; the new keys are
    ``video.temporal_gate_keys()``.
    """
    if temporal_init not in ('random', 'identity'):
        raise ValueError(f"temporal_init must be 'random' or 'identity', got {temporal_init!r}")
    own = video.state_dict()
    new_keys = set(video.temporal_gate_keys())
    missing = [k for k in own if k not in state and k not in new_keys and not k.startswith('norm')]
    if missing:
        raise KeyError(f'the image checkpoint lacks {len(missing)} backbone weights (e.g. {missing[:5]}); '
                       'was it trained with the same arch (image_mode=True)?')
    out = {k: v for k, v in state.items() if k in own}
    for k in new_keys:
        value = own[k].clone()
        if temporal_init == 'identity':
            gate = video.get_submodule(k.rsplit('.mixing.', 1)[0] if '.mixing.' in k else k.rsplit('.', 1)[0])
            if not isinstance(gate.mixing, LearnedPositionMixing) or gate.mixing.token_fc:
                raise ValueError("temporal_init='identity' needs LRPE gates (gate_type 'glrpe'/'lrpe')")
            value.zero_()
            if k.endswith('relative_position_table'):
                value[gate.mixing.relative_index.diagonal()[0].item()] = 1.0
        out[k] = value
    for k in own:
        if k not in out:
            out[k] = own[k].clone()  # e.g. output norms the image model lacked
    return out
