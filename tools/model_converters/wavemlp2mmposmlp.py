"""Convert an official Wave-MLP checkpoint to mmposmlp.

Official weights: github.com/huawei-noah/Efficient-AI-Backbones (wavemlp_pytorch), release files
``WaveMLP_T_dw.pth.tar``, ``WaveMLP_T.pth.tar``, ``WaveMLP_S.pth.tar``, ``WaveMLP_M.pth.tar``
(timm ``CheckpointSaver`` files with ``state_dict`` and possibly ``state_dict_ema``).

    python tools/model_converters/wavemlp2mmposmlp.py WaveMLP_T.pth.tar \
        checkpoints/wavemlp-t_in1k_mmposmlp.pth [--ema]

The output ``{'state_dict': ..., 'meta': ...}`` has mmpretrain ``ImageClassifier`` keys
(``backbone.*`` for ``mmposmlp.WaveMLP`` with ``out_indices=(3,)``, ``head.fc.*`` for
``LinearClsHead``): use it as ``load_from`` of ``configs/wavemlp/wavemlp-*_8xb128_in1k.py`` or as
``init_cfg=dict(type='Pretrained', checkpoint=...)`` of the backbone in the dense configs.
"""
import argparse
import os
import os.path as osp
import sys

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.models.backbones.wave_mlp import convert_official_wavemlp  # noqa: E402
from mmposmlp.models.checkpoints import extract_state_dict  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, load_checkpoint  # noqa: E402


def load_official(path, trust_file=False):
    """Load a timm checkpoint as data (its pickled ``argparse.Namespace`` of training args becomes a dict);
    ``trust_file`` unpickles it without restrictions."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path!r} does not exist')
    return load_checkpoint(path, trusted=True if trust_file else None)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='official checkpoint (.pth / .pth.tar)')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--ema', action='store_true',
                        help='take state_dict_ema when the file has one')
    add_trust_argument(parser)
    args = parser.parse_args(argv)

    state = extract_state_dict(load_official(args.src, args.trust_checkpoint), prefer_ema=args.ema)
    converted = convert_official_wavemlp(state)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    torch.save({'state_dict': converted,
                'meta': {'source': osp.basename(args.src), 'converter': 'wavemlp2mmposmlp',
                         'ema': bool(args.ema)}}, args.dst)
    n = sum(v.numel() for k, v in converted.items() if not k.endswith('num_batches_tracked')
            and not k.endswith(('running_mean', 'running_var')))
    print(f'converted {len(converted)} tensors ({n / 1e6:.2f}M parameters) -> {args.dst}')


if __name__ == '__main__':
    main()
