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
    return tuple(allowed)


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
