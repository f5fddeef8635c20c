"""Checkpoints are data: loading them without running anything from the file.

Every checkpoint our tools, ``init_cfg`` and the converters read, and (once ``mmposmlp`` is imported)
every local or http(s) file mmengine's ``CheckpointLoader`` reads, goes through :func:`load_checkpoint`:

* ``torch.load`` with a restricted pickle module of our own (:class:`RestrictedUnpickler`). The only
  globals a file may name are in :data:`ALLOWED_GLOBALS`; each maps to a checking function of ours,
  never to the named object. Tensors are rebuilt from the archive's storages with bounds-checked
  offsets and sizes, numpy arrays and scalars (numeric dtypes only) become tensors and Python numbers,
  mmengine's ``HistoryBuffer`` becomes ``{'log_history', 'count_history', 'max_length'}`` and
  ``argparse.Namespace`` a dict. No object of a file-chosen class is built, no ``__setstate__`` runs,
  no class or module attribute is changed, torch's process-wide allow-list is not touched, and no
  buffer larger than the file is allocated.
* The result holds only tensors, dicts/lists/tuples/sets, numbers, strings, bytes, ``torch.dtype``,
  ``torch.device`` and ``torch.Size``.
* A file that needs anything else is refused with one sentence naming the file and what it asked for.
  Trusting a file is a per-command choice (``--trust-checkpoint`` in our tools, :func:`trusted_checkpoints`
  in code): only the files named there are unpickled without restrictions.

The save side (:func:`to_plain_checkpoint`) writes the same plain structure, so checkpoints our training
writes load with a plain ``torch.load(f, weights_only=True)`` (torch >= 2.6), with no allow-list.
"""
import collections
import contextlib
import contextvars
import io
import math
import os
import os.path as osp
import pickle
import re
import struct
import types
import warnings
import zipfile
from typing import Any, Iterable, Optional

import numpy as np
import torch

__all__ = ['UnsafeCheckpointError', 'ALLOWED_GLOBALS', 'load_checkpoint', 'to_plain_checkpoint',
           'history_buffer_from_plain', 'trusted_checkpoints', 'is_trusted', 'add_trust_argument',
           'register_mmengine_loaders']

TRUST_HINT = 'if you trust this file, rerun with --trust-checkpoint (or load it inside trusted_checkpoints([path]))'
MAX_DEPTH = 100


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint asked for something a data-only load refuses."""


# ---------------------------------------------------------------------------------------------- markers
class _Marker:
    """A name a file may mention but never call (e.g. ``numpy.ndarray`` as an argument of ``_reconstruct``)."""
    __slots__ = ('name', )

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f'<{self.name}>'


NDARRAY = _Marker('numpy.ndarray')
TENSOR_TYPE = _Marker('torch.Tensor')
PARAMETER_TYPE = _Marker('torch.nn.Parameter')


class _Stub:
    """Placeholder built by the unpickler; replaced by plain data once the whole file is read."""
    __slots__ = ()


class _DtypeStub(_Stub):
    __slots__ = ('code', 'order')
    NUMERIC = frozenset({'b1', 'i1', 'u1', 'i2', 'u2', 'i4', 'u4', 'i8', 'u8', 'f2', 'f4', 'f8', 'c8', 'c16'})

    def __init__(self, code):
        self.code, self.order = code, '='

    def build(self, state, refuse):
        if not (isinstance(state, tuple) and len(state) in (8, 9) and state[0] in (3, 4)
                and state[1] in ('<', '>', '|', '=') and all(s is None for s in state[2:5])):
            raise refuse(f'a numpy dtype with state {_short(state)} (only plain numeric dtypes are allowed)')
        self.order = state[1]

    def dtype(self):
        return np.dtype(self.code).newbyteorder(self.order)


class _ArrayStub(_Stub):
    __slots__ = ('shape', 'dtype', 'fortran', 'data')

    def __init__(self):
        self.shape, self.dtype, self.fortran, self.data = (0, ), None, False, b''

    def build(self, state, refuse):
        if isinstance(state, tuple) and len(state) == 5:
            state = state[1:]
        if not (isinstance(state, tuple) and len(state) == 4):
            raise refuse(f'a numpy array with state {_short(state)}')
        shape, dtype, fortran, data = state
        if not isinstance(dtype, _DtypeStub):
            raise refuse('a numpy array without a plain numeric dtype (object, string or structured arrays '
                         'are refused)')
        if not isinstance(data, (bytes, bytearray)):
            raise refuse(f'a numpy array whose data is {type(data).__name__}, not bytes (an object array)')
        if not (isinstance(shape, tuple) and all(type(s) is int and s >= 0 for s in shape)):
            raise refuse(f'a numpy array of shape {_short(shape)}')
        if math.prod(shape) * dtype.dtype().itemsize != len(data):
            raise refuse(f'a numpy array of shape {shape} with {len(data)} bytes of data')
        self.shape, self.dtype, self.fortran, self.data = shape, dtype, bool(fortran), bytes(data)

    def tensor(self):
        dt = self.dtype.dtype()
        arr = np.frombuffer(self.data, dtype=dt).reshape(self.shape, order='F' if self.fortran else 'C')
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=dt.newbyteorder('=')).copy())


class _HistoryBufferStub(_Stub):
    """mmengine's ``HistoryBuffer``; becomes the plain dict :func:`to_plain_checkpoint` writes."""
    __slots__ = ('state', )

    def __init__(self):
        self.state = None

    def build(self, state, refuse):
        keys = {'max_length', '_log_history', '_count_history'}
        if not (isinstance(state, dict) and keys <= set(state) <= keys | {'statistics_methods'}
                and type(state['max_length']) is int
                and all(isinstance(state[k], _ArrayStub) for k in ('_log_history', '_count_history'))):
            shown = sorted(map(str, state)) if isinstance(state, dict) else state
            raise refuse(f'a HistoryBuffer with state keys {_short(shown)}')
        methods = state.get('statistics_methods', {})
        if not (isinstance(methods, dict) and all(isinstance(v, _MethodRef) for v in methods.values())):
            raise refuse('HistoryBuffer statistics methods that are not HistoryBuffer methods')
        # the statistics methods are dropped: a load never changes HistoryBuffer._statistics_methods
        self.state = state


