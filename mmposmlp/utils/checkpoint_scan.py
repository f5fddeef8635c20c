"""Before torch reads a byte: the archive around a checkpoint's pickles, and every pickle torch will unpickle.

torch reads a zip archive (``data.pkl`` and one record per storage) or, for files older than torch 1.6, five
pickles in a row; a tar archive (torch < 0.4) it unpacks to disk. :func:`scan_file` refuses the archive layouts
that torch's reader and :mod:`zipfile` could read differently, then follows each pickle as torch's weights-only
unpickler will and refuses what a :class:`ScanPolicy` does not allow, before anything in it runs.
"""
import io
import pickletools
import struct
import tarfile
import zipfile
from typing import FrozenSet, NamedTuple, Tuple

import torch

from .plain_checkpoint import NUMERIC_DTYPES


class Refused(Exception):
    """What a file asks for that a data-only load refuses (a phrase: ``'a tar archive (...)'``)."""


class ScanPolicy(NamedTuple):
    """The ``(module, name)`` globals a pickle may name, call (REDUCE) and instantiate (NEWOBJ, no arguments)."""
    names: FrozenSet[Tuple[str, str]]
    calls: FrozenSet[Tuple[str, str]]
    new_objects: FrozenSet[Tuple[str, str]]


def describe(obj, n=80) -> str:
    """A short description of a value from the file (no repr of tensors or arbitrary objects)."""
    if getattr(obj, 'shown_as', None):
        text = obj.shown_as
    elif isinstance(obj, type):
        text = f'{obj.__module__}.{obj.__qualname__}'
    elif isinstance(obj, (str, bytes, int, float, complex, bool, type(None))):
        text = repr(obj[:n + 1] if isinstance(obj, (str, bytes)) else obj)
    elif type(obj) in (tuple, list):
        text = ', '.join(describe(x, 20) for x in obj[:4]) + (', ...' if len(obj) > 4 else '')
        text = f'({text})' if type(obj) is tuple else f'[{text}]'
    else:
        text = f'<{type(obj).__name__}>'
    return text if len(text) <= n else text[:n] + '...'


# ---------------------------------------------------------------------------------------------- the archive
class _Bounded:
    """A file whose reads never ask for more than what is left (pickletools reads an opcode's declared length)."""

    def __init__(self, f, end):
        self.f, self.end = f, end

    def read(self, n):
        return self.f.read(max(0, min(n, self.end - self.f.tell())))

    def readline(self):
        return self.f.readline(max(0, self.end - self.f.tell()))


def _offsets_as_written(f, z, size) -> bool:
    """zipfile shifts every offset when the central directory does not end where the end records say (data
    put before an archive); torch's reader does not, so the two would read different records."""
    end = size - 22 - len(z.comment)
    f.seek(end - 76)
    zip64, locator, record = (lambda b: (b[:56], b[56:76], b[76:]))(f.read(98))
    found = [struct.unpack('<II', record[12:20])]  # (size, offset) of the central directory
    if locator[:4] == b'PK\x06\x07':  # a zip64 end record, where zipfile expects it
        end -= 76
        if struct.unpack('<Q', locator[8:16])[0] != end or zip64[:4] != b'PK\x06\x06':
            return False
        found.append(struct.unpack('<QQ', zip64[40:56]))
    return all(cd_size + cd_offset == end or 0xFFFFFFFF in (cd_size, cd_offset) for cd_size, cd_offset in found)


def _data_pickle(f, size) -> bytes:
    """The ``data.pkl`` torch reads from a zip checkpoint, after checking the archive."""
    with zipfile.ZipFile(f) as z:
        infos = z.infolist()
        names = [i.filename for i in infos]
        top = names[0].split('/')[0] + '/' if names else '/'
        if any(n.endswith('constants.pkl') for n in names):
            raise Refused('TorchScript code (a torch.jit archive; load it with torch.jit.load if you trust it)')
        if len(set(names)) != len(names) or not all(n.startswith(top) for n in names):
            raise Refused('archive records named twice or outside the archive folder')
        if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or sum(i.file_size for i in infos) > size:
            raise Refused('archive records that are compressed or larger than the file')
        if not _offsets_as_written(f, z, size):
            raise Refused('a zip central directory away from where its end record puts it')
        return z.read(top + 'data.pkl')


