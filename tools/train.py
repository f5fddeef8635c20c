#!/usr/bin/env python
"""Train a model from an mmdet / mmseg / mmaction2 / mmpretrain config (mmdet 3.3.0's interface).

    python tools/train.py CONFIG [--work-dir DIR] [--amp] [--auto-scale-lr] [--resume [CKPT]]
                          [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]

The config's ``default_scope`` decides which library's modules are registered. On machines
without CUDA, distributed launches use gloo. Set MMPOSMLP_DEBUG=1 for full tracebacks.
"""
import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.join(osp.dirname(osp.abspath(__file__)), '..'))
from mmengine.config import DictAction  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument('--amp', action='store_true', default=False, help='enable automatic-mixed-precision training')
    parser.add_argument('--auto-scale-lr', action='store_true', help='enable automatically scaling LR.')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='If specify checkpoint path, resume from it, while if not specify, try to auto '
                        'resume from the latest checkpoint in the work directory.')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override some settings in the used config, the key-value pair in xxx=yyy format')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def build_cfg(args):
    from mmengine.config import Config

    from mmposmlp.utils.launch import UserError
    if not osp.isfile(args.config):
        raise UserError(f'config {args.config} does not exist')
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    if args.amp:
        import torch
        if not torch.cuda.is_available():
            raise UserError('--amp uses AmpOptimWrapper, which mmengine only supports on GPU/NPU/MLU; '
                            'drop --amp on this CPU machine')
        optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if optim_wrapper == 'AmpOptimWrapper':
            print('AMP training is already enabled in your config.')
        else:
            if optim_wrapper != 'OptimWrapper':
                raise UserError(f'--amp is only supported with OptimWrapper, the config uses {optim_wrapper}')
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.loss_scale = 'dynamic'
    if args.auto_scale_lr:
        if 'auto_scale_lr' in cfg and 'base_batch_size' in cfg.auto_scale_lr:
            cfg.auto_scale_lr.enable = True
        else:
            raise UserError('--auto-scale-lr needs `auto_scale_lr = dict(base_batch_size=...)` in the config')
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume
    return cfg


def main(argv=None):
    args = parse_args(argv)
    from mmposmlp.utils.launch import (INPUT_ERRORS, UserError, fail, check_checkpoint_fits, check_datasets, find_resume_checkpoint,
                                       prepare_runtime, register_scope, setup_distributed)
    try:
        cfg = build_cfg(args)
        register_scope(cfg)
        prepare_runtime()
        loaders = ['train_dataloader'] + (['val_dataloader'] if cfg.get('val_cfg') is not None else [])
        check_datasets(cfg, loaders)
        setup_distributed(cfg, args.launcher)
        from mmengine.runner import Runner
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else _build_custom_runner(cfg)
        if cfg.get('resume'):
            path = cfg.get('load_from') or find_resume_checkpoint(cfg.work_dir)
            if cfg.get('load_from') or path:
                check_checkpoint_fits(runner.model, path)
    except INPUT_ERRORS as e:
        return fail(e)
    from mmposmlp.utils.compat import allow_mmengine_checkpoints
    with allow_mmengine_checkpoints():
        runner.train()
    return 0


def _build_custom_runner(cfg):
    from mmengine.registry import RUNNERS
    return RUNNERS.build(cfg)


if __name__ == '__main__':
    sys.exit(main())