class _NamespaceStub(_Stub):
    """``argparse.Namespace`` (timm/DeiT training args): its attributes become a plain dict."""
    __slots__ = ('state', )

    def __init__(self):
        self.state = {}

    def build(self, state, refuse):
        if not (isinstance(state, dict) and all(isinstance(k, str) for k in state)):
            raise refuse('an argparse.Namespace whose state is not a dict of names')
        self.state = state


class _MethodRef(_Stub):
    __slots__ = ('name', )

    def __init__(self, name):
        self.name = name


_HistoryBufferStub._shown_as = 'mmengine.logging.history_buffer.HistoryBuffer'
_NamespaceStub._shown_as = 'argparse.Namespace'
_NEWOBJ_STUBS = (_HistoryBufferStub, _NamespaceStub)


# ---------------------------------------------------------------------------------------------- callables
class _Refuser:
    """Builds the one-sentence error for the file being read."""

    def __init__(self, source):
        self.source = source

    def __call__(self, what):
        return UnsafeCheckpointError(f'refusing to load {self.source}: it asks for {what}, which a data-only load '
                                     f'does not allow; {TRUST_HINT}.')


def _short(obj, n=80):
    """A short description of a value from the file (no repr of tensors or arbitrary objects)."""
    if isinstance(obj, (str, bytes, bytearray, int, float, complex, bool, type(None), _Marker)):
        text = repr(obj[:n + 1] if isinstance(obj, (str, bytes, bytearray)) else obj)
    elif type(obj) in (tuple, list):
        text = ', '.join(_short(x, 20) for x in obj[:4]) + (', ...' if len(obj) > 4 else '')
        text = f'({text})' if type(obj) is tuple else f'[{text}]'
    elif getattr(obj, '__module__', None) == __name__ and getattr(obj, '_shown_as', None):
        text = obj._shown_as  # our checker or placeholder: show what the file named
    elif isinstance(obj, type) or callable(obj) and hasattr(obj, '__qualname__'):
        text = f'{getattr(obj, "__module__", "?")}.{obj.__qualname__}'
    else:
        text = f'<{type(obj).__name__}>'
    return text if len(text) <= n else text[:n] + '...'


def _is_int_tuple(t):
    return isinstance(t, tuple) and all(type(v) is int and v >= 0 for v in t)


