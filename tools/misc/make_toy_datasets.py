#!/usr/bin/env python
"""Write the toy datasets (COCO, ADE20K, Kinetics-400, ImageNet layouts) used by tests and the demo.

    python tools/misc/make_toy_datasets.py --out data/toy [--seed 0] [--which coco,ade20k,kinetics,imagenet]

The output is deterministic from the seed; see mmposmlp/datasets/toy.py for the formats.
"""
import argparse
import os.path as osp
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmposmlp.datasets.toy import ALL_DATASETS, make_toy_datasets  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', default='data/toy', help='output root (default: data/toy)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--which', default=','.join(ALL_DATASETS),
                        help=f'comma-separated subset of {",".join(ALL_DATASETS)}')
    args = parser.parse_args(argv)
    t0 = time.time()
    try:
        roots = make_toy_datasets(args.out, seed=args.seed, which=args.which)
    except ValueError as e:
        parser.error(str(e))
    for name, root in roots.items():
        print(f'{name:9s} -> {root}')
    print(f'done in {time.time() - t0:.1f} s')


if __name__ == '__main__':
    main()