def _pickles_in(f, size):
    """The pickles ``torch.load`` will read from ``f`` (an open file of ``size`` bytes at offset 0), each a file
    to read one pickle from."""
    if f.read(4) == b'PK\x03\x04':  # torch's own test for a zip checkpoint
        yield io.BytesIO(_data_pickle(f, size))
        return
    f.seek(0)
    if tarfile.is_tarfile(f):
        raise Refused('a tar archive (the torch < 0.4 format, which torch.load unpacks to disk)')
    f.seek(0)
    for _ in range(5):  # the legacy format: magic number, protocol, system info, the data, the storage keys
        yield _Bounded(f, size)


# ---------------------------------------------------------------------------------------------- the pickles
#: storage types a storage id may name (``torch.cuda.FloatStorage`` in old files), with their element type
STORAGES = {f'{m}.{n}Storage': getattr(torch, d) for m in ('torch', 'torch.cuda') for n, d in (
    ('Bool', 'bool'), ('Byte', 'uint8'), ('Char', 'int8'), ('Short', 'int16'), ('Int', 'int32'), ('Long', 'int64'),
    ('Half', 'float16'), ('Float', 'float32'), ('Double', 'float64'), ('BFloat16', 'bfloat16'),
    ('ComplexFloat', 'complex64'), ('ComplexDouble', 'complex128'))}
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
            raise Refused('a tensor with backward hooks')
        self.filled = True


def _made_by(x, *names):
    return isinstance(x, _Made) and any(x.by == n or x.by.endswith('.' + n) for n in names)


def _check_call(func, args):
    """The arguments a file passes, where the callee would let the file choose more than data."""
    if func == '_codecs.encode' and not (len(args) == 2 and isinstance(args[0], str) and
                                         args[1] in ('latin1', 'latin-1')):
        raise Refused(f'_codecs.encode{describe(args)} (only latin1 bytes are allowed)')
    if func == 'numpy.dtype' and not (len(args) in (1, 3) and args[0] in NUMERIC_DTYPES):
        raise Refused(f'numpy dtype {describe(args[0] if args else None)} (object, string, void and structured '
                       'dtypes are refused)')
    if func.endswith('._reconstruct') and not (len(args) == 3 and args[0] == 'numpy.ndarray' and args[1] == (0, )):
        raise Refused(f'numpy _reconstruct{describe(args)} (only an empty numpy.ndarray is allowed)')
    if func.endswith('.scalar') and not (len(args) == 2 and _made_by(args[0], 'numpy.dtype')):
        raise Refused('a numpy scalar without a plain numeric dtype (object scalars are refused)')
    if func == 'torch._utils._rebuild_from_type_v2' and len(args) == 4:
        func, args = 'torch._utils._rebuild_tensor_v2', args[2]  # the plain tensor it rebuilds
    i = _HOOKS_ARG.get(func)
    hooks = args[i] if i is not None and type(args) is tuple and len(args) > i else None
    if hooks is not None:  # backward hooks: an empty dict, never filled later
        if not _made_by(hooks, 'dict', 'OrderedDict') or hooks.filled:
            raise Refused('a tensor with backward hooks')
        hooks.is_hooks = True