def _make_callables(refuse, limit):
    """The functions a file may call, each checking its arguments (``limit``: the file's size in bytes)."""

    def rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None, *rest):
        if rest or not isinstance(storage, torch.storage.TypedStorage):
            raise refuse('a tensor that is not backed by a storage of the archive')
        if not (type(offset) is int and offset >= 0 and _is_int_tuple(tuple(size)) and
                _is_int_tuple(tuple(stride)) and len(size) == len(stride) and type(requires_grad) is bool):
            raise refuse(f'a tensor with offset {_short(offset)}, size {_short(size)}, stride {_short(stride)}')
        if hooks:
            raise refuse('a tensor with backward hooks')
        if metadata is not None and not (isinstance(metadata, dict) and
                                         all(isinstance(k, str) and type(v) is bool for k, v in metadata.items())):
            raise refuse(f'tensor metadata {_short(metadata)}')
        size, stride = tuple(size), tuple(stride)
        numel = math.prod(size)
        if numel:
            end = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if end >= storage._size():
                raise refuse(f'a tensor view of {size} (stride {stride}, offset {offset}) beyond its storage of '
                             f'{storage._size()} elements')
            if numel * torch._utils._element_size(storage.dtype) > limit:
                raise refuse(f'a tensor of {numel} elements, larger than the file')
        return torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
                                               collections.OrderedDict(), metadata)

    def rebuild_parameter(data, requires_grad, hooks=None, *rest):
        if rest or type(data) is not torch.Tensor or type(requires_grad) is not bool or hooks:
            raise refuse('a Parameter with unexpected arguments')
        return torch.nn.Parameter(data, requires_grad)

    def rebuild_from_type_v2(func, new_type, args, state):
        if func is not rebuild_tensor_v2 or new_type is not TENSOR_TYPE or not isinstance(args, tuple) or state:
            raise refuse(f'_rebuild_from_type_v2({_short(func)}, {_short(new_type)}, ..., state={_short(state)}) '
                         '(only plain tensors without attributes are allowed)')
        return func(*args)

    def ordered_dict(*args):
        if args == ():
            return collections.OrderedDict()
        if len(args) == 1 and isinstance(args[0], list) and \
                all(isinstance(p, tuple) and len(p) == 2 for p in args[0]):
            return collections.OrderedDict(args[0])
        raise refuse('OrderedDict with unexpected arguments')

    def make_set(*args):
        if args == () or (len(args) == 1 and isinstance(args[0], list)):
            return set(*args)
        raise refuse('set() with unexpected arguments')

    def make_frozenset(*args):
        if args == () or (len(args) == 1 and isinstance(args[0], list)):
            return frozenset(*args)
        raise refuse('frozenset() with unexpected arguments')

    def make_complex(*args):
        if 1 <= len(args) <= 2 and all(type(a) in (int, float) for a in args):
            return complex(*args)
        raise refuse('complex() with unexpected arguments')

    def codecs_encode(text, encoding='utf-8', *rest):
        # protocol-2 pickles store bytes as _codecs.encode(str, 'latin1'): never longer than the text
        if rest or not isinstance(text, str) or encoding not in ('latin1', 'latin-1'):
            raise refuse(f'_codecs.encode(..., {_short(encoding)}) (only latin1 bytes are allowed)')
        return text.encode('latin1')

    def torch_size(dims=()):
        if not isinstance(dims, (tuple, list)) or not _is_int_tuple(tuple(dims)):
            raise refuse(f'torch.Size({_short(dims)})')
        return torch.Size(dims)

    def torch_device(kind, index=None):
        if not (isinstance(kind, str) and len(kind) < 64 and (index is None or type(index) is int)):
            raise refuse(f'torch.device({_short(kind)}, {_short(index)})')
        try:
            return torch.device(kind) if index is None else torch.device(kind, index)
        except (RuntimeError, ValueError) as e:
            raise refuse(f'torch.device({kind!r}) ({e})') from None

    def np_reconstruct(cls, shape=(0, ), dtype=b'b', *rest):
        if cls is not NDARRAY or rest:
            raise refuse(f'numpy _reconstruct of {_short(cls)} (only numpy.ndarray is allowed)')
        return _ArrayStub()

    def np_dtype(code, align=False, copy=True, *rest):
        if rest or not isinstance(code, str) or code not in _DtypeStub.NUMERIC:
            raise refuse(f'numpy dtype {_short(code)} (object, string, void and structured dtypes are refused)')
        return _DtypeStub(code)

    def np_scalar(dtype, data=None, *rest):
        if rest or not isinstance(dtype, _DtypeStub):
            raise refuse('a numpy scalar without a plain numeric dtype (object scalars are refused)')
        dt = dtype.dtype()
        if not isinstance(data, (bytes, bytearray)) or len(data) != dt.itemsize:
            raise refuse(f'a numpy {dt} scalar with {type(data).__name__} data')
        return np.frombuffer(bytes(data), dtype=dt)[0].item()

    def history_getattr(obj, name, *rest):
        # HistoryBuffer pickles its statistics methods as getattr(HistoryBuffer, 'min'): only that is allowed,
        # and it yields a name, not the method.
        if rest or obj is not _HistoryBufferStub or not isinstance(name, str) or \
                not re.fullmatch(r'[A-Za-z][A-Za-z0-9_]{0,63}', name):
            raise refuse(f'getattr({_short(obj)}, {_short(name)}) (only HistoryBuffer statistics methods '
                         'are allowed)')
        return _MethodRef(name)

    callables = dict(rebuild_tensor_v2=rebuild_tensor_v2, rebuild_parameter=rebuild_parameter,
                     rebuild_from_type_v2=rebuild_from_type_v2, ordered_dict=ordered_dict, set=make_set,
                     frozenset=make_frozenset, complex=make_complex, codecs_encode=codecs_encode,
                     torch_size=torch_size, torch_device=torch_device, np_reconstruct=np_reconstruct,
                     np_dtype=np_dtype, np_scalar=np_scalar,
                     history_getattr=history_getattr)
    for key, fn in callables.items():
        fn._shown_as = next('.'.join(k) for k, v in ALLOWED_GLOBALS.items() if v == key)
    return callables


