#!/usr/bin/env python
"""Convert an official PosMLP checkpoint (github.com/Zhicaiwww/PosMLP) to mmposmlp.

    python tools/model_converters/posmlp2mmposmlp.py PosMLP_T.pth checkpoints/posmlp-t_in1k_mmposmlp.pth

The official release evaluates the EMA weights (``state_dict_ema``); they are taken when
present unless ``--no-ema``. Models built with the official QPE options ``symmetric=False`` or
``absolute_bias=False`` need ``--official-arch '{"symmetric": false, ...}'`` (the official
constructor kwargs, JSON; build our model with ``official_arch_to_ours`` of the same dict):
their weights look like the defaults' but mean something else. The output is an mmpretrain
``ImageClassifier`` checkpoint (``backbone.*``, ``head.fc.*``) that ``configs/posmlp/posmlp-*_in1k.py`` loads with zero
missing/unexpected keys; detection/segmentation configs load its ``backbone.`` part.
"""
import argparse
import os
import os.path as osp
import sys

import torch

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', '..'))

import json  # noqa: E402

from mmposmlp.models.converters.posmlp import (convert_official_posmlp, official_arch_to_ours,  # noqa: E402
                                               official_convert_kwargs)
from mmposmlp.models.checkpoints import load_checkpoint_file  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, trusted_checkpoints  # noqa: E402


def convert(src: str, use_ema: bool = True, official_arch: dict = None) -> dict:
    state = load_checkpoint_file(src, prefer_ema=use_ema)
    if not any(k.startswith('levels.') for k in state):
        raise SystemExit(f'{src} does not look like an official PosMLP checkpoint (no "levels.*" keys)')
    kwargs = {}
    if official_arch:
        official_arch_to_ours(official_arch)  # refuses options we cannot express
        kwargs = official_convert_kwargs(official_arch)
    converted = convert_official_posmlp(state, **kwargs)
    out = {}
    for k, v in converted.items():
        out[('head.fc.' + k[len('head.'):]) if k.startswith('head.') else 'backbone.' + k] = v
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('src', help='official checkpoint (.pth / .pth.tar)')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--no-ema', action='store_true', help='use state_dict instead of state_dict_ema')
    parser.add_argument('--official-arch', default=None,
                        help='the official PosMLP constructor kwargs as JSON (a string or a .json file)')
    add_trust_argument(parser)
    args = parser.parse_args()
    arch = None
    if args.official_arch:
        text = args.official_arch
        if osp.isfile(text):
            with open(text) as f:
                text = f.read()
        arch = json.loads(text)
    with trusted_checkpoints([args.src] if args.trust_checkpoint else []):
        state = convert(args.src, use_ema=not args.no_ema, official_arch=arch)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    torch.save({'state_dict': state, 'meta': {'converted_from': osp.basename(args.src),
                                              'converter': 'posmlp2mmposmlp'}}, args.dst)
    print(f'saved {len(state)} tensors to {args.dst}')


if __name__ == '__main__':
    main()
