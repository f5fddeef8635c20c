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
import functools
import warnings

import numpy as np
import torch

#: numpy dtypes (kind and size) a checkpoint may hold: no object, string, void or structured ones
NUMERIC_DTYPES = frozenset({'b1', 'i1', 'u1', 'i2', 'u2', 'i4', 'u4', 'i8', 'u8', 'f2', 'f4', 'f8', 'c8', 'c16'})
#: values that are plain as they are
LEAVES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)
HISTORY_KEYS = frozenset({'log_history', 'count_history', 'max_length'})
_warned_types = set()


def is_state_dict_metadata(meta) -> bool:
    """``{module prefix: {'version': int, ...}}``, the ``_metadata`` attribute of ``Module.state_dict()``."""
    return type(meta) in (dict, collections.OrderedDict) and all(
        isinstance(k, str) and type(v) is dict and all(
            isinstance(a, str) and type(b) in (int, float, str, bool, type(None)) for a, b in v.items())
        for k, v in meta.items())


class PlainTree:
    """The one walk that copies a checkpoint's tree as plain data: :data:`LEAVES` and tensors as they are,
    containers rebuilt, numeric numpy values as tensors and numbers; an object met twice is copied once.

    The rest goes to the hooks, which say what a use does with it. As here, saving (:func:`to_plain_checkpoint`)
    makes a frozenset a set, drops ``OrderedDict`` attributes other than a state dict's ``_metadata``, converts
    what has a plain form and keeps anything else with a warning; loading (``safe_load._LoadedTree``) refuses.
    """
    frozenset_as = set  # torch's default weights-only allow-list has no frozenset

    def __init__(self):
        self.memo, self.active = {}, set()

    def __call__(self, x, depth=0):
        if type(x) in LEAVES:
            return x
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        self.enter(x, depth)
        if id(x) not in self.memo:
            self.active.add(id(x))
            self.memo[id(x)] = x, self.convert(x, depth + 1)  # x kept alive: its id names no other object
            self.active.discard(id(x))
        return self.memo[id(x)][1]

    def convert(self, x, depth):
        walk = functools.partial(self, depth=depth)
        if isinstance(x, dict):
            out = (collections.OrderedDict if isinstance(x, collections.OrderedDict) else dict)(
                (walk(k), walk(v)) for k, v in x.items())
            metadata = self.metadata(x)
            if metadata is not None:
                out._metadata = metadata  # module versions torch keeps with every state dict
            return out
        if isinstance(x, (list, tuple, set, frozenset)):
            kind = next((t for t in (list, tuple, set) if isinstance(x, t)), self.frozenset_as)
            return kind(walk(v) for v in x)
        if isinstance(x, (np.ndarray, np.generic)) and x.dtype.str[1:] in NUMERIC_DTYPES:
            if isinstance(x, np.generic):
                return x.item()
            return torch.from_numpy(np.ascontiguousarray(x, dtype=x.dtype.newbyteorder('=')).copy())  # own memory
        return self.other(x, walk)

    def tensor(self, x):
        return x

    def enter(self, x, depth):
        """Before ``x``, at ``depth``, is walked (``self.active``: the ids of those being walked)."""

    def metadata(self, x):
        """The state dict ``_metadata`` (module versions) the copy of mapping ``x`` keeps, or None."""
        meta = getattr(x, '_metadata', None)
        return meta if isinstance(x, collections.OrderedDict) and is_state_dict_metadata(meta) else None

    def other(self, x, walk):
        """What ``x``, none of the above, becomes; ``walk`` copies what it holds."""
        from mmengine.logging.history_buffer import HistoryBuffer
        if isinstance(x, HistoryBuffer):
            log, count = x.data
            return walk(plain_history(np.asarray(log), np.asarray(count), int(x.max_length)))
        if isinstance(x, (np.ndarray, np.generic)):  # object, string, void and structured ones as Python values
            return walk(x.tolist())
        for base in (bool, int, float, str, bytes):  # subclasses (e.g. IntEnum)
            if isinstance(x, base):
                return base(x)
        t = type(x)
        if t not in _warned_types:
            _warned_types.add(t)
            warnings.warn(f'checkpoint holds a {t.__module__}.{t.__qualname__}, which is not plain data: '
                          'loading this checkpoint will need --trust-checkpoint.')
        return x


def to_plain_checkpoint(obj):
    """A copy of a checkpoint holding only plain data (see the module docstring); namedtuples become tuples.

    Other objects are kept, with a warning: such a checkpoint then needs ``--trust-checkpoint`` to load.
    """
    return PlainTree()(obj)


def plain_history(log, count, max_length) -> dict:
    """A ``HistoryBuffer``'s state as the dict a checkpoint holds (:data:`HISTORY_KEYS`)."""
    return dict(log_history=log, count_history=count, max_length=max_length)


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
