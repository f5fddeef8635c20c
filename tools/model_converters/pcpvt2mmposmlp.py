"""Convert Twins-PCPVT (official / timm), mmpretrain ``PCPVT`` or PVT v1 (official / mmdet) weights to ``PVTPEG``.

Usage::

    python tools/model_converters/pcpvt2mmposmlp.py pcpvt_small.pth \
        checkpoints/pvt-peg-s-gap_in1k_mmposmlp.pth

Input layouts (detected automatically):
  * official Twins ``CPVTV2`` (``pcpvt_{small,base,large}_v0``) and timm ``twins_pcpvt_*``:
    ``patch_embeds.i.proj``, ``blocks.i.j.*``, ``pos_block.i.proj.0``, ``norm``, ``head``;
  * mmpretrain ``ImageClassifier`` with ``PCPVT`` backbone: ``backbone.patch_embeds.i.projection``,
    ``backbone.position_encodings.i.proj``, ``backbone.stages.i.j.*`` (``ffn.layers.0.0`` /
    ``ffn.layers.1``), ``backbone.norm_after_stage3``, ``head.fc``.
  * official PVT v1 (github.com/whai362/PVT ``pvt_tiny.pth`` ...): ``patch_embed{i}``,
    ``pos_embed{i}``, ``block{i}.j.*``, ``norm``, ``cls_token``, ``head`` -> ``PVTPEG`` with
    ``pos_embed_type='learnable'``, ``with_cls_token=True``, ``out_type='cls_token'``,
    ``peg_after_block=None`` (``official_pvt_v1_arch_to_ours``);
  * mmdet ``PyramidVisionTransformer`` (v1; ``backbone.layers.i.*`` of a detector file).
Output: an mmpretrain ``ImageClassifier`` state dict (``backbone.*`` for ``mmposmlp.PVTPEG``,
``head.fc.*`` for ``LinearClsHead``) saved as ``{'state_dict': ..., 'meta': ...}``; dense
configs load it with ``init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.')``.

Note: mmpretrain's PCPVT pads non-divisible inputs ('corner' padding, ceil sizes) and uses
LN eps 1e-6 in the spatial-reduction norm; ``PVTPEG`` follows the official model (floor, 1e-5).
Converted mmpretrain weights therefore give identical outputs only at divisible input sizes
and with ``sr_norm_cfg=dict(type='LN', eps=1e-6)`` (the source model's spatial-reduction eps;
see configs/cpvt/README.md).

Wrappers: timm/DeiT/mmengine/mmdet/mmseg files (``state_dict``/``state_dict_ema``, ``model``/
``model_ema``, DDP ``module.``); the EMA weights are taken when present unless ``--no-ema``.
Whole detector/segmentor files: their ``backbone.*`` is converted; every other key (e.g.
``neck.*``, ``decode_head.*``, a ``cls_token``, the segmentation backbone's ``norm_list.*``)
must be dropped explicitly with ``--ignore-keys PATTERN ...`` (fnmatch), else the script fails
listing them.
"""
import argparse
import fnmatch
import os
import os.path as osp
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.models.converters.pvt_peg import convert_pcpvt, convert_pcpvt_head, detect_pcpvt_layout  # noqa: E402
from mmposmlp.models.checkpoints import load_checkpoint_file, strip_prefix  # noqa: E402
from mmposmlp.utils.safe_load import add_trust_argument, trusted_checkpoints  # noqa: E402


def convert(state, ignore_keys=()):
    """Whole-classifier conversion: returns (state_dict, layout). Keys outside the backbone and
    the classifier head raise unless they match ``ignore_keys``."""
    head_src = {k: v for k, v in state.items() if k.startswith('head.')}
    if any(k.startswith('backbone.') for k in state):
        backbone_src = strip_prefix(state, 'backbone.')
        rest = [k for k in state if not k.startswith(('backbone.', 'head.'))
                and not any(fnmatch.fnmatchcase(k, p) for p in ignore_keys)]
        if rest:
            raise KeyError(f'{len(rest)} keys are neither backbone.* nor head.*: {rest[:10]}; drop them explicitly '
                           'with --ignore-keys (e.g. "neck.*" "decode_head.*") if that is intended')
    else:
        backbone_src = {k: v for k, v in state.items() if not k.startswith('head.')}
    layout = detect_pcpvt_layout(backbone_src)
    out = OrderedDict()
    for k, v in convert_pcpvt(backbone_src, ignore_keys).items():
        out['backbone.' + k] = v
    for k, v in convert_pcpvt_head(head_src).items():
        out['head.' + k] = v
    if not out:
        raise ValueError('no PCPVT weights found in the source checkpoint')
    return out, layout


def infer_depths(state):
    """Blocks per stage of a converted state dict (``backbone.stages.i.j.*``)."""
    depths = {}
    for k in state:
        parts = k.split('.')
        if parts[:2] == ['backbone', 'stages']:
            i, j = int(parts[2]), int(parts[3])
            depths[i] = max(depths.get(i, 0), j + 1)
    return [depths[i] for i in sorted(depths)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='official Twins/timm or mmpretrain PCPVT checkpoint')
    parser.add_argument('dst', help='output path')
    parser.add_argument('--no-ema', action='store_true', help='take the trained weights, not the EMA ones')
    parser.add_argument('--ignore-keys', nargs='+', default=(), metavar='PATTERN',
                        help='fnmatch patterns of source keys to drop on purpose (they are listed)')
    add_trust_argument(parser)
    args = parser.parse_args(argv)
    with trusted_checkpoints([args.src] if args.trust_checkpoint else []):
        state = load_checkpoint_file(args.src, prefer_ema=not args.no_ema)
    out, layout = convert(state, tuple(args.ignore_keys))
    dirname = osp.dirname(args.dst)
    if dirname:
        os.makedirs(dirname, exist_ok=True)
    torch.save(dict(state_dict=out, meta=dict(source=osp.basename(args.src), source_layout=layout,
                                              converter='pcpvt2mmposmlp')), args.dst)
    n_bb = sum(k.startswith('backbone.') for k in out)
    depths = infer_depths(out)
    archs = {(2, 2, 2, 2): 'tiny', (3, 4, 6, 3): 'small', (3, 4, 18, 3): 'medium', (3, 8, 27, 3): 'large'}
    arch = archs.get(tuple(depths), 'a custom arch dict')
    if any(k.startswith('backbone.pos_embeds.') for k in out):
        arch += " with pos_embed_type='learnable', peg_after_block=None"
    if 'backbone.cls_token' in out:
        arch += ", with_cls_token=True, out_type='cls_token'"
    print(f'converted {layout} checkpoint: {n_bb} backbone tensors, {len(out) - n_bb} head tensors '
          f'({len(state)} source tensors), depths {depths} -> PVTPEG arch {arch!r}; saved {args.dst}')


if __name__ == '__main__':
    main()