def _check_state(inst, state):
    """BUILD: only on numpy dtypes and arrays, our placeholders and OrderedDicts, with states of data."""
    if _made_by(inst, 'numpy.dtype'):
        if not (type(state) is tuple and len(state) in (8, 9) and state[0] in (3, 4) and
                state[1] in ('<', '>', '|', '=') and all(s is None for s in state[2:5])):
            raise Refused(f'a numpy dtype with state {describe(state)} (only plain numeric dtypes are allowed)')
    elif _made_by(inst, '_reconstruct'):
        if not (type(state) is tuple and len(state) == 5 and _made_by(state[2], 'numpy.dtype')):
            raise Refused('a numpy array without a plain numeric dtype (object, string or structured arrays '
                           'are refused)')
        if not (isinstance(state[4], str) or _made_by(state[4], '_codecs.encode')):
            raise Refused(f'a numpy array whose data is {describe(state[4])}, not bytes (an object array)')
    elif not (_made_by(inst, 'OrderedDict', 'HistoryBuffer', 'Namespace') and _made_by(state, 'dict')):
        raise Refused(f'setting the state of {describe(inst)}')


def _storage(pid, limit):
    if not (type(pid) is tuple and len(pid) in (5, 6) and pid[0] == 'storage' and pid[1] in STORAGES):
        raise Refused(f'the persistent id {describe(pid)} (only tensor storages are allowed)')
    if not (type(pid[4]) is int and 0 <= pid[4] * STORAGES[pid[1]].itemsize <= limit):
        raise Refused(f'a storage of {describe(pid[4])} elements, larger than the file')
    return _Made('storage')


def _scan_pickle(f, limit, policy):
    """Follow one pickle as torch's unpickler will, and refuse before it runs what torch's default allow-list
    would let through (:func:`_risky_op`). Only the stack is followed: values are names and :class:`_Made`."""
    stack, metastack, memo = [], [], {}
    for op, arg, _ in pickletools.genops(f):
        code = op.name
        if code not in _OPCODES:
            raise Refused(f'the pickle opcode {code} (torch\'s weights-only unpickler reads pickle protocol 2, what '
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
        elif code in ('BINPUT', 'LONG_BINPUT'):
            memo[arg] = stack[-1]
        elif code in ('BINGET', 'LONG_BINGET'):
            stack.append(memo[arg])
        elif code.startswith('EMPTY_') and code != 'EMPTY_TUPLE':
            stack.append(_Made(code[6:].lower()))
        elif not _risky_op(code, arg, stack, limit, policy) and code != 'PROTO':
            stack.append(_CONSTANTS.get(code, arg))
    raise ValueError('pickle exhausted before STOP')


def _risky_op(code, arg, stack, limit, policy) -> bool:
    """The opcodes that name, call or build: another global or storage type, a call of a non-callable
    (``torch.Tensor(n)`` allocates), a new object of another class, the arguments and states
    :func:`_check_call` and :func:`_check_state` refuse, a storage larger than the file. False: not one of them."""
    if code == 'GLOBAL':
        name = _Name(*arg.split(' ', 1))
        if name.key not in policy.names and name not in STORAGES:
            raise Refused(f'the global {name}')
        stack.append(name)
    elif code == 'REDUCE':
        args, func = stack.pop(), stack[-1]
        if not (isinstance(func, _Name) and func.key in policy.calls and type(args) is tuple):
            raise Refused(f'a call of {describe(func)}' + ('' if type(args) is tuple else ' without a tuple'))
        _check_call(func, args)
        stack[-1] = _Made(func, filled=args != ())
    elif code == 'NEWOBJ':
        args, cls = stack.pop(), stack.pop()
        if not (isinstance(cls, _Name) and cls.key in policy.new_objects and args == ()):
            raise Refused(f'a new object of {describe(cls)}')
        stack.append(_Made(cls))
    elif code == 'BUILD':
        _check_state(stack[-2], stack.pop())
        stack[-1].fill()
    elif code == 'BINPERSID':
        stack[-1] = _storage(stack[-1], limit)
    else:
        return False
    return True


def scan_file(f, size, policy: ScanPolicy):
    """Check the archive and every pickle ``torch.load`` will read from ``f`` (an open file at offset 0)."""
    try:
        for pickle_file in _pickles_in(f, size):
            _scan_pickle(pickle_file, size, policy)
    finally:
        f.seek(0)
