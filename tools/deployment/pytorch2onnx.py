#!/usr/bin/env python
"""Export a config's model (or its backbone) to ONNX and check it in onnxruntime against PyTorch.

    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT --shape H W [--dynamic] [--part backbone]
    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT --clip T H W [--dynamic]      (Recognizer3D)
        [--out model.onnx] [--batch 1] [--opset 18] [--check-shape H W | T H W ...] [--cfg-options k=v ...]

The graph is the model's tensor path before post-processing (mmdeploy's "partition" graphs; see
mmposmlp/deployment/onnx_export.py). The check runs both on the export input and, with --dynamic,
on a second size (or the --check-shape sizes) and fails (exit 1) when the largest difference
exceeds 1e-4 relative to the largest output (fp32).
"""
import argparse
import os
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def parse_args(argv=None):
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Export a model to ONNX and check it in onnxruntime')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint of the whole model (tools/train.py output)')
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'), help='image input size')
    size.add_argument('--clip', type=int, nargs=3, metavar=('T', 'H', 'W'), help='video clip size')
    parser.add_argument('--dynamic', action='store_true',
                        help='symbolic height and width (and frames): one graph for every input size')
    parser.add_argument('--part', choices=['model', 'backbone'], default='model',
                        help='export the whole tensor path (default) or only the backbone')
    parser.add_argument('--out', help='output file (default: work_dirs/onnx/<config stem>[-backbone].onnx)')
    parser.add_argument('--batch', type=int, default=1, help='batch size of the graph (static)')
    parser.add_argument('--opset', type=int, default=18, help='ONNX opset')
    parser.add_argument('--check-shape', type=int, nargs='+', action='append', default=None,
                        help='extra input size(s) to check a --dynamic graph at (H W, or T H W for clips)')
    parser.add_argument('--tolerance', type=float, default=1e-4,
                        help='largest allowed difference relative to the largest output (default 1e-4)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override settings of the config, key=value (xxx=yyy format)')
    return parser.parse_args(argv)


def default_check_size(size):
    """A second size for a dynamic graph, with other padding than ``size`` at every stride up to 32x a
    window of 14 (H + 76, W + 44; clips also T - 5 or T + 5)."""
    if len(size) == 3:
        t, h, w = size
        return (t - 5 if t > 8 else t + 5, h + 76, w + 44)
    h, w = size
    return (h + 76, w + 44)


def main(argv=None):
    args = parse_args(argv)
    import torch

    from mmposmlp.deployment import ExportError, build_export_model, check_onnxruntime, export_onnx
    size = tuple(args.clip or args.shape)
    if min(size) < 1 or args.batch < 1:
        raise ExportError(f'sizes must be positive, got {"--clip" if args.clip else "--shape"} {size} and '
                          f'--batch {args.batch}.')
    model = build_export_model(args.config, args.checkpoint, args.cfg_options)
    from mmposmlp.deployment.onnx_export import model_kind
    video = model_kind(model) == 'recognizer3d'
    if video and args.shape:
        raise ExportError(f'{type(model).__name__} takes video clips: give --clip T H W instead of --shape H W.')
    if not video and args.clip:
        raise ExportError(f'{type(model).__name__} takes images: give --shape H W instead of --clip T H W.')
    checks = [tuple(s) for s in (args.check_shape or [])]
    for s in checks:
        if len(s) != len(size):
            raise ExportError(f'--check-shape {" ".join(map(str, s))} needs {len(size)} values like the export size.')
    if checks and not args.dynamic:
        raise ExportError('--check-shape needs --dynamic: a static graph runs only at the export size.')
    if args.dynamic and not checks:
        checks = [default_check_size(size)]
    out = args.out or osp.join('work_dirs', 'onnx', osp.splitext(osp.basename(args.config))[0]
                               + ('-backbone' if args.part == 'backbone' else '') + '.onnx')
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)

    channels = 3
    torch.manual_seed(0)
    example = torch.randn(args.batch, channels, *size)
    wrapper, names = export_onnx(out, model, example, part=args.part, dynamic=args.dynamic, opset=args.opset)
    dims = ('frames, height, width' if video else 'height, width') if args.dynamic else 'none (static)'
    print(f'exported {out}: input "input" {tuple(example.shape)}, outputs {names}, opset {args.opset}, '
          f'dynamic axes: {dims}')
    inputs = [example] + [torch.randn(args.batch, channels, *s) for s in checks]
    results = check_onnxruntime(out, wrapper, inputs, tolerance=args.tolerance)
    for r in results:
        print(r)
    failed = [r for r in results if not r.ok]
    if failed:
        raise ExportError(f'the ONNX graph differs from PyTorch by {failed[0].relative:.2e} relative at input '
                          f'{failed[0].shape} (tolerance {args.tolerance:.0e}); {out} is kept for inspection.')


if __name__ == '__main__':
    from mmposmlp.engine.entry import run_cli
    sys.exit(run_cli(main))