_NUMPY_CORE = ('numpy.core.multiarray', 'numpy._core.multiarray')
_TORCH_DTYPES = tuple(sorted(n for n, v in vars(torch).items() if isinstance(v, torch.dtype)))

#: Every global a checkpoint may name, and what it stands for (a checking function of ours, a marker or a
#: placeholder class; never the named object). Pinned by tests/test_checkpoint_safety.py.
ALLOWED_GLOBALS = {
    ('collections', 'OrderedDict'): 'ordered_dict',
    ('torch._utils', '_rebuild_tensor_v2'): 'rebuild_tensor_v2',
    ('torch._utils', '_rebuild_parameter'): 'rebuild_parameter',
    ('torch._utils', '_rebuild_from_type_v2'): 'rebuild_from_type_v2',
    ('torch', 'Tensor'): TENSOR_TYPE,
    ('torch._tensor', 'Tensor'): TENSOR_TYPE,
    ('torch.nn.parameter', 'Parameter'): PARAMETER_TYPE,
    ('torch', 'Size'): 'torch_size',
    ('torch', 'device'): 'torch_device',
    ('_codecs', 'encode'): 'codecs_encode',
    ('builtins', 'set'): 'set',
    ('builtins', 'frozenset'): 'frozenset',
    ('builtins', 'complex'): 'complex',
    ('__builtin__', 'set'): 'set',
    ('__builtin__', 'frozenset'): 'frozenset',
    ('__builtin__', 'complex'): 'complex',
    ('builtins', 'getattr'): 'history_getattr',
    ('__builtin__', 'getattr'): 'history_getattr',
    ('numpy', 'ndarray'): NDARRAY,
    ('numpy', 'dtype'): 'np_dtype',
    ('mmengine.logging.history_buffer', 'HistoryBuffer'): _HistoryBufferStub,
    ('argparse', 'Namespace'): _NamespaceStub,
    **{(m, '_reconstruct'): 'np_reconstruct' for m in _NUMPY_CORE},
    **{(m, 'scalar'): 'np_scalar' for m in _NUMPY_CORE},
    **{('torch', n): getattr(torch, n) for n in _TORCH_DTYPES},
}


