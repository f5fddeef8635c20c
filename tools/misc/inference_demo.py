#!/usr/bin/env python
"""Detection/instance-segmentation demo: an image in, a picture with boxes and masks out.

    python tools/misc/inference_demo.py CONFIG CHECKPOINT IMAGE [--out out.jpg] [--score-thr 0.3]

A thin wrapper around mmdet's ``DetInferencer``; importing mmposmlp makes mmengine read checkpoints as data
(see docs/checkpoints.md).
"""
import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..', '..'))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('image')
    parser.add_argument('--out', default='work_dirs/demo/prediction.jpg')
    parser.add_argument('--score-thr', type=float, default=0.3)
    parser.add_argument('--device', default='cpu')
    args = parser.parse_args()

    import mmposmlp.models  # noqa: F401  (registers mmposmlp.* types)
    from mmdet.apis import DetInferencer

    inferencer = DetInferencer(model=args.config, weights=args.checkpoint, device=args.device,
                               show_progress=False)
    out_dir = osp.dirname(osp.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    result = inferencer(args.image, pred_score_thr=args.score_thr, return_vis=True, no_save_vis=True)
    import mmcv
    mmcv.imwrite(result['visualization'][0][..., ::-1], args.out)
    pred = result['predictions'][0]
    kept = [s for s in pred['scores'] if s >= args.score_thr]
    print(f'{len(kept)} detections with score >= {args.score_thr}; picture saved to {args.out}')


if __name__ == '__main__':
    main()
