#!/usr/bin/env python
"""Draw the learned token-mixing maps of a PosMLP checkpoint (paper Fig. 4).

For every block (rows) and a choice of channel groups (columns) it shows the mixing weights
``P_g[m, :]`` of one query token ``m`` over its window: for GQPE forms the Gaussian around the
query, for LRPE forms the learned table gathered around it.

    python tools/analysis/posmlp_mixing_maps.py CKPT out.png [--arch tiny] [--stage 2] [--groups 0 1 2 3]
    python tools/analysis/posmlp_mixing_maps.py random out.png --arch tiny   # random init
"""
import argparse
import os.path as osp
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', '..'))
from mmposmlp.models.backbones.posmlp import PosMLP  # noqa: E402
from mmposmlp.models.checkpoints import load_pretrained  # noqa: E402


def mixing_maps(model: PosMLP, stage: int, query=None):
    """Return a list (per block) of (G, h, w) maps for the query token (default: centre)."""
    maps = []
    for block in model.stages[stage].blocks:
        gate = block.gate
        h, w = gate.window
        m = query if query is not None else (h // 2) * w + w // 2
        with torch.no_grad():
            matrix, _ = gate.mixing.matrices(None)
        maps.append(matrix[:, m].reshape(-1, h, w).float())
    return maps


def main():
    parser = argparse.ArgumentParser(description='PosMLP token-mixing maps (Fig. 4)')
    parser.add_argument('checkpoint', help="mmposmlp or official checkpoint, or 'random'")
    parser.add_argument('out', help='output PNG')
    parser.add_argument('--arch', default='tiny')
    parser.add_argument('--gate-type', default='ggqpe')
    parser.add_argument('--stage', type=int, default=2)
    parser.add_argument('--groups', type=int, nargs='+', default=[0, 1, 2, 3, 4, 5])
    parser.add_argument('--max-blocks', type=int, default=6)
    parser.add_argument('--query', type=int, default=None, help='query token index (default: centre)')
    args = parser.parse_args()

    model = PosMLP(arch=args.arch, gate_type=args.gate_type)
    model.init_weights()
    if args.checkpoint != 'random':
        load_pretrained(model, args.checkpoint, allowed_missing=['norm*'])
    maps = mixing_maps(model, args.stage, args.query)[:args.max_blocks]
    groups = [g for g in args.groups if g < maps[0].shape[0]]
    fig, axes = plt.subplots(len(maps), len(groups), figsize=(1.6 * len(groups), 1.6 * len(maps)), squeeze=False)
    for r, blk in enumerate(maps):
        for c, g in enumerate(groups):
            ax = axes[r][c]
            ax.imshow(blk[g].numpy(), cmap='viridis')
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f'group {g}', fontsize=8)
            if c == 0:
                ax.set_ylabel(f'block {r}', fontsize=8)
    fig.suptitle(f'PosMLP stage {args.stage} token mixing ({args.gate_type})', fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f'saved {args.out}')


if __name__ == '__main__':
    main()