# ---------------------------------------------------------------------------------------------- unpickler
class RestrictedUnpickler(pickle._Unpickler):
    """A pure-Python unpickler that only builds data (see the module docstring).

    Subclassed per load by :func:`_pickle_module` with ``_refuse`` (error factory naming the file),
    ``_limit`` (the file's size) and ``_callables`` (from :func:`_make_callables`).
    """
    dispatch = dict(pickle._Unpickler.dispatch)
    _refuse = _Refuser('<unknown>')
    _limit = 0
    _callables = {}

    def find_class(self, module, name):
        target = ALLOWED_GLOBALS.get((module, name))
        if target is None:
            raise self._refuse(f'the global {module}.{name}')
        return self._callables[target] if isinstance(target, str) else target

    @property
    def persistent_load(self):
        fn = getattr(self, '_persistent_load', None)
        if fn is None:
            raise self._refuse('a persistent id outside a torch archive')
        return fn

    @persistent_load.setter
    def persistent_load(self, fn):
        refuse, limit = self._refuse, self._limit

        def checked(pid):
            if not (isinstance(pid, tuple) and len(pid) in (5, 6)):
                raise refuse(f'the persistent id {_short(pid)}')
            kind = pid[0].decode('ascii') if isinstance(pid[0], bytes) else pid[0]
            storage_type, key, location, numel = pid[1:5]
            dtype = getattr(storage_type, 'dtype', None)
            if kind != 'storage' or not isinstance(dtype, torch.dtype) or \
                    type(storage_type) is not torch.serialization.StorageType:
                raise refuse(f'the persistent id {_short(pid)} (only tensor storages are allowed)')
            if not (isinstance(key, str) and re.fullmatch(r'\w{1,64}', key) and isinstance(location, str) and
                    len(location) < 64 and type(numel) is int and 0 <= numel * torch._utils._element_size(dtype)
                    <= limit):
                raise refuse(f'a storage {_short((key, location, numel))} larger than the file or badly named')
            if len(pid) == 6 and not (pid[5] is None or _is_int_tuple(pid[5])):
                raise refuse(f'the storage view {_short(pid[5])}')
            return fn(pid)

        self._persistent_load = checked

    # -- opcodes that build or mutate objects
    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if not any(func is c for c in self._callables.values()):
            raise self._refuse(f'a call of {_short(func)}')
        if type(args) is not tuple:
            raise self._refuse('a call with non-tuple arguments')
        self.stack[-1] = func(*args)

    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if cls not in _NEWOBJ_STUBS or args != ():
            raise self._refuse(f'a new object of {_short(cls)}')
        self.append(cls())

    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        if cls not in _NEWOBJ_STUBS or args != () or kwargs != {}:
            raise self._refuse(f'a new object of {_short(cls)}')
        self.append(cls())

    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) is collections.OrderedDict and _is_state_dict_metadata(state):
            inst._metadata = state['_metadata']  # module versions torch keeps with every state_dict
            return
        if type(inst) not in (_DtypeStub, _ArrayStub, _HistoryBufferStub, _NamespaceStub):
            raise self._refuse(f'setting the state of {_short(inst)}')
        inst.build(state, self._refuse)

    dispatch[pickle.BUILD[0]] = load_build

    def _refuse_opcode(name):

        def refuse(self):
            raise self._refuse(f'the pickle opcode {name}')

        return refuse

    for _op in ('INST', 'OBJ', 'EXT1', 'EXT2', 'EXT4'):
        dispatch[getattr(pickle, _op)[0]] = _refuse_opcode(_op)
    del _op, _refuse_opcode

    def load_setitem(self):
        value = self.stack.pop()
        key = self.stack.pop()
        self._check_type(self.stack[-1], (dict, collections.OrderedDict), 'SETITEM')
        self.stack[-1][key] = value

    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        self._check_type(target, (dict, collections.OrderedDict), 'SETITEMS')
        if len(items) % 2:
            raise self._refuse('SETITEMS with an odd number of items')
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_append(self):
        value = self.stack.pop()
        self._check_type(self.stack[-1], (list, ), 'APPEND')
        self.stack[-1].append(value)

    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        items = self.pop_mark()
        self._check_type(self.stack[-1], (list, ), 'APPENDS')
        self.stack[-1].extend(items)

    dispatch[pickle.APPENDS[0]] = load_appends

    def load_additems(self):
        items = self.pop_mark()
        self._check_type(self.stack[-1], (set, ), 'ADDITEMS')
        self.stack[-1].update(items)

    dispatch[pickle.ADDITEMS[0]] = load_additems

    def _check_type(self, obj, types_, op):
        if type(obj) not in types_:
            raise self._refuse(f'{op} on {type(obj).__name__}')


