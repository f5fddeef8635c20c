"""Draw the phase-difference maps of Wave-MLP (paper Fig. 4) for one image.

For a chosen PATM (default: the last block of stages 3 and 4, as in Fig. 4), the phase
``theta`` (B, C, H, W) estimated for every token is read, and for every token t and each of
the K x K tokens n of the window around it we draw ``mean_c cos(theta_c(n) - theta_c(t))``
(the cosine of the phase difference, averaged over channels). The (i, j)-th K x K patch of the
mosaic therefore shows how token (i, j) relates to its neighbours: 1 = same phase (the waves
enhance each other, Eq. 4-5), -1 = opposite phase. Positions outside the image are blank.

    python tools/analysis/wavemlp_phase_maps.py demo.jpg --arch t \
        --checkpoint checkpoints/wavemlp-t_in1k_mmposmlp.pth --out phase_maps.png

Without ``--checkpoint`` the model keeps its random initialisation (useful only to try the tool).
``--checkpoint`` accepts our converted files and official Wave-MLP checkpoints.
"""
import argparse
import json
import os.path as osp
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def load_image(path, size):
    from PIL import Image
    img = Image.open(path).convert('RGB').resize((size, size), Image.BICUBIC)
    arr = np.asarray(img, dtype=np.float32) / 255.
    x = (torch.from_numpy(arr).permute(2, 0, 1) - torch.tensor(IMAGENET_MEAN)[:, None, None]) \
        / torch.tensor(IMAGENET_STD)[:, None, None]
    return arr, x[None]


def phase_difference_mosaic(theta: torch.Tensor, window: int = 7) -> np.ndarray:
    """``theta`` (C, H, W) -> (H*K, W*K) mosaic of mean_c cos(theta(n) - theta(t)), NaN outside."""
    C, H, W = theta.shape
    K, p = window, window // 2
    cos, sin = torch.cos(theta)[None], torch.sin(theta)[None]
    # cos(a - b) = cos a cos b + sin a sin b; unfold gives the K*K neighbours of every token
    ncos = F.unfold(cos, K, padding=p).view(C, K * K, H * W)
    nsin = F.unfold(sin, K, padding=p).view(C, K * K, H * W)
    val = (ncos * cos.view(C, 1, H * W) + nsin * sin.view(C, 1, H * W)).mean(0)
    inside = F.unfold(torch.ones(1, 1, H, W), K, padding=p).view(K * K, H * W) > 0
    val = torch.where(inside, val, torch.full_like(val, float('nan')))
    # (K, K, H, W) -> (H, K, W, K) -> (H*K, W*K)
    return val.view(K, K, H, W).permute(2, 0, 3, 1).reshape(H * K, W * K).numpy()


def collect_phases(model, x, stages, block=-1, branch='h'):
    """Run ``model`` on ``x`` and return {stage: theta (C, H, W)} of the chosen PATM."""
    mixers = {}
    for s in stages:
        blocks = model.stages[s]
        mixers[s] = blocks[block if block < 0 else min(block, len(blocks) - 1)].token_mixer
        mixers[s].keep_phases = True
    with torch.no_grad():
        model.forward_stages(x)
    out = {}
    for s, m in mixers.items():
        theta_h, theta_w = m.last_phases
        out[s] = (theta_h if branch == 'h' else theta_w)[0].float()
        m.keep_phases, m.last_phases = False, None
    return out


def build_model(arch, checkpoint=None, phase_mode=None):
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    from mmposmlp.models.converters.wave_mlp import checkpoint_filter_fn
    from mmposmlp.models.checkpoints import (load_checkpoint_file, load_state_dict_checked,
                                             strip_prefix)
    model = WaveMLP(arch, out_indices=(3,), phase_mode=phase_mode)
    if checkpoint:
        state = checkpoint_filter_fn(strip_prefix(load_checkpoint_file(checkpoint), None))
        load_state_dict_checked(model, state, source=checkpoint)
    return model.eval()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('image')
    parser.add_argument('--arch', default='t',
                        help='t-dw, t, s, m, b (default t) or a JSON arch dict')
    parser.add_argument('--phase-mode', default=None, choices=['fc', 'depthwise'])
    parser.add_argument('--checkpoint', default=None,
                        help='converted or official Wave-MLP weights (random weights if omitted)')
    parser.add_argument('--stages', type=int, nargs='+', default=[2, 3],
                        help='0-based stages (Fig. 4 shows the 3rd and 4th: 2 3)')
    parser.add_argument('--block', type=int, default=-1, help='block index in the stage')
    parser.add_argument('--branch', choices=['h', 'w'], default='h', help='which phase branch')
    parser.add_argument('--window', type=int, default=7, help='window K of the maps')
    parser.add_argument('--size', type=int, default=224, help='input resolution')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', default='phase_maps.png')
    args = parser.parse_args(argv)

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    torch.manual_seed(args.seed)
    arch = json.loads(args.arch) if args.arch.lstrip().startswith('{') else args.arch
    model = build_model(arch, args.checkpoint, args.phase_mode)
    for s in args.stages:
        if not 0 <= s < len(model.stages):
            parser.error(f'--stages must be in 0..{len(model.stages) - 1}, got {s}')
    rgb, x = load_image(args.image, args.size)
    phases = collect_phases(model, x, args.stages, args.block, args.branch)

    fig, axes = plt.subplots(1, 1 + len(phases), figsize=(4 * (1 + len(phases)), 4.2))
    axes[0].imshow(rgb)
    axes[0].set_title('input')
    for ax, (s, theta) in zip(axes[1:], phases.items()):
        mosaic = phase_difference_mosaic(theta, args.window)
        im = ax.imshow(mosaic, cmap='RdBu_r', vmin=-1, vmax=1, interpolation='nearest')
        H, W = theta.shape[1:]
        ax.set_title(f'stage {s + 1} ({H}x{W} tokens), cos(phase diff.)')
        for k in range(1, H):
            ax.axhline(k * args.window - 0.5, color='k', lw=0.2)
        for k in range(1, W):
            ax.axvline(k * args.window - 0.5, color='k', lw=0.2)
        fig.colorbar(im, ax=ax, fraction=0.046)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f'Wave-MLP-{args.arch if isinstance(arch, str) else "custom"} phase differences ({args.branch} branch, '
                 f'{"random weights" if not args.checkpoint else osp.basename(args.checkpoint)})')
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    print(f'saved {args.out}')
    return args.out


if __name__ == '__main__':
    main()
