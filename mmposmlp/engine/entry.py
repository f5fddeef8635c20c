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

LIBRARIES = {
    'mmdet': 'mmdet.utils',
    'mmseg': 'mmseg.utils',
    'mmaction': 'mmaction.utils',
    'mmpretrain': 'mmpretrain.utils',
}
NEEDS_MMCV_OPS = ('mmdet', 'mmseg')
TOY_HINT = ('generate toy data with `python tools/misc/make_toy_datasets.py --out data/toy` and point the config '
            'at it (configs/_base_/toy/, or --cfg-options ...data_root=data/toy/...)')
REAL_DATA_HINT = {
    'mmdet': 'put COCO at data/coco/ (annotations/, train2017/, val2017/)',
    'mmseg': 'put ADE20K at data/ade/ADEChallengeData2016/',
    'mmaction': 'put Kinetics-400 at data/kinetics400/ (videos_train/, videos_val/, list files)',
    'mmpretrain': 'put ImageNet at data/imagenet/ (train/, val/, meta/)',
}


class UserError(Exception):
    """An error with a message that names the problem and its fix; printed without traceback."""


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


def missing_dataset_paths(cfg, loaders):
    """[(path, cfg key)] of dataset paths a run would read that do not exist (see dataset_checks)."""
    from mmposmlp.engine.dataset_checks import missing_dataset_paths as missing
    return missing(cfg, loaders)


def check_datasets(cfg, loaders, scope) -> None:
    """Pre-flight dataset checks (mmposmlp/engine/dataset_checks.py): paths, then data vs config."""
    from mmposmlp.engine.dataset_checks import check_datasets as check
    check(cfg, loaders, scope)


def _pretrained_refs(obj, where):
    """Yield (checkpoint, key) of every ``init_cfg`` of type Pretrained below ``obj``."""
    if isinstance(obj, dict):
        if str(obj.get('type', '')).rpartition('.')[2] == 'Pretrained' and 'checkpoint' in obj:
            yield obj['checkpoint'], f'{where}.checkpoint'
        for k, v in obj.items():
            yield from _pretrained_refs(v, f'{where}.{k}')
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _pretrained_refs(v, f'{where}[{i}]')


def is_local_path(path) -> bool:
    """A non-empty path string without a URL scheme (``s3://``, ``http://`` ... are not checked on disk)."""
    return isinstance(path, str) and bool(path) and '://' not in path


def missing_pretrained_paths(cfg):
    """[(path, cfg key)] of pretrained checkpoints (``init_cfg`` Pretrained, ``load_from``) a training run would
    read that do not exist locally."""
    refs = list(_pretrained_refs(cfg.get('model'), 'model'))
    if cfg.get('load_from') and not cfg.get('resume'):
        refs.append((cfg.load_from, 'load_from'))
    return [(p, k) for p, k in refs if is_local_path(p) and not osp.exists(p)]


def check_pretrained(cfg) -> None:
    """Stop before building anything when a pretrained checkpoint is missing: which file, and how to make it."""
    from mmposmlp.utils.pretrained import missing_pretrained_message
    missing = missing_pretrained_paths(cfg)
    if missing:
        path, key = missing[0]
        raise UserError(missing_pretrained_message(path, key))


_NOT_IN_REGISTRY = re.compile(r'([\w.]+) is not in the ([\w:.]+) registry')


def explain(exc: BaseException):
    """One-sentence message for errors caused by the config, else None (then the traceback is shown)."""
    from mmposmlp.engine.checkpoint import CheckpointMismatchError
    from mmposmlp.models.checkpoints import CheckpointMismatchError as WeightsMismatchError
    from mmposmlp.models.checkpoints import InitCfgError
    from mmposmlp.utils.dist import LaunchError
    from mmposmlp.utils.safe_load import UnsafeCheckpointError
    if isinstance(exc, (UserError, CheckpointMismatchError, WeightsMismatchError, InitCfgError, LaunchError,
                        UnsafeCheckpointError)):
        return str(exc)
    text = str(exc.args[0]) if getattr(exc, 'args', None) else str(exc)
    m = _NOT_IN_REGISTRY.search(text)
    if m:
        name, registry = m.groups()
        return unknown_type_message(name, registry)
    return None


def unknown_type_message(name: str, registry: str) -> str:
    """One sentence for ``type=name`` missing from ``registry`` (``'scope::model'``): the closest registered
    names, and the fix (the ``mmposmlp.`` prefix, or ``custom_imports`` for a module nobody imported)."""
    scope, _, registry_name = registry.rpartition('::')
    try:
        from mmposmlp.registry import closest_registered
        close = closest_registered(name, registry_name)
    except Exception:  # noqa: BLE001  (the suggestion is a courtesy; the message stands without it)
        close = []
    # names of the running library's own scope need no prefix
    close = [c.partition('.')[2] if scope and c.startswith(scope + '.') else c for c in close]
    head = f'unknown type {name!r}: it is not registered in the {registry} registry'
    custom = ("add the module that registers it to custom_imports (custom_imports = dict(imports=['your.module'], "
              'allow_failed_imports=False))')
    if close:
        best = close[0]
        others = f' (or {", ".join(f"`{c}`" for c in close[1:])})' if len(close) > 1 else ''
        if best.lower() == name.lower() or best.rpartition('.')[2].lower() == name.rpartition('.')[2].lower():
            if best.startswith('mmposmlp.') and not name.startswith('mmposmlp.'):
                fix = (f"mmposmlp's modules live in the mmposmlp registry, so write type='{best}' "
                       '(custom_imports alone does not make unprefixed names visible)')
            else:
                fix = f"write type='{best}'"
        else:
            fix = f"fix the spelling (type='{best}'), or if it is a module of your own, {custom}"
        return f'{head}: did you mean `{best}`{others}? {fix[0].upper()}{fix[1:]}.'
    return (f"{head}: check the spelling of `type='{name}'`; mmposmlp modules are written type='mmposmlp.Name'; "
            f'for a module of your own, {custom}.')


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


def build_runner(cfg):
    """Build the Runner; failures while building objects from the config become one-line errors."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner
    try:
        if 'runner_type' not in cfg:
            return Runner.from_cfg(cfg)
        return RUNNERS.build(cfg)
    except (KeyError, ValueError, TypeError, AssertionError, UserError) as exc:
        exc._mmposmlp_message = explain_build_error(exc)
        raise


def activate_mmposmlp_runtime(cfg) -> None:
    """Safe loading of mmengine checkpoints, atomic checkpoint files, checked and exact resume."""
    from mmposmlp.engine.checkpoint import patch_atomic_checkpoints, patch_resume_check
    from mmposmlp.engine.resume_state import add_exact_resume_hook
    from mmposmlp.utils.compat import patch_mmengine_checkpoint_loading
    patch_mmengine_checkpoint_loading()
    patch_atomic_checkpoints()
    patch_resume_check()
    add_exact_resume_hook(cfg)
    if os.environ.get('MMPOSMLP_PREEMPTION') == '1':  # set by tools/slurm_train.sh --requeue
        from mmposmlp.engine.preemption import add_preemption_hook
        add_preemption_hook(cfg)
    hooks = cfg.get('default_hooks')
    if isinstance(hooks, dict) and isinstance(hooks.get('checkpoint'), dict) and \
            hooks['checkpoint'].get('type') in ('CheckpointHook', 'mmengine.CheckpointHook'):
        hooks['checkpoint']['type'] = 'mmposmlp.AtomicCheckpointHook'


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
