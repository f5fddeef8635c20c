#!/usr/bin/env python
"""Train a model from a config of mmdet, mmseg, mmaction2 or mmpretrain (interface of mmdet 3.3.0).

    python tools/train.py CONFIG [--work-dir DIR] [--amp] [--auto-scale-lr] [--resume [CKPT]]
                          [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}] [--trust-checkpoint]

The config's default_scope picks the library. On machines without CUDA, distributed runs use gloo.
"""
import argparse
import os
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def parse_args(argv=None):
    from mmengine.config import DictAction

    from mmposmlp.utils.safe_load import add_trust_argument
    parser = argparse.ArgumentParser(description='Train a model (mmdet/mmseg/mmaction/mmpretrain configs)')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument('--amp', action='store_true', default=False,
                        help='enable automatic-mixed-precision training (needs a GPU)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='enable automatically scaling LR (needs auto_scale_lr in the config)')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='resume from the given checkpoint; without a path, from the last complete '
                        'checkpoint in the work dir')
    parser.add_argument('--resume-world-size-change', action='store_true',
                        help='(mmposmlp) allow --resume with another number of processes than the checkpoint '
                        'was written by (the run continues, but not bit-identically)')
    parser.add_argument('--total-batch-size', type=int, default=None,
                        help='(mmposmlp) global batch size, split evenly over the processes')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override settings of the config, key=value (xxx=yyy format)')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    add_trust_argument(parser)
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank (older)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main(argv=None):
    args = parse_args(argv)
    from mmposmlp.engine.checkpoint import find_last_complete_checkpoint
    from mmposmlp.engine.entry import (UserError, apply_total_batch_size, build_runner, load_config, prepare_launch,
                                       pretrained_checkpoints, trusted_checkpoint_context)
    if not osp.isfile(args.config):
        raise UserError(f'config file {args.config} does not exist.')
    try:
        from mmengine.utils.dl_utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()
    except ImportError:
        pass

    cfg, _ = load_config(args.config, args.cfg_options, args.work_dir)

    if args.amp:
        from mmposmlp.utils.dist import cuda_available
        if not cuda_available():
            raise UserError('--amp needs a GPU (mmengine AmpOptimWrapper runs on CUDA/NPU/MLU/MUSA only): drop --amp '
                            'on CPU machines.')
        optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if optim_wrapper == 'AmpOptimWrapper':
            print('AMP training is already enabled in your config.')
        else:
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.loss_scale = 'dynamic'

    if args.auto_scale_lr:
        if 'auto_scale_lr' in cfg and 'enable' in cfg.auto_scale_lr and 'base_batch_size' in cfg.auto_scale_lr:
            cfg.auto_scale_lr.enable = True
        else:
            raise UserError('--auto-scale-lr needs `auto_scale_lr = dict(enable=False, base_batch_size=...)` in the '
                            'config (base_batch_size = the total batch size the learning rate was tuned for).')

    if args.resume == 'auto' or (args.resume is None and cfg.get('resume') is True and not cfg.get('load_from')):
        # auto-resume picks only files inside the work dir (and the checkpoint hook's out_dir)
        cfg.resume = True
        ckpt_hook = (cfg.get('default_hooks') or {}).get('checkpoint') or {}
        out_dir = ckpt_hook.get('out_dir') if isinstance(ckpt_hook, dict) else None
        roots = [osp.join(out_dir, osp.basename(osp.normpath(cfg.work_dir)))] if out_dir else []
        cfg.load_from = find_last_complete_checkpoint(cfg.work_dir, roots) if osp.isdir(cfg.work_dir) else None
        if cfg.load_from is None:
            print(f'--resume: no complete checkpoint in {cfg.work_dir}; starting from scratch.', flush=True)
            cfg.resume = False
    elif args.resume is not None:
        if not osp.isfile(args.resume) and '://' not in args.resume:
            raise UserError(f'--resume {args.resume}: no such checkpoint file.')
        cfg.resume = True
        cfg.load_from = args.resume

    if args.resume_world_size_change:
        cfg.resume_allow_world_size_change = True
    prepare_launch(cfg, args.launcher)
    if args.total_batch_size is not None:
        apply_total_batch_size(cfg, args.total_batch_size, args.launcher)
    with trusted_checkpoint_context(args.trust_checkpoint, [cfg.get('load_from')] + pretrained_checkpoints(cfg)):
        runner = build_runner(cfg, 'train')  # mmposmlp.Runner: pre-flight checks, exact resume, atomic checkpoints
        runner.train()


if __name__ == '__main__':
    from mmposmlp.engine.entry import run_cli
    sys.exit(run_cli(main))