def _is_state_dict_metadata(state) -> bool:
    """``{'_metadata': {module prefix: {'version': int, ...}}}``, the attribute of ``Module.state_dict()``."""
    if not (isinstance(state, dict) and set(state) == {'_metadata'}):
        return False
    meta = state['_metadata']
    return type(meta) in (dict, collections.OrderedDict) and all(
        isinstance(k, str) and type(v) is dict and all(
            isinstance(a, str) and type(b) in (int, float, str, bool, type(None)) for a, b in v.items())
        for k, v in meta.items())


def _pickle_module(source: str, limit: int):
    """A pickle-module namespace for ``torch.load(pickle_module=...)`` bound to one file."""
    refuse = _Refuser(source)
    cls = type('RestrictedUnpickler', (RestrictedUnpickler, ),
               dict(_refuse=refuse, _limit=limit, _callables=_make_callables(refuse, limit)))

    def load(file, **kwargs):
        return cls(file, **kwargs).load()

    return types.SimpleNamespace(__name__='mmposmlp.utils.safe_load', Unpickler=cls, load=load,
                                 UnpicklingError=pickle.UnpicklingError)


# ---------------------------------------------------------------------------------------------- plain data
_LEAVES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


def _to_plain_loaded(obj, refuse):
    """Replace placeholders by plain data; refuse cycles, deep nesting and anything not plain."""
    memo, active = {}, set()

    def walk(x, depth):
        t = type(x)
        if t in _LEAVES or t is torch.Tensor or t is torch.nn.Parameter:
            return x
        if t is bytearray:
            return bytes(x)
        key = id(x)
        if key in memo:
            return memo[key]
        if key in active:
            raise refuse('a self-referencing structure')
        if depth > MAX_DEPTH:
            raise refuse(f'data nested deeper than {MAX_DEPTH} levels')
        active.add(key)
        if t in (dict, collections.OrderedDict):
            out = t((walk(k, depth + 1), walk(v, depth + 1)) for k, v in x.items())
            if hasattr(x, '_metadata'):
                out._metadata = x._metadata
        elif t in (list, tuple, set, frozenset):
            out = t(walk(v, depth + 1) for v in x)
        elif t is _ArrayStub:
            out = x.tensor()
        elif t is _DtypeStub:
            out = str(x.dtype())
        elif t is _MethodRef:
            out = f'HistoryBuffer.{x.name}'
        elif t is _HistoryBufferStub:
            if x.state is None:
                raise refuse('a HistoryBuffer without state')
            out = dict(log_history=x.state['_log_history'].tensor(),
                       count_history=x.state['_count_history'].tensor(), max_length=x.state['max_length'])
        elif t is _NamespaceStub:
            out = {k: walk(v, depth + 1) for k, v in x.state.items()}
        else:
            raise refuse(f'an object of type {t.__name__}')
        active.discard(key)
        memo[key] = out
        return out

    return walk(obj, 0)


# ---------------------------------------------------------------------------------------------- trust
_TRUSTED: contextvars.ContextVar = contextvars.ContextVar('mmposmlp_trusted_checkpoints', default=frozenset())


def _trust_key(file) -> Optional[str]:
    if isinstance(file, (str, os.PathLike)):
        text = os.fspath(file)
        return text if '://' in text else osp.realpath(osp.expanduser(text))
    return None


@contextlib.contextmanager
def trusted_checkpoints(paths: Iterable):
    """Within this context (this thread/task only), the given files are unpickled without restrictions.

    This runs whatever code the files contain: use it only for files you made or trust.
    """
    keys = frozenset(k for k in (_trust_key(p) for p in paths if p) if k)
    token = _TRUSTED.set(_TRUSTED.get() | keys)
    try:
        yield keys
    finally:
        _TRUSTED.reset(token)


def is_trusted(file) -> bool:
    key = _trust_key(file)
    return key is not None and key in _TRUSTED.get()


