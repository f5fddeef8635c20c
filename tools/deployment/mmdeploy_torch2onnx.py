#!/usr/bin/env python
"""Export a detector config through mmdeploy 1.3.1's own ``torch2onnx`` (end-to-end graph with NMS).

    PYTHONPATH=MMDEPLOY_DIR python tools/deployment/mmdeploy_torch2onnx.py DEPLOY_CFG MODEL_CFG CHECKPOINT IMAGE \\
        [--work-dir work_dirs/mmdeploy] [--out end2end.onnx]

mmdeploy does not install next to our pinned stack (it pins protobuf<=3.20.2 and pulls onnx 1.17),
so install it without dependencies into its own directory and put that on PYTHONPATH:
``pip install --no-deps --target MMDEPLOY_DIR mmdeploy==1.3.1 aenum multiprocess dill``.
mmdeploy 1.3.1 was written for the TorchScript exporter; since torch 2.9 ``torch.onnx.export`` defaults
to the torch.export one, so this wrapper pins ``dynamo=False`` for mmdeploy's call. Checkpoints are read
with ``weights_only=True`` (mmengine's own classes allowed). Prints the graph's outputs after one
onnxruntime run.
"""
import argparse
import functools
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv=None):
    parser = argparse.ArgumentParser(description='mmdeploy torch2onnx with mmposmlp backbones')
    parser.add_argument('deploy_cfg')
    parser.add_argument('model_cfg')
    parser.add_argument('checkpoint')
    parser.add_argument('image', help='an image file (the test pipeline resizes it)')
    parser.add_argument('--work-dir', default='work_dirs/mmdeploy')
    parser.add_argument('--out', default='end2end.onnx')
    args = parser.parse_args(argv)
    from mmposmlp.engine.entry import UserError
    try:
        from mmdeploy.apis import torch2onnx
    except ImportError as err:
        raise UserError(f'mmdeploy is not importable ({err}): pip install --no-deps --target DIR mmdeploy==1.3.1 '
                        'aenum multiprocess dill, then run with PYTHONPATH=DIR.') from err
    import torch

    import mmposmlp.models  # noqa: F401  (registers mmposmlp.* types)
    from mmposmlp.utils.compat import allow_mmengine_checkpoints
    export = torch.onnx.export
    torch.onnx.export = functools.partial(export, dynamo=False)  # what mmdeploy 1.3.1 was written for
    try:
        with allow_mmengine_checkpoints():
            torch2onnx(args.image, args.work_dir, args.out, args.deploy_cfg, args.model_cfg, args.checkpoint,
                       device='cpu')
    finally:
        torch.onnx.export = export
    import onnxruntime as ort
    path = osp.join(args.work_dir, args.out)
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    inp = session.get_inputs()[0]
    print(f'exported {path}: input {inp.name} {inp.shape}, outputs {[o.name for o in session.get_outputs()]}')


if __name__ == '__main__':
    from mmposmlp.engine.entry import run_cli
    sys.exit(run_cli(main))
