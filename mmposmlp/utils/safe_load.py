"""Checkpoints are data: loading them without running anything from the file.

Every checkpoint our tools, ``init_cfg`` and the converters read, and (once :func:`register_mmengine_loaders`
ran) every local or http(s) file mmengine's ``CheckpointLoader`` reads, goes through :func:`load_checkpoint`:
torch's own restricted unpickler, ``torch.load(f, weights_only=True)``, with checks for what it does not cover.

* Before torch reads a byte, the archive (:mod:`.checkpoint_archive`) and every pickle in it
  (:func:`_scan_pickle`) are checked: only the globals of :data:`ALLOWED_GLOBALS`, calls only of
  :data:`CALLABLE`, numpy only with numeric dtypes, no backward hooks, no storage larger than the file.
  torch's default allow-list alone would let a file call ``bytearray(n)`` or ``torch.Tensor(n)`` for any
  ``n`` and rebuild quantized, sparse or nested tensors.
* During the load torch's process-wide allow-list is exactly ours (:func:`_torch_allow_list_is_ours`):
  ``HistoryBuffer`` and ``argparse.Namespace`` resolve to placeholders of ours, never to the named class.
* After torch, the result becomes plain data (:mod:`.plain_checkpoint`, :func:`_to_plain_loaded`); cycles,
  nesting deeper than :data:`MAX_DEPTH`, tensors larger than the file and ``OrderedDict`` attributes other
  than a state dict's ``_metadata`` are refused.

A refusal is one sentence naming the file and what it asked for. Trusting a file is a per-command choice
(``--trust-checkpoint`` in our tools, :func:`trusted_checkpoints` in code): only the files named there are
unpickled without restrictions. Checkpoints our training writes (:func:`to_plain_checkpoint`) load with a plain
``torch.load(f, weights_only=True)``.
"""
import collections
import contextlib
import io
import os
import os.path as osp
import pickle
import pickletools
import re
import struct
import threading
import zipfile
from typing import Any, Optional

import numpy as np
import torch

from .checkpoint_archive import Refused as _Refusal
from .checkpoint_archive import pickles_in
from .plain_checkpoint import (LEAVES, NUMERIC_DTYPES, array_to_plain, drop_config_text,  # noqa: F401
                               history_buffer_from_plain, is_state_dict_metadata, keep_config_text,
                               to_plain_checkpoint)
from .trust import TRUST_HINT, add_trust_argument, is_trusted, trusted_checkpoints  # noqa: F401

__all__ = ['UnsafeCheckpointError', 'ALLOWED_GLOBALS', 'load_checkpoint', 'to_plain_checkpoint',
           'history_buffer_from_plain', 'trusted_checkpoints', 'is_trusted', 'add_trust_argument',
           'keep_config_text', 'register_mmengine_loaders']