def add_trust_argument(parser):
    """``--trust-checkpoint`` for a command-line tool (the one spelling all our tools share)."""
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='unpickle the checkpoint(s) this command names without restrictions. This runs any '
                        'code stored in them: use it only for files you trust (e.g. an old checkpoint that needs '
                        'a class). Without it, checkpoints load as data only.')
    return parser


# ---------------------------------------------------------------------------------------------- loading
def _file_size(file) -> int:
    if isinstance(file, (str, os.PathLike)):
        return osp.getsize(file)
    pos = file.tell()
    file.seek(0, io.SEEK_END)
    size = file.tell() - pos
    file.seek(pos)
    return size


def _check_archive(file, refuse, size):
    """Refuse TorchScript archives (torch.load would run them) and compressed or overlapping records."""
    pos = None if isinstance(file, (str, os.PathLike)) else file.tell()
    try:
        if not zipfile.is_zipfile(file):
            return
        if pos is not None:
            file.seek(pos)
        with zipfile.ZipFile(file) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError) as e:
        raise UnsafeCheckpointError(f'cannot load {refuse.source}: it is a damaged archive ({e}).') from None
    finally:
        if pos is not None:
            file.seek(pos)
    names = [i.filename for i in infos]
    if any(n.endswith('constants.pkl') for n in names):
        raise refuse('TorchScript code (a torch.jit archive; load it with torch.jit.load if you trust it)')
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or sum(i.file_size for i in infos) > size:
        raise refuse('archive records that are compressed or larger than the file')


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
    refuse = _Refuser(source)
    size = _file_size(file)
    _check_archive(file, refuse, size)
    if os.environ.get('TORCH_FORCE_WEIGHTS_ONLY_LOAD', '0').lower() in ('1', 'y', 'yes', 'true'):
        return torch.load(file, map_location=map_location, weights_only=True)  # torch's own restricted loader
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='.*weights_only.*')
        try:
            data = torch.load(file, map_location=map_location, weights_only=False,
                              pickle_module=_pickle_module(source, size))
        except UnsafeCheckpointError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                RuntimeError, OverflowError, MemoryError, UnicodeDecodeError, struct.error) as e:
            raise UnsafeCheckpointError(f'cannot load {source}: it is not a readable torch checkpoint '
                                        f'({type(e).__name__}: {str(e)[:200]}).') from None
    return _to_plain_loaded(data, refuse)


# ---------------------------------------------------------------------------------------------- saving
_NUMERIC_KINDS = 'biufc'
_warned_types = set()


def _array_to_plain(arr: np.ndarray):
    if arr.dtype.kind in _NUMERIC_KINDS and arr.dtype.str[1:] in _DtypeStub.NUMERIC:
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder('=')).copy())
    return to_plain_checkpoint(arr.tolist())


def to_plain_checkpoint(obj):
    """A copy of a checkpoint holding only what ``torch.load(weights_only=True)`` reads without an allow-list.

    ``HistoryBuffer`` -> ``{'log_history': tensor, 'count_history': tensor, 'max_length': int}`` (exactly its
    state), numeric numpy arrays -> tensors, numpy scalars -> Python numbers, namedtuples -> tuples. Other
    objects are kept (with a warning: such a checkpoint then needs ``--trust-checkpoint`` to load).
    """
    from mmengine.logging.history_buffer import HistoryBuffer
    memo = {}

    def walk(x):
        t = type(x)
        if t in _LEAVES or isinstance(x, torch.Tensor):
            return x
        if id(x) in memo:
            return memo[id(x)]
        if isinstance(x, HistoryBuffer):
            out = dict(log_history=_array_to_plain(np.asarray(x._log_history)),
                       count_history=_array_to_plain(np.asarray(x._count_history)), max_length=int(x.max_length))
        elif isinstance(x, np.ndarray):
            out = _array_to_plain(x)
        elif isinstance(x, np.generic):
            out = x.item()
            out = out if type(out) in _LEAVES else walk(out)
        elif isinstance(x, collections.OrderedDict):
            out = collections.OrderedDict((walk(k), walk(v)) for k, v in x.items())
            if _is_state_dict_metadata({'_metadata': getattr(x, '_metadata', None)}):
                out._metadata = x._metadata
        elif isinstance(x, dict):
            out = {walk(k): walk(v) for k, v in x.items()}
        elif isinstance(x, (list, tuple, set, frozenset)):  # frozenset -> set (torch's safe loader has no frozenset)
            base = list if isinstance(x, list) else tuple if isinstance(x, tuple) else set
            out = base(walk(v) for v in x)
        elif isinstance(x, (bool, int, float, str, bytes)):  # subclasses (e.g. IntEnum)
            out = next(b for b in (bool, int, float, str, bytes) if isinstance(x, b))(x)
        else:
            if t not in _warned_types:
                _warned_types.add(t)
                warnings.warn(f'checkpoint holds a {t.__module__}.{t.__qualname__}, which is not plain data: '
                              'loading this checkpoint will need --trust-checkpoint.')
            out = x
        memo[id(x)] = out
        return out

    return walk(obj)


