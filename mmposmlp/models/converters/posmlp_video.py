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
from .official_options import checked_options, flat_cfg


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
    """init_cfg loading: official keys converted, ours passed through; classifier keys left out (logged)."""
    if any(k.startswith('patch_embed1.') for k in state):
        state = convert_official_posmlp_video(state)
    head = [k for k in state if k.startswith(('head.', 'cls_head.'))]
    if head:
        print_log(f'PosMLPVideo: the classifier keys {head} of the checkpoint are not backbone weights; left unused',
                  logger='current')
    return {k: v for k, v in state.items() if not k.startswith(('head.', 'cls_head.'))}


def official_cfg_to_ours(cfg: dict) -> dict:
    """An official yacs cfg tree (a release config as loaded from its yaml, the tree of ``defaults.py``
    merged with one, or a test vector's ``arch_json``) -> our constructor kwargs.

    The keys are checked against :data:`~.official_options.POSMLP_VIDEO` (``POSMLP_VIDEO``, ``MODEL`` and
    ``DATA`` key by key, other sections as a whole): unknown keys are refused naming the closest known
    one; the keys ``PosMLP_Video`` ignores are accepted and logged in one line (e.g. ``SEGMENT_DIM``,
    ``T_STRIDE``, ``MLP_RATIOS``, read only by the release's other network ``PosMLP_Video_32``; ``SHIFT``,
    whose layers' shift size is fixed to 0); read keys absent from ``cfg`` take their ``defaults.py``
    values. ``MODEL.MODEL_NAME`` must name ``PosMLP_Video``. ``TRANSITIONS[i] = False`` removes the
    downsampling before stage ``i + 1`` when the channels stay; when they change, the official
    ``Downsample`` ignores its patch size and still halves the map, as ours does.
    """
    a = checked_options('posmlp_video', flat_cfg(cfg))
    name = a['MODEL.MODEL_NAME']
    if name == 'PosMLP_Video_32':
        raise ValueError("official MODEL.MODEL_NAME='PosMLP_Video_32' is the release's MorphMLP network "
                         '(slowfast/models/posmlp_32.py: MorphFC token mixing over SEGMENT_DIM), which has no '
                         "counterpart here; only MODEL_NAME='PosMLP_Video' (slowfast/models/posmlp.py) converts.")
    if name != 'PosMLP_Video':
        raise ValueError(f"official MODEL.MODEL_NAME={name!r} does not build the PosMLP-Video network; set "
                         "MODEL_NAME='PosMLP_Video' (what every PosMLP-Video release config names).")
    dims, depths = list(a['POSMLP_VIDEO.EMBED_DIMS']), list(a['POSMLP_VIDEO.LAYERS'])
    if len(depths) != 4 or len(dims) != 4:
        raise ValueError(f'the official PosMLP_Video has exactly 4 stages; LAYERS/EMBED_DIMS have '
                         f'{len(depths)}/{len(dims)}')
    transitions = list(a['POSMLP_VIDEO.TRANSITIONS'])
    wins = [[t, w, w] for t, w in zip(a['WIN_SIZE_T'], a['WIN_SIZE'])]
    return dict(arch=dict(embed_dims=dims, depths=depths, mlp_ratio=2, groups=list(a['POSGAMMA']), window_sizes=wins),
                in_channels=int(a['DATA.INPUT_CHANNEL_NUM'][0]),  # the model reads the first pathway only
                downsamples=[bool(transitions[i]) or dims[i] != dims[i + 1] for i in range(3)],
                block_type='PoTGU+PoSGU', gate_type='glrpe', drop_path_rate=float(a['POSMLP_VIDEO.DROP_DEPTH_RATE']))


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
