"""Convert an official LVT checkpoint (github.com/Chenglin-Yang/LVT) to mmposmlp.

Official weights: the ImageNet ``lvt_imagenet.pth.tar`` (``lvt_cls``: the backbone plus two class-attention
blocks, a class token, ``norm``, ``head`` and ``aux_head``; a timm ``CheckpointSaver`` file with ``state_dict``
and possibly ``state_dict_ema``), or the segmentation / panoptic checkpoints (mmseg / mmdet 2.x, whose
``backbone.backbone.*`` is the ``with_cls_head=False`` LVT with its ``downstream_norms``).

    python tools/model_converters/lvt2mmposmlp.py lvt_imagenet.pth.tar \
        checkpoints/lvt-r2_in1k_mmposmlp.pth [--no-ema]

The output ``{'state_dict': ..., 'meta': ...}`` has mmpretrain ``ImageClassifier`` keys: ``backbone.*`` for
``mmposmlp.LVT`` and ``head.*`` for ``mmposmlp.LVTClassAttentionHead`` (``configs/imlp/lvt-r*_8xb128_in1k.py``
``load_from``). A whole segmentor / detector file keeps its other keys (``decode_head.*``, ``neck.*``, ...) under
their own names, its backbone converted to ``backbone.*`` of ``mmposmlp.LVT(out_norm=True)``.
The EMA weights are taken when the file has them, unless ``--no-ema``; every key is converted or refused.
"""
import argparse
import os
import os.path as osp
import sys

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.models.converters.lvt import convert_official_lvt, is_official_lvt  # noqa: E402
from mmposmlp.models.checkpoints import extract_state_dict  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, load_checkpoint  # noqa: E402


def convert(state):
    """Official ``lvt_cls`` / dense state dict, or a whole official segmentor / detector -> ours."""
    state = {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}
    if is_official_lvt(state):
        return convert_official_lvt(state)
    inner = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    if not inner or not is_official_lvt(inner):
        raise ValueError('not an official LVT checkpoint: found neither backbone.<stage>.0.proj.weight (lvt_cls / '
                         'with_cls_head=False) nor backbone.backbone.<stage>.0.proj.weight (a whole segmentor or '
                         'detector)')
    out = convert_official_lvt(inner)
    out.update({k: v for k, v in state.items() if not k.startswith('backbone.')})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='official checkpoint (.pth / .pth.tar)')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--no-ema', action='store_true',
                        help='take state_dict even when the file has state_dict_ema (the default takes the EMA)')
    add_trust_argument(parser)
    args = parser.parse_args(argv)
    if not osp.isfile(args.src):
        raise SystemExit(f'{args.src!r} does not exist; give the path of the official LVT checkpoint.')
    ckpt = load_checkpoint(args.src, trusted=True if args.trust_checkpoint else None)
    converted = convert(extract_state_dict(ckpt, prefer_ema=not args.no_ema, source=args.src))
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    torch.save({'state_dict': converted,
                'meta': {'source': osp.basename(args.src), 'converter': 'lvt2mmposmlp', 'ema': not args.no_ema}},
               args.dst)
    n = sum(v.numel() for k, v in converted.items() if not k.endswith('num_batches_tracked'))
    print(f'converted {len(converted)} tensors ({n / 1e6:.2f}M parameters) -> {args.dst}')


if __name__ == '__main__':
    main()
