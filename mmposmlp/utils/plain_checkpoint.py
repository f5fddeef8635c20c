"""Checkpoints as plain data: what our training writes, what a data-only load returns, and the stored config
text that stock code would execute, dropped.

Plain means tensors, containers (dict; list, tuple, set; ``OrderedDict`` with at most a state dict's
``_metadata``), numbers, strings, bytes, dtypes, devices and sizes, which ``torch.load(f, weights_only=True)``
reads with no allow-list. mmengine's ``HistoryBuffer`` becomes ``{'log_history', 'count_history',
'max_length'}`` (exactly its state), numeric numpy arrays tensors, numpy scalars Python numbers.
"""
import collections
import contextlib
import contextvars
import warnings

import numpy as np
import torch

#: numpy dtypes (kind and size) a checkpoint may hold: no object, string, void or structured ones
NUMERIC_DTYPES = frozenset({'b1', 'i1', 'u1', 'i2', 'u2', 'i4', 'u4', 'i8', 'u8', 'f2', 'f4', 'f8', 'c8', 'c16'})
#: values that are plain as they are
LEAVES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)
HISTORY_KEYS = frozenset({'log_history', 'count_history', 'max_length'})
_warned_types = set()


def is_state_dict_metadata(attrs) -> bool:
    """``{'_metadata': {module prefix: {'version': int, ...}}}``, the attribute of ``Module.state_dict()``."""
    meta = attrs.get('_metadata') if isinstance(attrs, dict) and set(attrs) == {'_metadata'} else None
    return type(meta) in (dict, collections.OrderedDict) and all(
        isinstance(k, str) and type(v) is dict and all(
            isinstance(a, str) and type(b) in (int, float, str, bool, type(None)) for a, b in v.items())
        for k, v in meta.items())


def array_to_plain(arr: np.ndarray):
    """A numeric array as a tensor (native byte order, own memory); any other array as plain lists."""
    if arr.dtype.str[1:] in NUMERIC_DTYPES:
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder('=')).copy())
    return to_plain_checkpoint(arr.tolist())


def to_plain_checkpoint(obj):
    """A copy of a checkpoint holding only plain data (see the module docstring); namedtuples become tuples.

    Other objects are kept, with a warning: such a checkpoint then needs ``--trust-checkpoint`` to load.
    """
    from mmengine.logging.history_buffer import HistoryBuffer
    memo = {}

    def walk(x):
        t = type(x)
        if t in LEAVES or isinstance(x, torch.Tensor):
            return x
        if id(x) not in memo:
            memo[id(x)] = convert(x, t)
        return memo[id(x)]

    def convert(x, t):
        if isinstance(x, HistoryBuffer):
            log, count = x.data
            return dict(log_history=array_to_plain(np.asarray(log)), count_history=array_to_plain(np.asarray(count)),
                        max_length=int(x.max_length))
        if isinstance(x, np.ndarray):
            return array_to_plain(x)
        if isinstance(x, np.generic):
            out = x.item()
            return out if type(out) in LEAVES else walk(out)
        if isinstance(x, collections.OrderedDict):
            out = collections.OrderedDict((walk(k), walk(v)) for k, v in x.items())
            if is_state_dict_metadata({'_metadata': getattr(x, '_metadata', None)}):
                out._metadata = x._metadata
            return out
        if isinstance(x, dict):
            return {walk(k): walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple, set, frozenset)):  # frozenset -> set (torch's safe loader has no frozenset)
            base = list if isinstance(x, list) else tuple if isinstance(x, tuple) else set
            return base(walk(v) for v in x)
        for base in (bool, int, float, str, bytes):  # subclasses (e.g. IntEnum)
            if isinstance(x, base):
                return base(x)
        if t not in _warned_types:
            _warned_types.add(t)
            warnings.warn(f'checkpoint holds a {t.__module__}.{t.__qualname__}, which is not plain data: '
                          'loading this checkpoint will need --trust-checkpoint.')
        return x

    return walk(obj)


def history_buffer_from_plain(state):
    """The ``HistoryBuffer`` a plain ``{'log_history', 'count_history', 'max_length'}`` dict describes, else None."""
    from mmengine.logging.history_buffer import HistoryBuffer
    if isinstance(state, HistoryBuffer):
        return state
    if not (isinstance(state, dict) and set(state) == HISTORY_KEYS):
        return None

    def arr(v):
        return v.detach().cpu().numpy().copy() if isinstance(v, torch.Tensor) else np.asarray(v)

    return HistoryBuffer(arr(state['log_history']), arr(state['count_history']), int(state['max_length']))


#: Where mmengine checkpoints keep config *text* that stock code runs with ``Config.fromstring``
#: (``Runner.resume``/``FlexibleRunner.resume``: ``meta['config']``; ``BaseInferencer`` given only weights:
#: ``message_hub['runtime_info']['cfg']`` or ``meta['cfg']``).
CONFIG_TEXT_ENTRIES = (('meta', 'config'), ('meta', 'cfg'), ('message_hub', 'runtime_info', 'cfg'))
_KEEP_CONFIG_TEXT = contextvars.ContextVar('mmposmlp_keep_config_text', default=False)


@contextlib.contextmanager
def keep_config_text():
    """Within this context :func:`drop_config_text` keeps the config text: for a caller of ours that reads it
    as data (resume reads the GPU count as a literal) and removes it before mmengine sees it."""
    token = _KEEP_CONFIG_TEXT.set(True)
    try:
        yield
    finally:
        _KEEP_CONFIG_TEXT.reset(token)


def drop_config_text(ckpt, source: str):
    """Remove the config text entries (:data:`CONFIG_TEXT_ENTRIES`) of a loaded checkpoint, so that no
    stock code reached through mmengine's ``CheckpointLoader`` executes text read from the file. A caller
    that needs the config passes it (e.g. ``DetInferencer(model=CONFIG, weights=FILE)``)."""
    if _KEEP_CONFIG_TEXT.get():
        return ckpt
    dropped = []
    for path in CONFIG_TEXT_ENTRIES:
        parent = ckpt
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and isinstance(parent.get(path[-1]), str):
            del parent[path[-1]]
            dropped.append('.'.join(path))
    if dropped:
        from mmengine.logging import print_log
        print_log(f'{source}: ignored the stored config text ({", ".join(dropped)}): mmposmlp never executes '
                  'text read from a checkpoint; pass the config explicitly', logger='current')
    return ckpt
