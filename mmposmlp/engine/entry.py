"""Shared logic of tools/train.py and tools/test.py: one entry point for configs of all four libraries.

The config's ``default_scope`` decides the library (mmdet, mmseg, mmaction, mmpretrain). Errors a user
can fix (unknown ``type``, wrong arch, missing dataset, bad launch) end with one sentence, not a traceback;
set ``MMPOSMLP_TRACEBACK=1`` to see the full traceback anyway.
"""
import os
import os.path as osp
import re
import sys
from typing import Optional

from mmposmlp.engine.errors import UserError

LIBRARIES = {
    'mmdet': 'mmdet.utils',
    'mmseg': 'mmseg.utils',
    'mmaction': 'mmaction.utils',
    'mmpretrain': 'mmpretrain.utils',
}
NEEDS_MMCV_OPS = ('mmdet', 'mmseg')


def setup_library(cfg) -> str:
    """Register the modules of the config's library; returns the scope name."""
    scope = cfg.get('default_scope')
    if scope not in LIBRARIES:
        raise UserError(f'config default_scope is {scope!r}; tools/train.py and tools/test.py serve configs of '
                        f'{", ".join(LIBRARIES)}: inherit from one of their configs (e.g. _base_ = '
                        "'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py') or set default_scope.")
    if scope in NEEDS_MMCV_OPS:
        from mmposmlp.utils import check_mmcv_ops
        try:
            check_mmcv_ops()
        except ImportError as e:
            raise UserError(str(e)) from e
    import importlib
    try:
        utils = importlib.import_module(LIBRARIES[scope])
    except ImportError as e:
        raise UserError(f'this config needs {scope} ({e}): install it (`make install`, or '
                        f'`mim install {scope}`).') from e
    utils.register_all_modules(init_default_scope=False)
    from mmengine.registry import DefaultScope
    if DefaultScope.get_current_instance() is None or \
            DefaultScope.get_current_instance().scope_name != scope:
        DefaultScope.get_instance(f'mmposmlp-tools-{scope}-{id(cfg)}', scope_name=scope)
    return scope


def load_config(path: str, cfg_options: Optional[dict] = None, work_dir: Optional[str] = None):
    """``(cfg, scope)`` for tools/train.py and tools/test.py: the config with ``--cfg-options``
    merged, its library registered, and ``work_dir`` by priority CLI > config >
    ``./work_dirs/<config stem>``."""
    from mmengine.config import Config
    cfg = Config.fromfile(path)
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    scope = setup_library(cfg)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(path))[0])
    return cfg, scope


def explain(exc: BaseException):
    """One-sentence message for errors caused by the config, else None (then the traceback is shown)."""
    from mmposmlp.engine.checkpoint import CheckpointMismatchError
    from mmposmlp.models.checkpoints import CheckpointMismatchError as WeightsMismatchError
    from mmposmlp.models.checkpoints import InitCfgError
    from mmposmlp.registry import unknown_type_in, unknown_type_message
    from mmposmlp.utils.dist import LaunchError
    from mmposmlp.utils.safe_load import UnsafeCheckpointError
    if isinstance(exc, (UserError, CheckpointMismatchError, WeightsMismatchError, InitCfgError, LaunchError,
                        UnsafeCheckpointError)):
        return str(exc)
    unknown = unknown_type_in(exc)
    return unknown_type_message(*unknown) if unknown else None


def explain_build_error(exc: BaseException) -> str:
    """Errors raised while the config is turned into objects (e.g. a wrong arch name)."""
    msg = explain(exc)
    if msg:
        return msg
    text = str(exc.args[0]) if getattr(exc, 'args', None) else str(exc)
    # mmengine prefixes nested build errors with "class `X` in file.py: "; keep only the innermost message
    text = re.sub(r'(class `\w+` in [^:]+: )+', '', text)
    return f'the config could not be built: {type(exc).__name__}: {text}'


def run_cli(main, argv=None) -> int:
    """Run ``main(argv)``; print user errors as one line on stderr and return exit code 1."""
    try:
        main(argv)
        return 0
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            raise
        msg = getattr(exc, '_mmposmlp_message', None) or explain(exc)
        if msg is None or os.environ.get('MMPOSMLP_TRACEBACK') == '1':
            raise
        print(f'ERROR: {msg}', file=sys.stderr, flush=True)
        return 1


