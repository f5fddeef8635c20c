"""What ``tools/train.py`` and ``tools/test.py`` do around mmengine's Runner.

* one entry point for configs of mmdet, mmseg, mmaction2 and mmpretrain (the config's
  ``default_scope`` decides which library's modules are registered);
* distributed training on CPU with gloo (mmengine 0.10.7 never falls back to it: it calls
  ``torch.cuda.set_device`` and wraps DDP with ``device_ids=[LOCAL_RANK]``);
* a master port that does not collide between jobs on one node;
* atomic checkpoint files (written to a temporary file, then renamed);
* safe loading of mmengine's own checkpoints on torch >= 2.6 (see :mod:`mmposmlp.utils.compat`);
* clear one-sentence errors for missing datasets, unknown types and mismatched checkpoints.
"""
import importlib
import os
import os.path as osp
import socket
import subprocess
from typing import Iterable, List, Optional, Tuple

import torch

MODULE_OF_SCOPE = {'mmdet': 'mmdet', 'mmseg': 'mmseg', 'mmaction': 'mmaction', 'mmpretrain': 'mmpretrain'}


class UserError(RuntimeError):
    """An error caused by the user's input; tools print only its message."""


# ----------------------------------------------------------------------------- scope
def register_scope(cfg) -> str:
    """Register the config's library and make it the default scope."""
    scope = cfg.get('default_scope')
    if scope is None:
        raise UserError('the config sets no `default_scope`; inherit a base config of mmdet, mmseg, '
                        'mmaction2 or mmpretrain (their default_runtime.py sets it)')
    if scope not in MODULE_OF_SCOPE:
        raise UserError(f'default_scope={scope!r} is not one of {sorted(MODULE_OF_SCOPE)}; '
                        'mmposmlp configs keep the downstream library scope (use type="mmposmlp.X")')
    try:
        utils = importlib.import_module(f'{MODULE_OF_SCOPE[scope]}.utils')
    except ImportError as e:
        raise UserError(f'the config needs {scope}, which cannot be imported ({e}); run `make install`') from e
    if scope in ('mmdet', 'mmseg'):
        from mmposmlp.utils.env import check_mmcv_ops
        check_mmcv_ops()
    if hasattr(utils, 'register_all_modules'):
        utils.register_all_modules(init_default_scope=True)
    else:
        from mmengine.registry import init_default_scope
        init_default_scope(scope)
    return scope


# ----------------------------------------------------------------------------- datasets
def _dataset_paths(ds, where: str) -> List[Tuple[str, str]]:
    """(path, where) pairs a dataset config reads, recursing into dataset wrappers."""
    if ds is None or not hasattr(ds, 'get'):
        return []
    out = []
    for key in ('dataset', ):
        if ds.get(key) is not None:
            out += _dataset_paths(ds[key], f'{where}.{key}')
    for i, sub in enumerate(ds.get('datasets') or []):
        out += _dataset_paths(sub, f'{where}.datasets[{i}]')
    if ds.get('dataset') is not None or ds.get('datasets') is not None:
        return out
    root = ds.get('data_root') or ''
    ann = ds.get('ann_file')
    if ann:
        out.append((ann if osp.isabs(ann) or not root else osp.join(root, ann), f'{where}.ann_file'))
    prefix = ds.get('data_prefix')
    values = prefix.items() if hasattr(prefix, 'items') else ([('', prefix)] if isinstance(prefix, str) else [])
    for k, v in values:
        if isinstance(v, str) and v:
            out.append((v if osp.isabs(v) or not root else osp.join(root, v),
                        f'{where}.data_prefix' + (f'.{k}' if k else '')))
    if root and not out:
        out.append((root, f'{where}.data_root'))
    return out


def check_datasets(cfg, loaders: Iterable[str]) -> None:
    """Fail with one sentence when a dataloader's files are missing."""
    for loader in loaders:
        if cfg.get(loader) is None:
            continue
        for path, where in _dataset_paths(cfg[loader].get('dataset'), f'{loader}.dataset'):
            if not osp.exists(path):
                raise UserError(
                    f'dataset file not found: {path} (from {where}). Put the real dataset there (README '
                    '"Data"), or generate toy data with `python tools/misc/make_toy_datasets.py --out data/toy` '
                    'and use a toy config (e.g. configs/posmlp/toy/*.py).')


# ----------------------------------------------------------------------------- distributed
def free_port() -> int:
    with socket.socket() as s:
        s.bind(('', 0))
        return s.getsockname()[1]


def job_port() -> int:
    """A master port for this job: $MASTER_PORT, else derived from $SLURM_JOB_ID (the same
    for every task of a job, different for concurrent jobs), else a free port."""
    if os.environ.get('MASTER_PORT'):
        return int(os.environ['MASTER_PORT'])
    if os.environ.get('SLURM_JOB_ID'):
        return 20000 + int(os.environ['SLURM_JOB_ID']) % 20000
    return free_port()


def _slurm_env() -> None:
    os.environ['RANK'] = os.environ['SLURM_PROCID']
    os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
    os.environ['LOCAL_RANK'] = os.environ.get('SLURM_LOCALID', '0')
    if not os.environ.get('MASTER_ADDR'):
        nodes = os.environ.get('SLURM_NODELIST', '127.0.0.1')
        try:
            addr = subprocess.check_output(['scontrol', 'show', 'hostname', nodes], text=True,
                                           timeout=20).split()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            addr = '127.0.0.1'
        os.environ['MASTER_ADDR'] = addr
    os.environ['MASTER_PORT'] = str(job_port())


