#!/usr/bin/env python
"""Draw the pairwise token relation matrices learned by PoSGU and PoTGU (PosMLP-Video Fig. 7).

For the first and the last block of the network (or ``--blocks``), and a choice of channel
groups (columns), it shows the spatial relation matrix ``R_S^g`` (HW x HW, tokens of one
window, row-major) and the temporal one ``R_T^g`` (T x T) - the matrices the gating units
multiply their input with (Eq. 3-4): LRPE tables gathered by the relative-position index.

    python tools/analysis/posmlp_video_relations.py CKPT out.png --config CONFIG [--groups 0 1]
    python tools/analysis/posmlp_video_relations.py CKPT out.png --arch s        # official/our ckpt
    python tools/analysis/posmlp_video_relations.py random out.png --arch s      # random init
"""
import argparse
import os.path as osp
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', '..'))
from mmposmlp.models.backbones.posmlp_video import PosMLPVideo  # noqa: E402
from mmposmlp.models.converters.posmlp_video import checkpoint_filter_fn  # noqa: E402
from mmposmlp.models.checkpoints import load_pretrained  # noqa: E402


def build_backbone(config=None, arch='s', window_t=None):
    if config is not None:
        from mmengine.config import Config
        kwargs = dict(Config.fromfile(config).model.backbone)
        kwargs.pop('type', None)
        kwargs.pop('init_cfg', None)
    else:
        kwargs = dict(arch=arch)
    if window_t is not None:
        wins = kwargs.get('window_sizes') or PosMLPVideo.default_arch['window_sizes']
        kwargs['window_sizes'] = [(window_t, w[1], w[2]) for w in wins]
    return PosMLPVideo(**kwargs)


def all_blocks(model):
    return [(f'stage{i + 1}.block{j}', b) for i, s in enumerate(model.stages) for j, b in enumerate(s.blocks)]


def relation_matrices(model, blocks=None, groups=(0, 1)):
    """``[(title, kind, (len(groups), N, N) tensor)]`` for the PoSGU/PoTGU units of ``blocks``
    (indices into the flat block list; default first and last)."""
    flat = all_blocks(model)
    idx = blocks if blocks is not None else sorted({0, len(flat) - 1})
    out = []
    for i in idx:
        name, block = flat[i]
        for mod in block.children():
            for axes, kind in (('hw', 'spatial'), ('t', 'temporal')):
                if not hasattr(mod, 'axes') or axes not in mod.axes:
                    continue
                gate = mod.gate(axes)
                if not hasattr(gate, 'mixing'):
                    continue  # identity gate (image mode)
                with torch.no_grad():
                    matrix, _ = gate.mixing.matrices(None)
                sel = [g for g in groups if g < matrix.shape[0]]
                out.append((f'{name} {kind}', kind, matrix[sel].float().cpu(), sel))
    return out


def draw(mats, path):
    cols = max(len(m[3]) for m in mats)
    fig, axes = plt.subplots(len(mats), cols, figsize=(3 * cols, 3 * len(mats)), squeeze=False)
    for r, (title, _, mat, groups) in enumerate(mats):
        for c in range(cols):
            ax = axes[r][c]
            ax.axis('off')
            if c < len(groups):
                ax.imshow(mat[c].numpy(), cmap='viridis')
                ax.set_title(f'{title} g{groups[c]}', fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description='PosMLP-Video relation matrices (Fig. 7)')
    parser.add_argument('checkpoint', help="checkpoint (ours or official), or 'random'")
    parser.add_argument('out', help='output PNG')
    parser.add_argument('--config', default=None, help='config whose model.backbone to build')
    parser.add_argument('--arch', default='s')
    parser.add_argument('--window-t', type=int, default=None, help='temporal window (trained clip length)')
    parser.add_argument('--blocks', type=int, nargs='+', default=None, help='flat block indices (default first, last)')
    parser.add_argument('--groups', type=int, nargs='+', default=[0, 1])
    args = parser.parse_args(argv)
    model = build_backbone(args.config, args.arch, args.window_t)
    if args.checkpoint == 'random':
        model.init_weights()
    else:
        load_pretrained(model, args.checkpoint, converter=checkpoint_filter_fn,
                        allowed_missing=[f'norm{i}.*' for i in range(3)])
    mats = relation_matrices(model, args.blocks, args.groups)
    if not mats:
        raise SystemExit('no PoSGU/PoTGU units found (image-mode or joint PoSTGU model?)')
    draw(mats, args.out)
    print(f'wrote {len(mats)} relation rows x {len(args.groups)} groups -> {args.out}')


if __name__ == '__main__':
    main()