RUNNER_TYPE = 'mmposmlp.Runner'


def use_mmposmlp_runner(cfg) -> bool:
    """Run the config with ``mmposmlp.Runner`` (every shipped config names it; a user's upstream config with our
    backbone may not). A config naming a runner of its own keeps it, without mmposmlp's runner features: then
    False."""
    runner_type = cfg.get('runner_type')
    if runner_type in (None, 'Runner', 'mmengine.Runner'):
        cfg.runner_type = RUNNER_TYPE
    elif runner_type != RUNNER_TYPE:
        print(f'note: the config runs runner_type={runner_type!r}: exact resume, atomic checkpoints and the '
              f'pre-flight checks of {RUNNER_TYPE} are not active.', flush=True)
        return False
    return True


def build_runner(cfg, loop: str):
    """Check what ``loop`` ('train' or 'test') reads, then build the config's Runner (:func:`use_mmposmlp_runner`);
    failures while building objects from the config become one-line errors."""
    from mmengine.registry import RUNNERS

    from mmposmlp.engine.runner import preflight
    if not use_mmposmlp_runner(cfg):  # mmposmlp.Runner registers these itself; our tools load data-only either way
        from mmposmlp.models.official_weights import register_official_classifiers
        from mmposmlp.utils.safe_load import register_mmengine_loaders
        register_mmengine_loaders()
        register_official_classifiers()
    preflight(cfg, loop)
    try:
        runner = RUNNERS.build(cfg)
    except (KeyError, ValueError, TypeError, AssertionError, UserError) as exc:
        exc._mmposmlp_message = explain_build_error(exc)
        raise
    if hasattr(runner, 'preflight_done'):
        runner.preflight_done.add(loop)
    return runner


def pretrained_checkpoints(cfg) -> list:
    """Checkpoint files the config's model loads itself (``init_cfg`` Pretrained, ``pretrained=``)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            init = node.get('init_cfg')
            for item in (init if isinstance(init, list) else [init]):
                if isinstance(item, dict) and item.get('type') == 'Pretrained' and item.get('checkpoint'):
                    found.append(item['checkpoint'])
            if isinstance(node.get('pretrained'), str):
                found.append(node['pretrained'])
            for v in node.values():
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    walk(cfg.get('model'))
    return found


def trusted_checkpoint_context(trust: bool, paths):
    """``--trust-checkpoint``: unpickle exactly ``paths`` without restrictions for this command (refused if
    the command loads no checkpoint); otherwise every checkpoint loads as data only."""
    import contextlib

    from mmposmlp.utils.safe_load import trusted_checkpoints
    if not trust:
        return contextlib.nullcontext()
    paths = [p for p in paths if p]
    if not paths:
        raise UserError('--trust-checkpoint: this command loads no checkpoint (no --resume, load_from or init_cfg '
                        'Pretrained checkpoint); drop the flag.')
    print('--trust-checkpoint: unpickling without restrictions (this runs code stored in them): '
          + ', '.join(map(str, paths)), flush=True)
    return trusted_checkpoints(paths)


def prepare_launch(cfg, launcher: str) -> None:
    """Distributed settings: gloo + DDP without device ids on CPU; Slurm address/port."""
    from mmposmlp.utils.dist import end_with_parent, prepare_slurm_env, setup_cpu_distributed, stall_timeout
    cfg.launcher = launcher
    if launcher == 'pytorch':
        end_with_parent()  # torchrun starts ranks in their own session: end them with the launcher
    stall_timeout()  # a malformed MMPOSMLP_STALL_TIMEOUT is refused before anything starts
    if launcher == 'slurm':
        prepare_slurm_env()
    setup_cpu_distributed(cfg, launcher)


def apply_total_batch_size(cfg, total: int, launcher: str) -> None:
    """``--total-batch-size``: split a global batch over the processes; refuse uneven splits."""
    from mmposmlp.utils.dist import world_size_from_env
    world = world_size_from_env(launcher)
    if total % world:
        raise UserError(f'--total-batch-size {total} is not divisible by the world size {world}: use a multiple '
                        f'of {world} or launch {", ".join(str(d) for d in _divisors(total))} processes.')
    cfg.train_dataloader.batch_size = total // world


def _divisors(n):
    return [d for d in range(1, min(n, 64) + 1) if n % d == 0]