MAX_DEPTH = 100


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint asked for something a data-only load refuses."""


def _short(obj, n=80):
    """A short description of a value from the file (no repr of tensors or arbitrary objects)."""
    if getattr(obj, 'shown_as', None):
        text = obj.shown_as
    elif isinstance(obj, type):
        text = f'{obj.__module__}.{obj.__qualname__}'
    elif isinstance(obj, (str, bytes, int, float, complex, bool, type(None))):
        text = repr(obj[:n + 1] if isinstance(obj, (str, bytes)) else obj)
    elif type(obj) in (tuple, list):
        text = ', '.join(_short(x, 20) for x in obj[:4]) + (', ...' if len(obj) > 4 else '')
        text = f'({text})' if type(obj) is tuple else f'[{text}]'
    else:
        text = f'<{type(obj).__name__}>'
    return text if len(text) <= n else text[:n] + '...'


# ---------------------------------------------------------------------------------------------- what a file names
class _Placeholder:
    """Stands for a class whose objects a file may hold; keeps their state as data."""
    state = None

    def __setstate__(self, state):
        self.state = state


class _HistoryBuffer(_Placeholder):
    shown_as = 'mmengine.logging.history_buffer.HistoryBuffer'


class _Namespace(_Placeholder):
    shown_as = 'argparse.Namespace'


def _rebuild_from_type_v2(func, new_type, args, state):
    if func is not torch._utils._rebuild_tensor_v2 or new_type is not torch.Tensor or state:
        raise _Refusal(f'_rebuild_from_type_v2 of {_short(new_type)} with state {_short(state)} (only plain '
                       'tensors without attributes are allowed)')
    return func(*args)


def _history_getattr(obj, name, *rest):
    """HistoryBuffer pickles its statistics methods as ``getattr(HistoryBuffer, 'min')``: a name, not the method."""
    if rest or obj is not _HistoryBuffer or not isinstance(name, str) or \
            not re.fullmatch(r'[A-Za-z][A-Za-z0-9_]{0,63}', name):
        raise _Refusal(f'getattr({_short(obj)}, {_short(name)}) (only HistoryBuffer statistics methods are allowed)')
    return f'HistoryBuffer.{name}'


_NP_CORE = ('numpy.core.multiarray', 'numpy._core.multiarray')
#: the functions numpy's own pickles name (numpy 1 and 2 spell their module differently)
_NP_PICKLE = dict(_reconstruct=np.zeros(0).__reduce__()[0], scalar=np.float32(0).__reduce__()[0])
_DTYPES = {('torch', n): v for n, v in vars(torch).items() if isinstance(v, torch.dtype) and str(v) == f'torch.{n}'}

#: Every global a checkpoint may name (besides the storage types of :data:`STORAGES`), and the object torch's
#: unpickler gets for it. Pinned by tests/test_checkpoint_safety.py.
ALLOWED_GLOBALS = {
    ('collections', 'OrderedDict'): collections.OrderedDict,
    ('torch._utils', '_rebuild_tensor_v2'): torch._utils._rebuild_tensor_v2,
    ('torch._utils', '_rebuild_parameter'): torch._utils._rebuild_parameter,
    ('torch._utils', '_rebuild_from_type_v2'): _rebuild_from_type_v2,
    ('torch', 'Tensor'): torch.Tensor,
    ('torch._tensor', 'Tensor'): torch.Tensor,
    ('torch.nn.parameter', 'Parameter'): torch.nn.Parameter,
    ('torch', 'Size'): torch.Size,
    ('torch', 'device'): torch.device,
    ('_codecs', 'encode'): __import__('_codecs').encode,
    **{(m, n): f for m in ('builtins', '__builtin__')
       for n, f in (('set', set), ('frozenset', frozenset), ('complex', complex), ('getattr', _history_getattr))},
    ('numpy', 'ndarray'): np.ndarray,
    ('numpy', 'dtype'): np.dtype,
    **{(m, n): f for m in _NP_CORE for n, f in _NP_PICKLE.items()},
    ('mmengine.logging.history_buffer', 'HistoryBuffer'): _HistoryBuffer,
    ('argparse', 'Namespace'): _Namespace,
    **_DTYPES,
}
#: names torch's unpickler resolves itself (to the objects above); torch maps ``__builtin__`` to ``builtins``
TORCH_DEFAULTS = {('collections', 'OrderedDict'), ('torch._utils', '_rebuild_tensor_v2'),
                  ('torch._utils', '_rebuild_parameter'), ('torch', 'Tensor'), ('torch.nn.parameter', 'Parameter'),
                  ('torch', 'Size'), ('torch', 'device'), ('_codecs', 'encode'), ('builtins', 'set'),
                  ('builtins', 'complex'), *_DTYPES}
#: names a file may call (REDUCE); the others are only values (classes, dtypes)
CALLABLE = {k for k in ALLOWED_GLOBALS if k not in _DTYPES and k[1] not in (
    'Tensor', 'Parameter', 'ndarray', 'HistoryBuffer', 'Namespace')}
#: classes a file may instantiate (NEWOBJ without arguments, then BUILD with their state)
NEWOBJ = {('mmengine.logging.history_buffer', 'HistoryBuffer'), ('argparse', 'Namespace')}
#: storage types a storage id may name (``torch.cuda.FloatStorage`` in old files), with their element type
STORAGES = {f'{m}.{n}Storage': getattr(torch, d) for m in ('torch', 'torch.cuda') for n, d in (
    ('Bool', 'bool'), ('Byte', 'uint8'), ('Char', 'int8'), ('Short', 'int16'), ('Int', 'int32'), ('Long', 'int64'),
    ('Half', 'float16'), ('Float', 'float32'), ('Double', 'float64'), ('BFloat16', 'bfloat16'),
    ('ComplexFloat', 'complex64'), ('ComplexDouble', 'complex128'))}
#: torch's allow-list during a load: the objects above under the names torch does not know, and the types
#: whose state torch then lets a file set (numpy's dtype classes, our placeholders)
_TORCH_ENTRIES = [(v, f'{m}.{n}') for (m, n), v in ALLOWED_GLOBALS.items()
                  if (m, n) not in TORCH_DEFAULTS and m != '__builtin__'] + [
                      (type(np.dtype(c)), f'numpy.dtypes.{type(np.dtype(c)).__name__}') for c in NUMERIC_DTYPES]


# ---------------------------------------------------------------------------------------------- before torch
#: the opcodes torch's weights-only unpickler reads (protocol 2, what ``torch.save`` writes)
_OPCODES = frozenset(
    'PROTO STOP GLOBAL NEWOBJ REDUCE BUILD APPEND APPENDS SETITEM SETITEMS MARK TUPLE TUPLE1 TUPLE2 TUPLE3 NONE '
    'NEWFALSE NEWTRUE EMPTY_TUPLE EMPTY_LIST EMPTY_DICT EMPTY_SET BININT BININT1 BININT2 BINFLOAT BINUNICODE '
    'SHORT_BINSTRING BINPERSID BINGET LONG_BINGET BINPUT LONG_BINPUT LONG1'.split())
_CONSTANTS = dict(NONE=None, NEWFALSE=False, NEWTRUE=True, EMPTY_TUPLE=())
_HOOKS_ARG = {'torch._utils._rebuild_tensor_v2': 5, 'torch._utils._rebuild_parameter': 2}


class _Name(str):
    """A global, as the scan sees it."""

    def __new__(cls, module, name):
        out = super().__new__(cls, f'{module}.{name}')
        out.key, out.shown_as = (module, name), f'{module}.{name}'
        return out


class _Made:
    """An object the pickle builds, as the scan sees it: what made it, whether items were put in it."""

    def __init__(self, by, filled=False, is_hooks=False):
        self.by, self.filled, self.is_hooks, self.shown_as = by, filled, is_hooks, f'the result of {by}'

    def fill(self):
        if self.is_hooks:
            raise _Refusal('a tensor with backward hooks')
        self.filled = True


def _made_by(x, *names):
    return isinstance(x, _Made) and any(x.by == n or x.by.endswith('.' + n) for n in names)


def _check_call(func, args):
    """The arguments a file passes, where the callee would let the file choose more than data."""
    if func == '_codecs.encode' and not (len(args) == 2 and isinstance(args[0], str) and
                                         args[1] in ('latin1', 'latin-1')):
        raise _Refusal(f'_codecs.encode{_short(args)} (only latin1 bytes are allowed)')
    if func == 'numpy.dtype' and not (len(args) in (1, 3) and args[0] in NUMERIC_DTYPES):
        raise _Refusal(f'numpy dtype {_short(args[0] if args else None)} (object, string, void and structured '
                       'dtypes are refused)')
    if func.endswith('._reconstruct') and not (len(args) == 3 and args[0] == 'numpy.ndarray' and args[1] == (0, )):
        raise _Refusal(f'numpy _reconstruct{_short(args)} (only an empty numpy.ndarray is allowed)')
    if func.endswith('.scalar') and not (len(args) == 2 and _made_by(args[0], 'numpy.dtype')):
        raise _Refusal('a numpy scalar without a plain numeric dtype (object scalars are refused)')
    if func == 'torch._utils._rebuild_from_type_v2' and len(args) == 4:
        func, args = 'torch._utils._rebuild_tensor_v2', args[2]  # the plain tensor it rebuilds
    i = _HOOKS_ARG.get(func)
    hooks = args[i] if i is not None and type(args) is tuple and len(args) > i else None
    if hooks is not None:  # backward hooks: an empty dict, never filled later
        if not _made_by(hooks, 'dict', 'OrderedDict') or hooks.filled:
            raise _Refusal('a tensor with backward hooks')
        hooks.is_hooks = True


def _check_state(inst, state):
    """BUILD: only on numpy dtypes and arrays, our placeholders and OrderedDicts, with states of data."""
    if _made_by(inst, 'numpy.dtype'):
        if not (type(state) is tuple and len(state) in (8, 9) and state[0] in (3, 4) and
                state[1] in ('<', '>', '|', '=') and all(s is None for s in state[2:5])):
            raise _Refusal(f'a numpy dtype with state {_short(state)} (only plain numeric dtypes are allowed)')
    elif _made_by(inst, '_reconstruct'):
        if not (type(state) is tuple and len(state) == 5 and _made_by(state[2], 'numpy.dtype')):
            raise _Refusal('a numpy array without a plain numeric dtype (object, string or structured arrays '
                           'are refused)')
        if not (isinstance(state[4], str) or _made_by(state[4], '_codecs.encode')):
            raise _Refusal(f'a numpy array whose data is {_short(state[4])}, not bytes (an object array)')
    elif not (_made_by(inst, 'OrderedDict', 'HistoryBuffer', 'Namespace') and _made_by(state, 'dict')):
        raise _Refusal(f'setting the state of {_short(inst)}')


def _storage(pid, limit):
    if not (type(pid) is tuple and len(pid) in (5, 6) and pid[0] == 'storage' and pid[1] in STORAGES):
        raise _Refusal(f'the persistent id {_short(pid)} (only tensor storages are allowed)')
    if not (type(pid[4]) is int and 0 <= pid[4] * STORAGES[pid[1]].itemsize <= limit):
        raise _Refusal(f'a storage of {_short(pid[4])} elements, larger than the file')
    return _Made('storage')


def _scan_pickle(f, limit):
    """Follow one pickle as torch's unpickler will, and refuse before it runs what torch's default allow-list
    would let through: another global, opcode or storage type, a call of a non-callable (``torch.Tensor(n)``
    allocates), a new object of another class, the arguments and states :func:`_check_call` and
    :func:`_check_state` refuse, a storage larger than the file."""
    stack, metastack, memo = [], [], {}
    for op, arg, _ in pickletools.genops(f):
        code = op.name
        if code not in _OPCODES:
            raise _Refusal(f'the pickle opcode {code} (torch\'s weights-only unpickler reads pickle protocol 2, what '
                           'torch.save writes by default)')
        if code == 'STOP':
            return
        if code == 'MARK':
            metastack.append(stack)
            stack = []
        elif code in ('TUPLE', 'APPENDS', 'SETITEMS'):
            items, stack = stack, metastack.pop()
            if code == 'TUPLE':
                stack.append(tuple(items))
            elif isinstance(stack[-1], _Made):
                stack[-1].fill()
        elif code in ('TUPLE1', 'TUPLE2', 'TUPLE3'):
            n = int(code[-1])
            if len(stack) < n:
                raise IndexError('pop from empty stack')
            stack[-n:] = [tuple(stack[-n:])]
        elif code in ('APPEND', 'SETITEM'):
            del stack[-(2 if code == 'SETITEM' else 1):]
            if isinstance(stack[-1], _Made):
                stack[-1].fill()
        elif code == 'BUILD':
            _check_state(stack[-2], stack.pop())
            stack[-1].fill()
        elif code == 'REDUCE':
            args, func = stack.pop(), stack[-1]
            if not (isinstance(func, _Name) and func.key in CALLABLE and type(args) is tuple):
                raise _Refusal(f'a call of {_short(func)}' + ('' if type(args) is tuple else ' without a tuple'))
            _check_call(func, args)
            stack[-1] = _Made(func, filled=args != ())
        elif code == 'NEWOBJ':
            args, cls = stack.pop(), stack.pop()
            if not (isinstance(cls, _Name) and cls.key in NEWOBJ and args == ()):
                raise _Refusal(f'a new object of {_short(cls)}')
            stack.append(_Made(cls))
        elif code == 'BINPERSID':
            stack[-1] = _storage(stack[-1], limit)
        elif code in ('BINPUT', 'LONG_BINPUT'):
            memo[arg] = stack[-1]
        elif code in ('BINGET', 'LONG_BINGET'):
            stack.append(memo[arg])
        elif code == 'GLOBAL':
            name = _Name(*arg.split(' ', 1))
            if name.key not in ALLOWED_GLOBALS and name not in STORAGES:
                raise _Refusal(f'the global {name}')
            stack.append(name)
        elif code.startswith('EMPTY_') and code != 'EMPTY_TUPLE':
            stack.append(_Made(code[6:].lower()))
        elif code != 'PROTO':
            stack.append(_CONSTANTS.get(code, arg))
    raise ValueError('pickle exhausted before STOP')


def _scan_file(f, size):
    """Check the archive and every pickle ``torch.load`` will read from ``f`` (an open file at offset 0)."""
    try:
        for pickle_file in pickles_in(f, size):
            _scan_pickle(pickle_file, size)
    finally:
        f.seek(0)


# ---------------------------------------------------------------------------------------------- after torch
def _history_state(x):
    keys = {'max_length', '_log_history', '_count_history'}
    state = x.state if isinstance(x.state, dict) else {}
    if not (keys <= set(state) <= keys | {'statistics_methods'} and type(state['max_length']) is int and
            all(type(state[k]) is np.ndarray for k in ('_log_history', '_count_history'))):
        raise _Refusal(f'a HistoryBuffer with state {_short(sorted(map(str, state)) or x.state)}')
    # the statistics methods are dropped: a load never changes HistoryBuffer._statistics_methods
    return dict(log_history=state['_log_history'], count_history=state['_count_history'],
                max_length=state['max_length'])


def _to_plain_loaded(obj, limit):
    """Replace numpy values and placeholders by plain data; refuse cycles, deep nesting, tensors larger than
    the file and anything not plain."""
    memo, active = {}, set()

    def walk(x, depth):
        t = type(x)
        if t in LEAVES:
            return x
        if t in (torch.Tensor, torch.nn.Parameter):
            if x.numel() * x.element_size() > limit:
                raise _Refusal(f'a tensor of {x.numel()} elements, larger than the file')
            return x
        if id(x) in active:
            raise _Refusal('a self-referencing structure')
        if depth > MAX_DEPTH:
            raise _Refusal(f'data nested deeper than {MAX_DEPTH} levels')
        if id(x) not in memo:
            active.add(id(x))
            memo[id(x)] = convert(x, t, depth + 1)
            active.discard(id(x))
        return memo[id(x)]

    def convert(x, t, depth):
        if t in (dict, collections.OrderedDict):
            out = t((walk(k, depth), walk(v, depth)) for k, v in x.items())
            attrs = getattr(x, '__dict__', None)
            if attrs and not is_state_dict_metadata(attrs):
                raise _Refusal(f'OrderedDict attributes {_short(sorted(map(str, attrs)))}')
            if attrs:
                out._metadata = attrs['_metadata']  # module versions torch keeps with every state_dict
            return out
        if t in (list, tuple, set, frozenset):
            return t(walk(v, depth) for v in x)
        if t is np.ndarray and x.dtype.str[1:] in NUMERIC_DTYPES:
            return array_to_plain(x)
        if isinstance(x, np.generic) and x.dtype.str[1:] in NUMERIC_DTYPES:
            return x.item()
        if isinstance(x, np.dtype):
            return str(x)
        if t is _HistoryBuffer:
            return walk(_history_state(x), depth)
        if t is _Namespace and isinstance(x.state, dict) and all(isinstance(k, str) for k in x.state):
            return {k: walk(v, depth) for k, v in x.state.items()}
        raise _Refusal(f'{_short(x)} without a state of data' if t in (_HistoryBuffer, _Namespace) else
                       f'an object of type {t.__name__}')

    return walk(obj, 0)


# ---------------------------------------------------------------------------------------------- loading
_ALLOW_LIST_LOCK = threading.Lock()


@contextlib.contextmanager
def _torch_allow_list_is_ours():
    """torch's process-wide allow-list holds exactly our entries during a load and the caller's after it."""
    with _ALLOW_LIST_LOCK:
        saved = torch.serialization.get_safe_globals()
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(_TORCH_ENTRIES)
        try:
            yield
        finally:
            torch.serialization.clear_safe_globals()
            torch.serialization.add_safe_globals(saved)


@contextlib.contextmanager
def _opened(file):
    """The file at offset 0: a path opened once (torch reads the handle the scan read), or a file object's
    bytes from its current position."""
    if isinstance(file, (str, os.PathLike)):
        with open(file, 'rb') as f:
            yield f
    else:
        yield io.BytesIO(file.read())


_READ_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                RuntimeError, OverflowError, MemoryError, UnicodeDecodeError, struct.error, zipfile.BadZipFile,
                RecursionError)


def load_checkpoint(file, map_location='cpu', source: Optional[str] = None, trusted: Optional[bool] = None) -> Any:
    """Load a torch checkpoint as data (see the module docstring).

    Args:
        file: a path or a binary file object.
        map_location: as in ``torch.load``.
        source: the name used in error messages (default: the path).
        trusted: ``True`` unpickles without restrictions (runs code from the file); ``None`` (default) does so
            only for files inside :func:`trusted_checkpoints`.
    """
    if source is None:
        source = os.fspath(file) if isinstance(file, (str, os.PathLike)) else getattr(file, 'name', '<file object>')
    if trusted is None:
        trusted = is_trusted(file)
    if trusted:
        return torch.load(file, map_location=map_location, weights_only=False)
    if isinstance(file, (str, os.PathLike)) and os.fspath(file).endswith('.safetensors'):
        return torch.load(file, map_location=map_location, weights_only=True)
    try:
        with _opened(file) as f:
            size = f.seek(0, io.SEEK_END)
            f.seek(0)
            _scan_file(f, size)
            with _torch_allow_list_is_ours():
                data = torch.load(f, map_location=map_location, weights_only=True, mmap=False)
        return _to_plain_loaded(data, size)
    except _Refusal as e:
        raise UnsafeCheckpointError(f'refusing to load {source}: it asks for {e}, which a data-only load does not '
                                    f'allow; {TRUST_HINT}.') from None
    except _READ_ERRORS as e:
        reason = ' '.join(str(e).split('WeightsUnpickler error: ')[-1].split())[:200]
        raise UnsafeCheckpointError(f'cannot load {source}: it is not a readable torch checkpoint '
                                    f'({type(e).__name__}: {reason}).') from None


# ---------------------------------------------------------------------------------------------- mmengine
def _load_from_local(filename, map_location):
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return drop_config_text(load_checkpoint(filename, map_location), filename)


def _load_from_http(filename, map_location, model_dir=None, progress=True):
    """mmengine's ``load_from_http`` made safe: downloaded once into torch's hub cache with a bounded wait and
    the published hash checked (:func:`mmposmlp.utils.download.fetch`), then a data-only load."""
    from .download import fetch
    trusted = True if is_trusted(filename) else None

    def load(path):
        return load_checkpoint(path, map_location, source=filename, trusted=trusted)

    return drop_config_text(fetch(filename, load), filename)


def register_mmengine_loaders() -> None:
    """Make mmengine's ``CheckpointLoader`` read local and http(s) files with :func:`load_checkpoint`
    (mmengine's public ``register_scheme``; calling it again changes nothing).

    Once registered, stock APIs (Inferencers, ``get_model``, ``init_recognizer``, the libraries'
    tools/test.py) read mmengine checkpoints as data. Registering is the only global change; loads change nothing.
    """
    from mmengine.runner.checkpoint import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes='', loader=_load_from_local, force=True)
    CheckpointLoader.register_scheme(prefixes=('http://', 'https://'), loader=_load_from_http, force=True)