def history_buffer_from_plain(state):
    """The ``HistoryBuffer`` a plain ``{'log_history', 'count_history', 'max_length'}`` dict describes."""
    from mmengine.logging.history_buffer import HistoryBuffer
    if isinstance(state, HistoryBuffer):
        return state
    if not (isinstance(state, dict) and set(state) == {'log_history', 'count_history', 'max_length'}):
        return None

    def arr(v):
        return v.detach().cpu().numpy().copy() if isinstance(v, torch.Tensor) else np.asarray(v)

    buf = HistoryBuffer(max_length=int(state['max_length']))
    buf._log_history, buf._count_history = arr(state['log_history']), arr(state['count_history'])
    return buf


# ---------------------------------------------------------------------------------------------- mmengine
#: Where mmengine checkpoints keep config *text* that stock code runs with ``Config.fromstring``
#: (``Runner.resume``/``FlexibleRunner.resume``: ``meta['config']``; ``BaseInferencer`` given only weights:
#: ``message_hub['runtime_info']['cfg']`` or ``meta['cfg']``).
CONFIG_TEXT_ENTRIES = (('meta', 'config'), ('meta', 'cfg'), ('message_hub', 'runtime_info', 'cfg'))


_KEEP_CONFIG_TEXT = contextvars.ContextVar('mmposmlp_keep_config_text', default=False)


@contextlib.contextmanager
def keep_config_text():
    """Within this context the CheckpointLoader schemes keep the config text: for a caller of ours that
    reads it as data (resume reads the GPU count as a literal) and removes it before mmengine sees it."""
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


def _load_from_local(filename, map_location):
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return drop_config_text(load_checkpoint(filename, map_location), filename)


def _load_from_http(filename, map_location, model_dir=None, progress=True):
    """mmengine's ``load_from_http`` (download once into torch's hub cache), then a data-only load."""
    from mmengine.dist import barrier, get_dist_info
    from torch.hub import download_url_to_file, get_dir
    rank, world_size = get_dist_info()
    model_dir = model_dir or osp.join(get_dir(), 'checkpoints')
    cached = osp.join(model_dir, osp.basename(filename.split('?')[0]))

    def fetch():
        if not osp.isfile(cached):
            os.makedirs(model_dir, exist_ok=True)
            download_url_to_file(filename, cached, None, progress=progress)

    if rank == 0:
        fetch()
    if world_size > 1:
        barrier()
        if rank > 0:
            fetch()
    ckpt = load_checkpoint(cached, map_location, source=filename, trusted=True if is_trusted(filename) else None)
    return drop_config_text(ckpt, filename)


def register_mmengine_loaders() -> None:
    """Make mmengine's ``CheckpointLoader`` read local and http(s) files with :func:`load_checkpoint`.

    Called when ``mmposmlp`` is imported (``custom_imports`` or a ``type='mmposmlp.X'`` do that), so stock
    APIs (Inferencers, ``get_model``, ``init_recognizer``, the libraries' tools/test.py) read mmengine
    checkpoints as data under torch >= 2.6. Registering is the only global change; loads change nothing.
    """
    from mmengine.runner.checkpoint import CheckpointLoader
    if CheckpointLoader._schemes.get('') is not _load_from_local:
        CheckpointLoader.register_scheme(prefixes='', loader=_load_from_local, force=True)
        CheckpointLoader.register_scheme(prefixes=('http://', 'https://'), loader=_load_from_http, force=True)
