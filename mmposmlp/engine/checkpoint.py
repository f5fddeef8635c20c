"""Checkpoints that are never half-written, and picking the last complete one (issue 8, item 3).

* :func:`patch_atomic_checkpoints` makes ``Runner.save_checkpoint`` write ``<name>.tmp`` and then
  ``os.replace`` it (atomic on POSIX), and :class:`AtomicCheckpointHook` writes ``last_checkpoint`` the
  same way. A run killed at any moment leaves either the old or the new file, never a truncated one.
* :func:`find_last_complete_checkpoint` is what ``--resume`` (no path) uses: ``last_checkpoint`` if it
  names a readable file, else the newest ``*.pth`` in the work dir that is a complete torch zip archive.
* :func:`check_resume_compatible` refuses, with one sentence, a checkpoint written for another model.
"""
import glob
import os
import os.path as osp
import zipfile

from mmengine.hooks import CheckpointHook

from mmposmlp.registry import HOOKS


class CheckpointMismatchError(RuntimeError):
    """The checkpoint given to ``--resume`` belongs to a different model."""


def atomic_write_text(path: str, text: str) -> None:
    tmp = f'{path}.tmp.{os.getpid()}'
    with open(tmp, 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _atomic_save_checkpoint(original):

    def save_checkpoint(checkpoint, filename, *args, **kwargs):
        if '://' in str(filename):  # remote backends (s3, pavi...) have their own semantics
            return original(checkpoint, filename, *args, **kwargs)
        tmp = f'{filename}.tmp'
        original(checkpoint, tmp, *args, **kwargs)
        with open(tmp, 'rb') as f:
            os.fsync(f.fileno())
        os.replace(tmp, filename)

    save_checkpoint._mmposmlp_original = original
    return save_checkpoint


def patch_atomic_checkpoints() -> None:
    """Route ``Runner.save_checkpoint`` through a write-to-temp-then-rename save. Idempotent."""
    import mmengine.runner.runner as runner_mod
    if not hasattr(runner_mod.save_checkpoint, '_mmposmlp_original'):
        runner_mod.save_checkpoint = _atomic_save_checkpoint(runner_mod.save_checkpoint)


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's CheckpointHook whose ``last_checkpoint`` pointer is replaced atomically.

    Use ``default_hooks.checkpoint.type='mmposmlp.AtomicCheckpointHook'`` (our tools do this); the
    checkpoint files themselves are made atomic by :func:`patch_atomic_checkpoints`.
    """

    def _save_checkpoint_with_step(self, runner, step, meta):
        patch_atomic_checkpoints()
        save_file = osp.join(runner.work_dir, 'last_checkpoint')
        previous = None
        if osp.isfile(save_file):
            with open(save_file) as f:
                previous = f.read()
        super()._save_checkpoint_with_step(runner, step, meta)
        # super() truncates and rewrites the pointer in place; redo it atomically so the window in which
        # it is empty is gone for readers that use find_last_complete_checkpoint (and restore on failure).
        last = getattr(self, 'last_ckpt', None) or previous
        if last and osp.isdir(runner.work_dir) and _is_main():
            atomic_write_text(save_file, last)


def _is_main() -> bool:
    from mmengine.dist import is_main_process
    return is_main_process()


def is_complete_checkpoint(path: str) -> bool:
    """A torch (>= 1.6 zip format) checkpoint whose archive directory is intact."""
    if not osp.isfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith('data.pkl') for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def find_last_complete_checkpoint(work_dir: str):
    """Path of the checkpoint ``--resume`` (without a path) should use, or None."""
    pointer = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(pointer):
        with open(pointer) as f:
            last = f.read().strip()
        if last and not osp.isabs(last) and not osp.exists(last):
            last = osp.join(work_dir, osp.basename(last))
        if last and is_complete_checkpoint(last):
            return last
    candidates = sorted(glob.glob(osp.join(work_dir, '*.pth')), key=os.path.getmtime, reverse=True)
    for path in candidates:
        if is_complete_checkpoint(path):
            return path
    return None


def check_resume_compatible(model, checkpoint: dict, filename: str, max_listed: int = 3) -> None:
    """Raise :class:`CheckpointMismatchError` when ``checkpoint`` was written for another architecture."""
    from mmengine.model import is_model_wrapper
    if is_model_wrapper(model):
        model = model.module
    state = checkpoint.get('state_dict', checkpoint)
    state = {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    mismatched = [f'{k} {tuple(state[k].shape)} vs {tuple(v.shape)}' for k, v in own.items()
                  if k in state and hasattr(state[k], 'shape') and tuple(state[k].shape) != tuple(v.shape)]
    if missing or unexpected or mismatched:
        parts = []
        for name, items in (('missing', missing), ('unexpected', unexpected), ('shape-mismatched', mismatched)):
            if items:
                parts.append(f'{len(items)} {name} (e.g. {", ".join(items[:max_listed])})')
        raise CheckpointMismatchError(
            f'cannot resume from {filename}: it was written for a different model ({"; ".join(parts)} '
            'parameters). Resume with a checkpoint of this config, or use --cfg-options load_from=<ckpt> '
            'without --resume to fine-tune from other weights.')


def patch_resume_check() -> None:
    """Make ``Runner.resume`` verify the checkpoint against the model before mmengine loads it."""
    from mmengine.runner import Runner
    original = Runner.resume
    if getattr(original, '_mmposmlp_original', None):
        return

    def resume(self, filename, *args, **kwargs):
        from mmengine.runner.checkpoint import _load_checkpoint
        checkpoint = _load_checkpoint(filename, map_location='cpu')
        check_resume_compatible(self.model, checkpoint, filename)
        del checkpoint
        return original(self, filename, *args, **kwargs)

    resume._mmposmlp_original = original
    Runner.resume = resume
