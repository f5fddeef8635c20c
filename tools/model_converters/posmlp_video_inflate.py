#!/usr/bin/env python
"""Inflate an image-pretrained PosMLP-Video checkpoint (``image_mode=True``, e.g. trained with
configs/posmlp_video/posmlp-video-s_8xb128_in1k.py) into a video checkpoint.

    python tools/model_converters/posmlp_video_inflate.py work_dirs/in1k/epoch_300.pth \
        checkpoints/posmlp-video-s_in1k-inflated_t16.pth --arch s --clip-len 16

Paper Sec. 3.4/4.2: the image model has the units that span time (PoTGU, PoSTGU) replaced by
identity gates; every other weight (stem, downsampling, LN/FC layers of all modules, PoSGU
tables) transfers as is, and "the relative position biases of PoTGU and PoSTGU will be
randomly initialized" (``--temporal-init random``, default). ``--temporal-init identity``
instead starts them as the identity mixing, so the inflated model reproduces the image model
frame by frame. The new keys are listed (stdout and ``meta['new_keys']``). The image
classifier head is dropped (video heads have other classes). Output:
``{'state_dict': {'backbone.*'}, 'meta': ...}``; use it with
``model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.')``.
"""
import argparse
import os
import os.path as osp
import sys

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.models.backbones.posmlp_video import PosMLPVideo  # noqa: E402
from mmposmlp.models.converters.posmlp_video import inflate_image_state_dict  # noqa: E402
from mmposmlp.models.checkpoints import load_checkpoint_file, strip_prefix  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, trusted_checkpoints  # noqa: E402


def inflate(state, arch='s', clip_len=16, block_type='PoTGU+PoSGU', parallel_version='v1',
            gate_type='glrpe', temporal_init='random', seed=0):
    """Image (mmpretrain classifier or bare backbone) state -> (video backbone state, new keys)."""
    state = strip_prefix(state, None)
    unused = [k for k in state if k.startswith(('head.', 'neck.', 'data_preprocessor.'))]
    if unused:
        print(f'left unused (not backbone weights): {unused}')
    state = {k: v for k, v in state.items() if not k.startswith(('head.', 'neck.', 'data_preprocessor.'))}
    base = PosMLPVideo.default_arch['window_sizes']
    wins = [(clip_len, h, w) for _, h, w in base]
    torch.manual_seed(seed)
    video = PosMLPVideo(arch=arch, block_type=block_type, parallel_version=parallel_version,
                        gate_type=gate_type, window_sizes=wins)
    video.init_weights()
    out = inflate_image_state_dict(state, video, temporal_init=temporal_init)
    unused = sorted(set(state) - set(out))
    if unused:
        raise KeyError(f'{len(unused)} image weights have no place in the video model (e.g. {unused[:5]}): '
                       'wrong --arch/--block-type?')
    return out, video.temporal_gate_keys()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='image_mode PosMLPVideo checkpoint')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--arch', default='s')
    parser.add_argument('--clip-len', type=int, default=16, help='temporal window T of the video model')
    parser.add_argument('--block-type', default='PoTGU+PoSGU')
    parser.add_argument('--parallel-version', default='v1')
    parser.add_argument('--gate-type', default='glrpe')
    parser.add_argument('--temporal-init', default='random', choices=['random', 'identity'])
    parser.add_argument('--seed', type=int, default=0)
    add_trust_argument(parser)
    args = parser.parse_args(argv)
    with trusted_checkpoints([args.src] if args.trust_checkpoint else []):
        src = load_checkpoint_file(args.src)
    out, new_keys = inflate(src, args.arch, args.clip_len, args.block_type,
                            args.parallel_version, args.gate_type, args.temporal_init, args.seed)
    if osp.dirname(args.dst):
        os.makedirs(osp.dirname(args.dst), exist_ok=True)
    torch.save(dict(state_dict={'backbone.' + k: v for k, v in out.items()},
                    meta=dict(source=osp.basename(args.src), converter='posmlp_video_inflate',
                              clip_len=args.clip_len, temporal_init=args.temporal_init, new_keys=new_keys)),
               args.dst)
    print(f'inflated {len(out) - len(new_keys)} image tensors; {len(new_keys)} temporal-unit tensors newly '
          f'initialised ({args.temporal_init}):')
    for k in new_keys:
        print('  new:', k)
    print(f'-> {args.dst}')


if __name__ == '__main__':
    main()
