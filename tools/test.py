#!/usr/bin/env python
"""Test (evaluate) a checkpoint with an mmdet / mmseg / mmaction2 / mmpretrain config
(mmdet 3.3.0's interface).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out results.pkl] [--show] [--show-dir DIR]
                         [--wait-time 2] [--cfg-options k=v ...] [--launcher ...] [--tta]

Checkpoints written by our own training load on torch >= 2.6 with safe loading kept on
(mmengine's classes are allow-listed, see mmposmlp/utils/compat.py).
"""
import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..'))
from mmengine.config import DictAction  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the directory to save the file containing evaluation metrics')
    parser.add_argument('--out', type=str, help='dump predictions to a pickle file for offline evaluation')
    parser.add_argument('--show', action='store_true', help='show prediction results')
    parser.add_argument('--show-dir', help='directory where painted images will be saved')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override some settings in the used config, the key-value pair in xxx=yyy format')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    parser.add_argument('--tta', action='store_true', help='test-time augmentation (needs tta_model/tta_pipeline)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def enable_visualization(cfg, scope, args):
    hooks = cfg.setdefault('default_hooks', {})
    vis = hooks.get('visualization')
    if vis is None:
        from mmposmlp.utils.launch import UserError
        raise UserError('--show/--show-dir need a `visualization` hook in default_hooks')
    if scope == 'mmpretrain':
        vis['enable'] = True
        if args.show_dir:
            vis['out_dir'] = args.show_dir
    else:
        vis['draw'] = True
        if scope == 'mmdet' and args.show_dir:
            vis['test_out_dir'] = args.show_dir
        if scope == 'mmseg' and args.show_dir:
            vis['interval'] = 1
            cfg.visualizer['save_dir'] = args.show_dir
        if scope == 'mmaction' and args.show_dir:
            vis['out_dir'] = args.show_dir
    vis['show'] = args.show
    vis['wait_time'] = args.wait_time


def main(argv=None):
    args = parse_args(argv)
    from mmengine.config import Config

    from mmposmlp.utils.launch import (INPUT_ERRORS, UserError, fail, check_checkpoint_fits, check_datasets, prepare_runtime,
                                       register_scope, setup_distributed)
    try:
        if not osp.isfile(args.config):
            raise UserError(f'config {args.config} does not exist')
        if not osp.isfile(args.checkpoint):
            raise UserError(f'checkpoint {args.checkpoint} does not exist')
        cfg = Config.fromfile(args.config)
        cfg.launcher = args.launcher
        if args.cfg_options is not None:
            cfg.merge_from_dict(args.cfg_options)
        if args.work_dir is not None:
            cfg.work_dir = args.work_dir
        elif cfg.get('work_dir', None) is None:
            cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
        cfg.load_from = args.checkpoint
        scope = register_scope(cfg)
        prepare_runtime()
        if args.show or args.show_dir:
            enable_visualization(cfg, scope, args)
        if args.tta:
            if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
                raise UserError('--tta needs `tta_model` and `tta_pipeline` in the config')
            cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
            cfg.model = dict(**cfg.tta_model, module=cfg.model)
        check_datasets(cfg, ['test_dataloader'])
        setup_distributed(cfg, args.launcher)
        from mmengine.runner import Runner
        runner = Runner.from_cfg(cfg)
        check_checkpoint_fits(runner.model, args.checkpoint)
        if args.out is not None:
            if not args.out.endswith(('.pkl', '.pickle')):
                raise UserError('--out must be a .pkl file')
            if scope == 'mmdet':
                from mmdet.evaluation import DumpDetResults as Dump
            else:
                from mmengine.evaluator import DumpResults as Dump
            runner.test_evaluator.metrics.append(Dump(out_file_path=args.out))
    except INPUT_ERRORS as e:
        return fail(e)
    from mmposmlp.utils.compat import allow_mmengine_checkpoints
    with allow_mmengine_checkpoints():
        runner.test()
    return 0


if __name__ == '__main__':
    sys.exit(main())
