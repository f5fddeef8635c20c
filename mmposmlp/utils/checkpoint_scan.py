"""Before torch reads a byte: the archive around a checkpoint's pickles, and what each pickle would have torch's
weights-only unpickler call or build.

That unpickler refuses any other opcode, global or persistent id, and appends or sets items only in lists and
dicts; but its default allow-list lets a file call ``bytearray(n)``, ``torch.Tensor(n)`` or ``UntypedStorage(n)``,
rebuild quantized, sparse or nested tensors, set a tensor's storage, and numpy's ``__setstate__`` turns file bytes
into object pointers. :func:`scan_file` follows each pickle's stack and refuses those before anything runs.
"""
import io
import pickletools
import struct
import tarfile
import zipfile

import torch

from .plain_checkpoint import NUMERIC_DTYPES


class Refused(Exception):
    """What a file asks for that a data-only load refuses (a phrase: ``'a tar archive (...)'``)."""


class _Value:
    """A value the pickle names or builds, as the scan sees it: ``key`` is the ``(module, name)`` of a global,
    None for a value made by ``by`` (a global's name, or ``'dict'``, ``'list'``, ``'set'``, ``'storage'``)."""

    def __init__(self, by, key=None):
        self.by, self.key = by, key
        self.shown_as = by if key else f'the result of {by}'


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
    """The pickles ``torch.load`` will read from ``f`` (``size`` bytes, at offset 0), each as a file."""
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
_POPS = dict(APPEND=1, SETITEM=2, TUPLE1=1, TUPLE2=2, TUPLE3=3)


def _made_by(x, *names) -> bool:
    return isinstance(x, _Value) and not x.key and any(x.by == n or x.by.endswith('.' + n) for n in names)


def _check_call(func, args):
    """The arguments a file passes, where the callee would let the file choose more than data."""
    if func == '_codecs.encode' and not (len(args) == 2 and isinstance(args[0], str) and
                                         args[1] in ('latin1', 'latin-1')):
        raise Refused(f'_codecs.encode{describe(args)} (only latin1 bytes are allowed)')
    if func == 'numpy.dtype' and not (len(args) in (1, 3) and args[0] in NUMERIC_DTYPES):
        raise Refused(f'numpy dtype {describe(args[0] if args else None)} (object, string, void and structured '
                       'dtypes are refused)')
    if func.endswith('._reconstruct') and not (len(args) == 3 and getattr(args[0], 'key', None) == (
            'numpy', 'ndarray') and args[1] == (0, )):
        raise Refused(f'numpy _reconstruct{describe(args)} (only an empty numpy.ndarray is allowed)')
    if func.endswith('.scalar') and not (len(args) == 2 and _made_by(args[0], 'numpy.dtype')):
        raise Refused('a numpy scalar without a plain numeric dtype (object scalars are refused)')


def _check_state(inst, state):
    """BUILD: only on numpy dtypes and arrays, OrderedDicts and our placeholders, with states of data."""
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
    kind = pid[1].by if type(pid) is tuple and len(pid) in (5, 6) and getattr(pid[1], 'key', None) else None
    if not (kind in STORAGES and pid[0] == 'storage'):
        raise Refused(f'the persistent id {describe(pid)} (only tensor storages are allowed)')
    if not (type(pid[4]) is int and 0 <= pid[4] * STORAGES[kind].itemsize <= limit):
        raise Refused(f'a storage of {describe(pid[4])} elements, larger than the file')
    return _Value('storage')


def _scan_pickle(f, limit, policy):
    """Follow one pickle's stack (names and :class:`_Value`, nothing built) and refuse another global or
    storage type, a call of a non-callable (``torch.Tensor(n)`` allocates), a new object of another class, the
    arguments and states :func:`_check_call` and :func:`_check_state` refuse, a storage larger than the file."""
    names, calls, new_objects = policy
    stack, marks, memo = [], [], {}
    for op, arg, _ in pickletools.genops(f):
        code = op.name
        if code not in _OPCODES:
            raise Refused(f'the pickle opcode {code} (torch\'s weights-only unpickler reads pickle protocol 2, what '
                           'torch.save writes by default)')
        if code == 'STOP':
            return
        if code in _POPS:
            n = _POPS[code]
            if len(stack) < n + (code in ('APPEND', 'SETITEM')):
                raise IndexError('pop from empty stack')
            items = stack[-n:]
            del stack[-n:]
            if code.startswith('TUPLE'):
                stack.append(tuple(items))
        elif code == 'MARK':
            marks.append(stack)
            stack = []
        elif code in ('TUPLE', 'APPENDS', 'SETITEMS'):
            items, stack = stack, marks.pop()
            if code == 'TUPLE':
                stack.append(tuple(items))
        elif code in ('BINPUT', 'LONG_BINPUT'):
            memo[arg] = stack[-1]
        elif code in ('BINGET', 'LONG_BINGET'):
            stack.append(memo[arg])
        elif code.startswith('EMPTY_') and code != 'EMPTY_TUPLE':
            stack.append(_Value(code[6:].lower()))
        elif code == 'GLOBAL':
            module, name = arg.split(' ', 1)
            if (module, name) not in names and f'{module}.{name}' not in STORAGES:
                raise Refused(f'the global {module}.{name}')
            stack.append(_Value(f'{module}.{name}', (module, name)))
        elif code == 'REDUCE':
            args, func = stack.pop(), stack[-1]
            if not (getattr(func, 'key', None) in calls and type(args) is tuple):
                raise Refused(f'a call of {describe(func)}' + ('' if type(args) is tuple else ' without a tuple'))
            _check_call(func.by, args)
            stack[-1] = _Value(func.by)
        elif code == 'NEWOBJ':
            args, cls = stack.pop(), stack.pop()
            if not (getattr(cls, 'key', None) in new_objects and args == ()):
                raise Refused(f'a new object of {describe(cls)}')
            stack.append(_Value(cls.by))
        elif code == 'BUILD':
            _check_state(stack[-2], stack.pop())
        elif code == 'BINPERSID':
            stack[-1] = _storage(stack[-1], limit)
        elif code != 'PROTO':
            stack.append(_CONSTANTS.get(code, arg))
    raise ValueError('pickle exhausted before STOP')


def scan_file(f, size, policy):
    """Check the archive and every pickle ``torch.load`` will read from ``f`` (an open file at offset 0);
    ``policy``: the ``(module, name)`` globals a file may name, call (REDUCE) and instantiate (NEWOBJ)."""
    try:
        for pickle_file in _pickles_in(f, size):
            _scan_pickle(pickle_file, size, policy)
    finally:
        f.seek(0)
