#!/usr/bin/env python
"""Test (evaluate) a checkpoint with a config of mmdet, mmseg, mmaction2 or mmpretrain (mmdet 3.3.0 interface).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE] [--show] [--show-dir DIR]
                         [--wait-time 2] [--cfg-options k=v ...] [--launcher ...] [--tta] [--trust-checkpoint]
"""
import argparse
import os
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# name of the visualization hook and its keys, per library
VIS_HOOKS = {
    'mmdet': dict(draw='draw', out_dir='test_out_dir'),
    'mmseg': dict(draw='draw', out_dir=None),  # mmseg saves through visualizer.save_dir
    'mmaction': dict(draw='enable', out_dir='out_dir'),
    'mmpretrain': dict(draw='enable', out_dir='out_dir'),
}


def parse_args(argv=None):
    from mmengine.config import DictAction

    from mmposmlp.utils.safe_load import add_trust_argument
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the directory to save the file containing evaluation metrics')
    parser.add_argument('--out', type=str,
                        help='dump predictions to a pickle file (mmseg: a directory of prediction PNGs)')
    parser.add_argument('--show', action='store_true', help='show prediction results')
    parser.add_argument('--show-dir', help='directory where painted images will be saved')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override settings of the config, key=value (xxx=yyy format)')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    parser.add_argument('--tta', action='store_true', help='test-time augmentation (needs tta_model in config)')
    add_trust_argument(parser)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def trigger_visualization_hook(cfg, args, scope):
    from mmposmlp.engine.entry import UserError
    hook = cfg.get('default_hooks', {}).get('visualization')
    if not hook:
        raise UserError('--show/--show-dir need default_hooks.visualization in the config (the library\'s '
                        'visualization hook, e.g. DetVisualizationHook / SegVisualizationHook / VisualizationHook).')
    keys = VIS_HOOKS[scope]
    hook[keys['draw']] = True
    if args.show:
        hook['show'] = True
        hook['wait_time'] = args.wait_time
    if args.show_dir:
        if keys['out_dir'] == 'out_dir':  # mmpretrain/mmaction: relative to cwd upstream; we use work_dir like mmdet
            hook['out_dir'] = args.show_dir if osp.isabs(args.show_dir) else osp.join(cfg.work_dir, args.show_dir)
        elif keys['out_dir']:
            hook[keys['out_dir']] = args.show_dir
        else:
            cfg.visualizer['save_dir'] = args.show_dir
    return cfg


def add_dump_metric(cfg, out, scope):
    if scope == 'mmseg':  # mmseg's IoUMetric writes prediction PNGs to output_dir
        evaluators = cfg.test_evaluator if isinstance(cfg.test_evaluator, list) else [cfg.test_evaluator]
        for ev in evaluators:
            ev['output_dir'] = out
            ev['keep_results'] = True
        return
    if not out.endswith(('.pkl', '.pickle')):
        from mmposmlp.engine.entry import UserError
        raise UserError(f'--out {out}: the output file must be a .pkl/.pickle file.')
    dump = dict(type='DumpDetResults', out_file_path=out) if scope == 'mmdet' else \
        dict(type='mmengine.DumpResults', out_file_path=out)
    if isinstance(cfg.test_evaluator, (list, tuple)):
        cfg.test_evaluator = list(cfg.test_evaluator) + [dump]
    else:
        cfg.test_evaluator = [cfg.test_evaluator, dump]


def main(argv=None):
    args = parse_args(argv)
    from mmposmlp.engine.entry import (UserError, build_runner, load_config, prepare_launch,
                                       trusted_checkpoint_context)
    if not osp.isfile(args.config):
        raise UserError(f'config file {args.config} does not exist.')
    if '://' not in args.checkpoint and not osp.isfile(args.checkpoint):
        raise UserError(f'checkpoint {args.checkpoint} does not exist.')
    cfg, scope = load_config(args.config, args.cfg_options, args.work_dir)
    cfg.load_from = args.checkpoint

    if args.show or args.show_dir:
        trigger_visualization_hook(cfg, args, scope)  # after work_dir is final
    if args.tta:
        if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
            raise UserError('--tta needs tta_model and tta_pipeline in the config.')
        cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
        cfg.tta_model.module = cfg.model
        cfg.model = cfg.tta_model
    if args.out is not None:
        add_dump_metric(cfg, args.out, scope)

    prepare_launch(cfg, args.launcher)
    with trusted_checkpoint_context(args.trust_checkpoint, [args.checkpoint]):
        runner = build_runner(cfg, 'test')  # mmposmlp.Runner: pre-flight checks, data-only checkpoint loading
        runner.test()


if __name__ == '__main__':
    from mmposmlp.engine.entry import run_cli
    sys.exit(run_cli(main))
