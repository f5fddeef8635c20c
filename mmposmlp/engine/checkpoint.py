"""Checkpoints that are never half-written, and picking the last complete one.

* :func:`atomic_file` writes ``<name>.tmp`` and then ``os.replace`` s it (atomic on POSIX):
  ``mmposmlp.Runner.save_checkpoint`` saves through it, and :class:`AtomicCheckpointHook` writes
  ``last_checkpoint`` the same way. A run killed at any moment leaves either the old or the new file, never a
  truncated one.
* Checkpoints are written as plain data (:func:`mmposmlp.utils.safe_load.to_plain_checkpoint`): they load
  with ``torch.load(f, weights_only=True)`` and no allow-list.
* :func:`find_last_complete_checkpoint` is what ``--resume`` (no path) uses: ``last_checkpoint`` if it
  names a readable file inside the work dir, else the newest ``*.pth`` in the work dir that is a complete
  torch zip archive. Nothing outside the work dir is picked; a pointer leading outside is refused.
* :func:`prepare_resume_checkpoint`, :func:`check_resume_compatible` and :func:`config_gpu_ids` are what
  ``mmposmlp.Runner.resume`` does with the loaded checkpoint: its config text is read as data only (never
  executed), and a checkpoint of another model or GPU count is refused in one sentence.
"""
import contextlib
import glob
import os
import os.path as osp
import zipfile
from collections import OrderedDict

from mmengine.hooks import CheckpointHook

from mmposmlp.registry import HOOKS


class CheckpointMismatchError(RuntimeError):
    """The checkpoint given to ``--resume`` belongs to a different model."""


class CheckpointLocationError(CheckpointMismatchError):
    """A work dir's ``last_checkpoint`` pointer leads outside the work dir."""


