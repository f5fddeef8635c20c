"""Convert an official Wave-MLP checkpoint to mmposmlp.

Official weights: github.com/huawei-noah/Efficient-AI-Backbones (wavemlp_pytorch), release files
``WaveMLP_T_dw.pth.tar``, ``WaveMLP_T.pth.tar``, ``WaveMLP_S.pth.tar``, ``WaveMLP_M.pth.tar``
(timm ``CheckpointSaver`` files with ``state_dict`` and possibly ``state_dict_ema``).

    python tools/model_converters/wavemlp2mmposmlp.py WaveMLP_T.pth.tar \
        checkpoints/wavemlp-t_in1k_mmposmlp.pth [--no-ema]

The output ``{'state_dict': ..., 'meta': ...}`` has mmpretrain ``ImageClassifier`` keys
(``backbone.*`` for ``mmposmlp.WaveMLP`` with ``out_indices=(3,)``, ``head.fc.*`` for
``LinearClsHead``): use it as ``load_from`` of ``configs/wavemlp/wavemlp-*_8xb128_in1k.py`` or as
``init_cfg=dict(type='Pretrained', checkpoint=...)`` of the backbone in the dense configs.

The EMA weights (``state_dict_ema``) are taken when the file has them, unless ``--no-ema``.
A whole official mmdet/mmseg checkpoint (``backbone.*`` from the ``fork_feat`` model, ``neck.*``,
``*_head.*``) is accepted too: its backbone is converted (``norm0/2/4/6`` -> ``norm0-3``) and
every other key is kept under its own name (mmdet/mmseg 2.x names, e.g. for ``load_from``).
"""
import argparse
import os
import os.path as osp
import sys

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp, is_official_wavemlp  # noqa: E402
from mmposmlp.models.checkpoints import extract_state_dict  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, load_checkpoint  # noqa: E402


def load_official(path, trust_file=False):
    """Load a timm checkpoint as data (its pickled ``argparse.Namespace`` of training args becomes a dict);
    ``trust_file`` unpickles it without restrictions."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path!r} does not exist')
    return load_checkpoint(path, trusted=True if trust_file else None)


def convert(state):
    """Official classifier or whole detector/segmentor state dict -> ours (see the module doc)."""
    if not any(k.startswith('backbone.') for k in state):
        return convert_official_wavemlp(state)
    backbone = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    if not is_official_wavemlp(backbone):
        raise ValueError('the backbone.* keys are not official Wave-MLP (WaveNet network.*) keys')
    out = convert_official_wavemlp(backbone)
    out.update({k: v for k, v in state.items() if not k.startswith('backbone.')})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='official checkpoint (.pth / .pth.tar)')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--no-ema', action='store_true',
                        help='take state_dict even when the file has state_dict_ema (the default takes the EMA)')
    add_trust_argument(parser)
    args = parser.parse_args(argv)

    state = extract_state_dict(load_official(args.src, args.trust_checkpoint), prefer_ema=not args.no_ema,
                               source=args.src)
    state = {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}
    converted = convert(state)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    torch.save({'state_dict': converted,
                'meta': {'source': osp.basename(args.src), 'converter': 'wavemlp2mmposmlp',
                         'ema': not args.no_ema}}, args.dst)
    n = sum(v.numel() for k, v in converted.items() if not k.endswith('num_batches_tracked')
            and not k.endswith(('running_mean', 'running_var')))
    print(f'converted {len(converted)} tensors ({n / 1e6:.2f}M parameters) -> {args.dst}')


if __name__ == '__main__':
    main()
