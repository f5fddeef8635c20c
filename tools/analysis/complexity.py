"""Parameters and FLOPs of every shipped config, next to the papers' (reported) numbers, written as
the model-zoo markdown table (docs/model_zoo.md).

FLOP counter: ``fvcore.nn.FlopCountAnalysis`` with **1 multiply-add = 1 FLOP** (the papers'
convention). Inputs/parts counted: classification 224x224 whole model; segmentation 512x512
backbone+neck+heads; detection 800x1280 backbone+neck (heads hold data-dependent proposal code);
video 16x224x224 (24 frames for 24x4x1 configs) backbone+head. Reported numbers: the table
:data:`tools/analysis/params_flops.py` ``REPORTED`` (transcribed from the papers), else a family's
``configs/<family>/metafile.yml`` entry whose ``Parameters``/``FLOPs`` line is commented
``# reported``. A config that fails to build or trace is listed with ``n/a`` and the reason.

Usage::

    python tools/analysis/complexity.py                       # all configs -> docs/model_zoo.md
    python tools/analysis/complexity.py --pattern 'posmlp-t*' --out -     # print only
    python tools/analysis/complexity.py --no-flops            # parameters only (fast)
    # count only new configs, keep every other row of docs/model_zoo.md as it is
    python tools/analysis/complexity.py --configs configs/posmlp/paper_tables --merge

The markdown ends in a hidden block of the unrounded measurements; ``--merge`` reads them back, so the "d"
columns of the rows it keeps are computed from them, not from the 2-decimal cells. A kept row of a file
written before that block existed keeps its printed "d" cells, and is counted again when the papers'
numbers it is compared with have changed.
"""
import argparse
import json
import os.path as osp
import sys
import warnings

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from tools.analysis import params_flops as C  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--configs', default='configs', help='root folder searched recursively')
    p.add_argument('--pattern', nargs='+', default=['*'], help='globs on the config file name (any of them)')
    p.add_argument('--include-toy', action='store_true', help='also the toy configs (configs/*/toy)')
    p.add_argument('--no-flops', action='store_true')
    p.add_argument('--max-pixels', type=int, default=None,
                   help='skip FLOPs when the input has more pixels (per frame x frames) than this')
    p.add_argument('--max-matrix-gib', type=float, default=2.0,
                   help='skip FLOPs when the gating units materialise more (G, N, N) matrix memory than this')
    p.add_argument('--resume', action='store_true', help='reuse the rows already in --json (written after '
                   'every config), count only the missing configs')
    p.add_argument('--out', default='docs/model_zoo.md', help="markdown file, '-' for stdout")
    p.add_argument('--json', help='also write the rows (with skipped-op lists) here')
    p.add_argument('--merge', action='store_true', help='keep the rows already in --out for the configs '
                   'under configs/ that this run does not count (count new configs only), with their unrounded '
                   'measurements')
    args = p.parse_args(argv)
    warnings.filterwarnings('ignore')
    files = [f for f in sorted({f for pattern in args.pattern for f in C.find_configs(args.configs, pattern)})
             if args.include_toy or 'toy' not in f.split(osp.sep)]
    if not files:
        sys.exit(f'no configs matching {args.pattern!r} under {args.configs}')
    done = {}
    if args.resume and args.json and osp.isfile(args.json):
        with open(args.json) as fh:
            done = {r['config']: r for r in json.load(fh)}
    rows, cache = [], {}
    note = f'{len(files)} configs under `{args.configs}/`' + (' (toy configs excluded)' if not args.include_toy else '')

    def count(f, i, n):
        if f in done:
            row = done[f]
            row['reported'] = C.reported_for(f)  # the table of papers' numbers may have changed
        else:
            row = C.config_complexity(f, flops=not args.no_flops, cache=cache, max_input_pixels=args.max_pixels,
                                      max_matrix_gib=args.max_matrix_gib)
        rows.append(row)
        print(f"[{i + 1}/{n}] {f}: params {C._fmt(row['params_m'])}M, GFLOPs {C._fmt(row['gflops'])} "
              f"{row.get('note', '')} ({row.get('seconds', 0)}s)", flush=True)
        if args.json:  # after every config: a crash (e.g. out of memory) loses nothing
            with open(args.json, 'w') as fh:
                json.dump(rows, fh, indent=1, default=str)

    for i, f in enumerate(files):
        count(f, i, len(files))
    if args.merge:
        if args.out == '-' or not osp.isfile(args.out):
            sys.exit(f'--merge needs an existing --out markdown file, got {args.out!r}')
        everything = [f for f in C.find_configs('configs') if args.include_toy or 'toy' not in f.split(osp.sep)]
        counted = {osp.normpath(r['config']) for r in rows}
        with open(args.out) as fh:
            kept = [r for r in C.rows_from_markdown(fh.read(), everything) if osp.normpath(r['config']) not in counted]
        for r in kept:
            r['reported'] = C.reported_for(r['config'])
        # rows of an older file (no unrounded measurements) whose papers' numbers changed: count them again
        stale = [r['config'] for r in kept if C.needs_recount(r)]
        for i, f in enumerate(stale):
            print(f'{f}: the papers\' numbers changed, its kept row has only rounded measurements', flush=True)
            count(f, i, len(stale))
        rows = [r for r in kept if r['config'] not in stale] + rows
        note = f'{len(rows)} configs under `configs/`' + (' (toy configs excluded)' if not args.include_toy else '')
    md = C.markdown_table(rows, header_note=note)
    if args.out == '-':
        print(md)
    else:
        with open(args.out, 'w') as fh:
            fh.write(md)
        print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