def atomic_write_text(path: str, text: str) -> None:
    tmp = f'{path}.tmp.{os.getpid()}'
    with open(tmp, 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_file(path: str):
    """Yield ``<path>.tmp`` for the caller to write, then flush it to disk and rename it to ``path`` (atomic on
    POSIX); if writing fails, ``path`` is untouched and the partial temporary file is removed."""
    tmp = f'{path}.tmp'
    try:
        yield tmp
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise
    with open(tmp, 'rb') as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def make_plain(checkpoint: dict) -> None:
    """In place: every entry of ``checkpoint`` becomes plain data (:func:`~mmposmlp.utils.safe_load.
    to_plain_checkpoint`), so the file loads with ``torch.load(weights_only=True)`` and no allow-list."""
    from mmposmlp.utils.safe_load import to_plain_checkpoint
    plain = to_plain_checkpoint(checkpoint)
    for key in list(checkpoint):
        checkpoint[key] = plain[key]


def save_checkpoint_atomically(checkpoint: dict, filename: str, **kwargs) -> None:
    """mmengine's ``save_checkpoint`` of the plain-data copy of ``checkpoint``, through :func:`atomic_file` for
    local files (remote backends such as s3 keep their own semantics)."""
    from mmengine.runner.checkpoint import save_checkpoint
    checkpoint = dict(checkpoint)
    make_plain(checkpoint)
    if '://' in str(filename):
        return save_checkpoint(checkpoint, filename, **kwargs)
    with atomic_file(str(filename)) as tmp:
        save_checkpoint(checkpoint, tmp, **kwargs)


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's CheckpointHook whose ``last_checkpoint`` pointer is replaced atomically.

    ``mmposmlp.Runner`` puts it in place of ``CheckpointHook``; the checkpoint files themselves are made
    atomic by ``mmposmlp.Runner.save_checkpoint`` (:func:`atomic_file`).
    """

    def _save_checkpoint_with_step(self, runner, step, meta):
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


def _inside(path: str, roots) -> bool:
    real = osp.realpath(path)
    for root in roots:
        root = osp.realpath(root)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def find_last_complete_checkpoint(work_dir: str, extra_roots=()):
    """Path of the checkpoint ``--resume`` (without a path) should use, or None.

    Only files inside ``work_dir`` (or ``extra_roots``, e.g. the checkpoint hook's ``out_dir``) are picked,
    symlinks resolved. A ``last_checkpoint`` naming a file elsewhere is read as a file name: a copied or
    moved work dir resumes its own file of that name; if it has none, the pointer is refused
    (:class:`CheckpointLocationError`).
    """
    roots = [work_dir, *extra_roots]
    pointer = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(pointer):
        with open(pointer) as f:
            last = f.read(4096).strip()
        if last:
            named = last if osp.isabs(last) or osp.exists(last) else osp.join(work_dir, last)
            own = osp.join(work_dir, osp.basename(last))
            if osp.isfile(named) and _inside(named, roots):
                chosen = named
            elif osp.isfile(own) and _inside(own, roots):
                chosen = own
            elif not _inside(named, roots):
                raise CheckpointLocationError(
                    f'{pointer} points to {last}, outside the work dir {work_dir}: refusing to resume from it; '
                    'resume explicitly with --resume <checkpoint> if you want that file, or delete the pointer.')
            else:
                chosen = None
            if chosen is not None and is_complete_checkpoint(chosen):
                return chosen
    candidates = sorted(glob.glob(osp.join(work_dir, '*.pth')), key=os.path.getmtime, reverse=True)
    for path in candidates:
        if _inside(path, roots) and is_complete_checkpoint(path):
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


def config_gpu_ids(text):
    """``gpu_ids`` assigned in a checkpoint's config text, read as a literal (the text is never executed)."""
    import ast
    if not isinstance(text, str) or len(text) > 2_000_000:
        return None
    try:
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == 'gpu_ids'
                                                    for t in node.targets):
                value = ast.literal_eval(node.value)
                return value if isinstance(value, (list, tuple)) else None
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return None


def prepare_resume_checkpoint(checkpoint, filename: str):
    """``(checkpoint, config_text)``: a loaded checkpoint made ready for mmengine's ``Runner.resume``.

    ``meta['config']`` is taken out (mmengine would execute it with ``Config.fromstring``); plain history
    buffers (our format) become mmengine ``HistoryBuffer`` objects again, exactly as they were saved.
    """
    from mmposmlp.utils.safe_load import history_buffer_from_plain
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    if not isinstance(meta, dict) or any(type(meta.get(k)) is not int or meta[k] < 0 for k in ('epoch', 'iter')):
        raise CheckpointMismatchError(
            f'cannot resume from {filename}: it has no training state (meta.epoch and meta.iter); resume from a '
            'checkpoint written by training, or use --cfg-options load_from=<ckpt> to start from its weights.')
    meta = dict(meta)
    config_text = meta.pop('config', None)
    checkpoint = dict(checkpoint, meta=meta)
    hub = checkpoint.get('message_hub')
    if isinstance(hub, dict) and isinstance(hub.get('log_scalars'), dict):
        scalars = OrderedDict()
        for key, value in hub['log_scalars'].items():
            buf = history_buffer_from_plain(value)
            scalars[key] = value if buf is None else buf
        checkpoint['message_hub'] = dict(hub, log_scalars=scalars)
    return checkpoint, config_text


def check_resume_gpu_count(config_text, world_size: int, filename: str, auto_scale_lr=None) -> None:
    """Refuse to resume a checkpoint trained on another number of GPUs (the ``gpu_ids`` of its config text, read
    as a literal) unless ``auto_scale_lr`` is enabled: the learning rate was tuned for the old total batch."""
    gpu_ids = config_gpu_ids(config_text)
    if gpu_ids and len(gpu_ids) != world_size and not (auto_scale_lr or {}).get('enable', False):
        raise CheckpointMismatchError(
            f'cannot resume from {filename}: it was trained on {len(gpu_ids)} GPUs and this run has '
            f'{world_size} processes; launch {len(gpu_ids)} processes or enable auto_scale_lr.')
