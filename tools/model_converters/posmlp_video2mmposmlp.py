#!/usr/bin/env python
"""Convert an official PosMLP-Video checkpoint (github.com/zhouds1918/PosMLP_Video, SlowFast
``PosMLP_Video``) to an mmaction2 ``Recognizer3D`` checkpoint for ``mmposmlp.PosMLPVideo``.

    python tools/model_converters/posmlp_video2mmposmlp.py SSV1_S16.pyth \
        checkpoints/posmlp-video-s_16x1x1_sthv1-rgb_mmposmlp.pth

Input: a SlowFast checkpoint (``{'model_state': ...}``) or a raw state dict. Output
``{'state_dict': {'backbone.*', 'cls_head.fc_cls.*'}, 'meta': {...}}`` (``weights_only``
loadable). The official model is the S arch with the parallel PoTGU+PoSGU (V1) block, LRPE
gates and r_e = 2; its temporal window equals the training clip length (T is "baked in"):
our backbone resizes the temporal tables on load when a config uses another T.
Every source tensor is accounted for: the script fails on unknown keys, and
``--check-arch s`` (default) verifies that the result loads into ``PosMLPVideo(arch='s')``
with zero missing/unexpected keys (``--check-arch none`` for custom official configs).
``--official-cfg SSV1_MLP_S16.yaml`` verifies it against the model the release's own config
describes instead (every key of that config checked: unknown keys refused, ignored ones named).
"""
import argparse
import os
import os.path as osp
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.models.backbones.posmlp_video import PosMLPVideo  # noqa: E402
from mmposmlp.models.converters.posmlp_video import convert_official_posmlp_video, official_cfg_to_ours  # noqa: E402
from mmposmlp.models.checkpoints import extract_state_dict, load_state_dict_checked  # noqa: E402
from mmposmlp.utils.compat import safe_torch_load  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, trusted_checkpoints  # noqa: E402


def extract(ckpt, prefer_ema: bool = True):
    """The weights of a SlowFast (``model_state``), timm/DeiT/mmengine or bare checkpoint, EMA
    weights first when present (``prefer_ema``), DDP ``module.`` removed."""
    state = extract_state_dict(ckpt, prefer_ema=prefer_ema)
    return {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}


def convert(state):
    """Official state dict -> Recognizer3D keys (``backbone.*``, ``cls_head.fc_cls.*``)."""
    if not any(k.startswith('patch_embed1.') for k in state):
        raise ValueError('not an official PosMLP-Video state dict (no patch_embed1.* keys)')
    out = OrderedDict()
    for k, v in convert_official_posmlp_video(state).items():
        if k.startswith('head.'):
            out['cls_head.fc_cls.' + k[len('head.'):]] = v
        else:
            out['backbone.' + k] = v
    return out


def check(out, arch):
    backbone = {k[len('backbone.'):]: v for k, v in out.items() if k.startswith('backbone.')}
    t = backbone['stages.0.blocks.0.temporal.gate_t.token_bias'].numel()
    wins = [(t, 14, 14)] * 3 + [(t, 7, 7)]
    model = PosMLPVideo(arch=arch, window_sizes=wins)
    load_state_dict_checked(model, backbone, allowed_unexpected=(), source='converted checkpoint')
    return t


def check_official_cfg(out, cfg_path):
    """Load the converted backbone into the model of the release config ``cfg_path`` (yaml, read as data)."""
    import yaml
    with open(cfg_path) as f:
        cfg = yaml.safe_load(f)
    backbone = {k[len('backbone.'):]: v for k, v in out.items() if k.startswith('backbone.')}
    model = PosMLPVideo(**official_cfg_to_ours(cfg))
    load_state_dict_checked(model, backbone, allowed_unexpected=(), source='converted checkpoint')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='official PosMLP-Video checkpoint (.pyth/.pth)')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--check-arch', default='s', help="arch to verify against, or 'none'")
    parser.add_argument('--official-cfg', help="the release's config (yaml) the checkpoint was trained with: verify "
                        'against the model it describes instead of --check-arch')
    parser.add_argument('--no-ema', action='store_true',
                        help='take the trained weights when the file also holds EMA ones')
    add_trust_argument(parser)
    args = parser.parse_args(argv)
    with trusted_checkpoints([args.src] if args.trust_checkpoint else []):
        src = extract(safe_torch_load(args.src), prefer_ema=not args.no_ema)
    out = convert(src)
    t = out['backbone.stages.0.blocks.0.temporal.gate_t.token_bias'].numel()
    if args.official_cfg:
        check_official_cfg(out, args.official_cfg)
    elif args.check_arch != 'none':
        check(out, args.check_arch)
    if osp.dirname(args.dst):
        os.makedirs(osp.dirname(args.dst), exist_ok=True)
    torch.save(dict(state_dict=out, meta=dict(source=osp.basename(args.src), converter='posmlp_video2mmposmlp',
                                              clip_len=t)), args.dst)
    n_bb = sum(k.startswith('backbone.') for k in out)
    print(f'converted {len(src)} official tensors (index buffers dropped) -> {n_bb} backbone + '
          f'{len(out) - n_bb} head tensors; trained clip length T={t} -> {args.dst}')


if __name__ == '__main__':
    main()