def setup_distributed(cfg, launcher: str) -> None:
    """Prepare ``cfg`` (and the process group on CPU) for ``launcher``."""
    if launcher == 'none':
        return
    if launcher == 'slurm':
        for var in ('SLURM_PROCID', 'SLURM_NTASKS'):
            if var not in os.environ:
                raise UserError(f'--launcher slurm but ${var} is not set: start the job with srun '
                                '(tools/slurm_train.sh) or use --launcher pytorch / none')
        _slurm_env()
    elif launcher == 'pytorch':
        for var in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'):
            if var not in os.environ:
                raise UserError(f'--launcher pytorch but ${var} is not set: start with torchrun '
                                '(tools/dist_train.sh CONFIG N)')
        os.environ.setdefault('LOCAL_RANK', os.environ['RANK'])
    elif launcher == 'mpi':
        os.environ.setdefault('MASTER_PORT', str(job_port()))
    env_cfg = cfg.setdefault('env_cfg', {})
    dist_cfg = env_cfg.setdefault('dist_cfg', {})
    if torch.cuda.is_available():
        if launcher == 'slurm':
            dist_cfg.setdefault('port', int(os.environ['MASTER_PORT']))
        return
    # CPU: gloo, initialised here so that mmengine does not call torch.cuda.set_device, and DDP
    # without device ids.
    dist_cfg['backend'] = 'gloo'
    wrapper = cfg.get('model_wrapper_cfg') or dict(type='MMDistributedDataParallel')
    wrapper['device_ids'] = None
    cfg.model_wrapper_cfg = wrapper
    if launcher == 'mpi':
        os.environ.setdefault('RANK', os.environ['OMPI_COMM_WORLD_RANK'])
        os.environ.setdefault('WORLD_SIZE', os.environ['OMPI_COMM_WORLD_SIZE'])
        os.environ.setdefault('LOCAL_RANK', os.environ.get('OMPI_COMM_WORLD_LOCAL_RANK', '0'))
        os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    import datetime

    import torch.distributed as dist
    if not dist.is_initialized():
        timeout = dist_cfg.get('timeout', 1800)
        dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=timeout))


# ----------------------------------------------------------------------------- checkpoints
def patch_atomic_checkpoint_save() -> None:
    """Make mmengine write local checkpoints to a temporary file and rename it, so a run
    killed while saving never leaves a half-written checkpoint (``last_checkpoint`` is only
    updated after the rename)."""
    import mmengine.runner.checkpoint as ckpt_mod
    import mmengine.runner.runner as runner_mod
    if getattr(ckpt_mod.save_checkpoint, '_mmposmlp_atomic', False):
        return
    original = ckpt_mod.save_checkpoint

    def save_checkpoint(checkpoint, filename, file_client_args=None, backend_args=None):
        if '://' in str(filename) or file_client_args or backend_args:
            return original(checkpoint, filename, file_client_args=file_client_args, backend_args=backend_args)
        os.makedirs(osp.dirname(osp.abspath(filename)), exist_ok=True)
        tmp = f'{filename}.tmp.{os.getpid()}'
        try:
            with open(tmp, 'wb') as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, filename)
        finally:
            if osp.exists(tmp):
                os.remove(tmp)

    save_checkpoint._mmposmlp_atomic = True
    ckpt_mod.save_checkpoint = save_checkpoint
    runner_mod.save_checkpoint = save_checkpoint


def check_checkpoint_fits(model: torch.nn.Module, path: str) -> None:
    """Refuse (one sentence) a checkpoint made for another architecture."""
    from mmposmlp.utils.compat import safe_torch_load
    if not osp.isfile(path):
        raise UserError(f'checkpoint {path} does not exist')
    ckpt = safe_torch_load(path)
    state = ckpt.get('state_dict', ckpt) if isinstance(ckpt, dict) else {}
    if hasattr(model, 'module'):
        model = model.module
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [k for k in own if k in state and hasattr(state[k], 'shape') and state[k].shape != own[k].shape]
    if missing or shapes:
        raise UserError(
            f'checkpoint {path} does not fit this model ({len(missing)} missing, {len(unexpected)} unexpected, '
            f'{len(shapes)} wrong-shape weights, e.g. {(missing + shapes)[:3]}): it was written for another '
            'architecture or config; give the matching config or another checkpoint.')


def find_resume_checkpoint(work_dir: str) -> Optional[str]:
    path = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(path):
        with open(path) as f:
            ckpt = f.read().strip()
        if osp.isfile(ckpt):
            return ckpt
    return None


def prepare_runtime() -> None:
    """Process-wide set-up shared by our tools."""
    patch_atomic_checkpoint_save()
    import mmposmlp.models  # noqa: F401  (register mmposmlp.* types early)


def fail(e: BaseException) -> int:
    """Print an error as one message (no traceback unless MMPOSMLP_DEBUG=1); exit status 1."""
    import sys
    if os.environ.get('MMPOSMLP_DEBUG'):
        raise e
    msg = str(e).strip().strip('"\'')
    print(f'error: {msg}', file=sys.stderr)
    print('(set MMPOSMLP_DEBUG=1 for the full traceback)', file=sys.stderr)
    return 1


#: exceptions that mean "bad input" while a config is read and its runner built
INPUT_ERRORS = (UserError, KeyError, ValueError, TypeError, FileNotFoundError, ImportError, AssertionError)
