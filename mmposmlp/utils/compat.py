"""torch / mmengine compatibility shims (issue 2, item 3).

torch >= 2.6 loads with ``weights_only=True``. mmengine 0.10.7 checkpoints carry a message hub
with ``HistoryBuffer`` objects and numpy arrays in ``meta``, which the safe unpickler refuses.
Instead of turning safe loading off (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` would also unpickle
arbitrary code from untrusted files), we allow-list exactly the classes mmengine writes.
"""
import contextlib
import functools

import numpy as np
import torch


@functools.lru_cache(maxsize=None)
def mmengine_safe_globals() -> tuple:
    """Classes an mmengine 0.10.x checkpoint's ``meta``/``message_hub`` may contain."""
    from mmengine.logging.history_buffer import HistoryBuffer
    allowed = [HistoryBuffer, np.ndarray, np.dtype]
    try:  # numpy >= 2
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _reconstruct, scalar
    allowed += [_reconstruct, scalar]
    # numpy 2 pickles dtypes as instances of numpy.dtypes.*DType classes.
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        allowed += [getattr(dtypes, n) for n in dir(dtypes) if n.endswith('DType')]
    # HistoryBuffer.__getstate__ stores its statistics methods, which pickle as getattr(HistoryBuffer, 'min').
    # Allowing the builtin getattr would open every attribute of every allowed object (a known route to
    # code execution), so a restricted getattr is registered under that name instead.
    allowed += [(_history_buffer_getattr, 'builtins.getattr'), (_history_buffer_getattr, '__builtin__.getattr')]
    return tuple(allowed)


def _history_buffer_getattr(obj, name, *default):
    """``getattr`` limited to the public methods of mmengine's HistoryBuffer (what its pickles use)."""
    from mmengine.logging.history_buffer import HistoryBuffer
    if obj is HistoryBuffer and isinstance(name, str) and not name.startswith('_') and \
            callable(getattr(HistoryBuffer, name, None)):
        return getattr(HistoryBuffer, name)
    import pickle
    raise pickle.UnpicklingError(f'refusing getattr({obj!r}, {name!r}) while loading a checkpoint: only '
                                 'HistoryBuffer statistics methods are allowed (the file may not be an mmengine '
                                 'checkpoint; load it with weights_only=False only if you trust it).')


@contextlib.contextmanager
def allow_mmengine_checkpoints():
    """Context in which ``torch.load`` (weights_only) accepts mmengine checkpoints."""
    if hasattr(torch.serialization, 'safe_globals'):
        with torch.serialization.safe_globals(list(mmengine_safe_globals())):
            yield
    else:  # torch < 2.5: weights_only is not the default anyway
        yield


def safe_torch_load(path, map_location='cpu'):
    """``torch.load`` with ``weights_only=True`` that also reads mmengine's own checkpoints."""
    with allow_mmengine_checkpoints():
        return torch.load(path, map_location=map_location, weights_only=True)


_LOADER_PATCHED = False


def patch_mmengine_checkpoint_loading() -> None:
    """Make mmengine 0.10.x read its own checkpoints under torch >= 2.6, still with ``weights_only``.

    mmengine's loaders call ``torch.load(f, map_location=...)`` without ``weights_only``; torch >= 2.6
    then unpickles safely and refuses the ``HistoryBuffer``/numpy objects mmengine stores in ``meta``.
    We wrap ``CheckpointLoader.load_checkpoint`` (used by ``load_from``, ``--resume``, ``init_cfg``
    Pretrained and Inferencers) so that every load runs inside :func:`allow_mmengine_checkpoints`: the
    allow-list grows by exactly those classes and only while mmengine loads; arbitrary code in an
    untrusted file is still refused. Idempotent.
    """
    global _LOADER_PATCHED
    if _LOADER_PATCHED:
        return
    from mmengine.runner.checkpoint import CheckpointLoader
    original = CheckpointLoader.load_checkpoint.__func__

    @functools.wraps(original)
    def load_checkpoint(cls, *args, **kwargs):
        with allow_mmengine_checkpoints():
            return original(cls, *args, **kwargs)

    load_checkpoint._mmposmlp_original = original
    CheckpointLoader.load_checkpoint = classmethod(load_checkpoint)
    _LOADER_PATCHED = True


# ------------------------------------------------------------------ torch.compile helpers
def is_compiling() -> bool:
    """``torch.compiler.is_compiling()`` (torch >= 2.3), with the torch 2.0-2.2 spelling."""
    compiler = getattr(torch, 'compiler', None)
    if compiler is not None and hasattr(compiler, 'is_compiling'):
        return compiler.is_compiling()
    dynamo = getattr(torch, '_dynamo', None)
    return bool(dynamo is not None and hasattr(dynamo, 'is_compiling') and dynamo.is_compiling())


def assume_constant_result(fn):
    """``torch.compiler.assume_constant_result`` where it exists (torch >= 2.1), else ``fn`` as is
    (then torch.compile traces ``fn`` and may break the graph there; eager mode is unaffected)."""
    deco = getattr(getattr(torch, 'compiler', None), 'assume_constant_result', None)
    return deco(fn) if deco is not None else fn
