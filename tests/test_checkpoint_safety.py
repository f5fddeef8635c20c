"""Checkpoints are data: crafted files through every loading path, plain checkpoints from training, resume
that executes nothing, work-dir confinement, per-command trust, and stock OpenMMLab APIs reading our files.

Payloads try to create a marker file; each must be refused with one sentence naming the file (or load as
inert data), leave no marker, change no global (torch's allow-list, HistoryBuffer's class state, imported
modules) and stay within memory bounded by the file (risky ones run in a subprocess).
"""
import collections
import io
import json
import os
import os.path as osp
import pickle
import struct
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest
import torch

from toolcfg import RESNET18_CLS, load_tool, repo_path, run_tool, write_cfg

CONVERTERS = repo_path('tools', 'model_converters')


# ------------------------------------------------------------------------------------------ crafting files
def S(text):  # BINUNICODE
    b = text.encode()
    return b'X' + struct.pack('<I', len(b)) + b


def G(module, name):  # GLOBAL
    return b'c' + module.encode() + b'\n' + name.encode() + b'\n'


def T(*items):  # MARK ... TUPLE
    return b'(' + b''.join(items) + b't'


def I(n):  # BININT, or LONG1 for large numbers
    if -2 ** 31 <= n < 2 ** 31:
        return b'J' + struct.pack('<i', n)
    data = pickle.encode_long(n)
    return b'\x8a' + bytes([len(data)]) + data


def pkl(body):
    return b'\x80\x02' + body + b'.'


def call(module, name, *args):
    return G(module, name) + T(*args) + b'R'


def torch_zip(data_pkl, storages=None, extra=None, compress=zipfile.ZIP_STORED):
    """A torch zip archive around a hand-written ``data.pkl``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w', compress) as z:
        z.writestr('archive/data.pkl', data_pkl)
        z.writestr('archive/byteorder', 'little')
        for k, v in (storages or {}).items():
            z.writestr(f'archive/data/{k}', v)
        for k, v in (extra or {}).items():
            z.writestr(k, v)
        z.writestr('archive/version', '3\n')
    return buf.getvalue()


def storage_pid(key='0', numel=1, kind='FloatStorage'):
    return T(S('storage'), G('torch', kind), S(key), S('cpu'), I(numel)) + b'Q'


def tensor_call(size, stride, numel=1, offset=0, func=('torch._utils', '_rebuild_tensor_v2')):
    return call(*func, storage_pid(numel=numel), I(offset), T(*map(I, size)), T(*map(I, stride)), b'\x89',
                call('collections', 'OrderedDict'))


NP = 'numpy._core.multiarray'


def np_array(code, shape, data, order='<', state_extra=b'N' * 3):
    dtype = call('numpy', 'dtype', S(code), b'\x89\x88') + T(I(3), S(order), state_extra, I(-1), I(-1), I(0)) + b'b'
    arr = call(NP, '_reconstruct', G('numpy', 'ndarray'), T(I(0)), call('_codecs', 'encode', S('b'), S('latin1')))
    return arr + T(I(1), T(*map(I, shape)), dtype, b'\x89', data) + b'b'


def latin1(raw):
    return call('_codecs', 'encode', S(raw.decode('latin1')), S('latin1'))


def payloads(marker):
    """(name, archive bytes) of crafted checkpoints; every code-running one would create ``marker``."""
    cmd = f'touch {marker}'
    py = f"__import__('os').system('touch {marker}')"
    sh = T(S('sh'), S('-c'), S(cmd))
    out = []

    def add(name, body, **kw):
        out.append((name, torch_zip(pkl(body), **kw)))

    # GLOBAL + REDUCE of callables that run code (the allowed set must never grow to include them)
    for module, name, args in [
            ('os', 'system', (S(cmd), )), ('posix', 'system', (S(cmd), )), ('builtins', 'eval', (S(py), )),
            ('builtins', 'exec', (S(py), )), ('__builtin__', 'eval', (S(py), )), ('builtins', 'compile', (S(py), )),
            ('builtins', '__import__', (S('os'), )), ('importlib', 'import_module', (S('os'), )),
            ('subprocess', 'call', (b']' + b'(' + S('sh') + S('-c') + S(cmd) + b'e', )),
            ('subprocess', 'Popen', (sh, )), ('os', 'popen', (S(cmd), )), ('pty', 'spawn', (S('sh'), )),
            ('runpy', 'run_path', (S('/dev/null'), )), ('code', 'InteractiveInterpreter', ()),
            ('pickle', 'loads', (latin1(pickle.dumps((os.system, (cmd, )))), )),
            ('torch', 'load', (S('/dev/null'), )), ('torch.jit', 'load', (S('/dev/null'), )),
            ('torch.serialization', 'add_safe_globals', (b']', )), ('numpy', 'load', (S('/dev/null'), )),
            ('mmengine.config', 'Config', ()), ('mmengine', 'Config', ()),
            ('functools', 'partial', (G('os', 'system'), S(cmd))), ('operator', 'attrgetter', (S('system'), )),
            ('operator', 'methodcaller', (S('system'), S(cmd))), ('copyreg', '_reconstructor', ()),
            ('collections', 'defaultdict', (G('builtins', 'list'), )), ('builtins', 'bytearray', (I(2 ** 30), )),
            ('builtins', 'type', (S('x'), b')', b'}')), ('builtins', 'object', ()), ('sys', 'exit', ()),
            ('torch._utils', '_rebuild_parameter_with_state', ()), ('torch._utils', '_rebuild_qtensor', ()),
            ('torch._utils', '_rebuild_device_tensor_from_numpy', ()), ('torch', '_C', ()),
            ('torch.storage', '_load_from_bytes', (latin1(b'x'), )), ('numpy', 'frombuffer', ()),
            ('numpy.lib.format', 'read_array', ()), ('argparse', 'ArgumentParser', ())]:
        add(f'call {module}.{name}', call(module, name, *args))
    add('STACK_GLOBAL os.system', S('os') + S('system') + b'\x93' + T(S(cmd)) + b'R')
    add('STACK_GLOBAL builtins.eval', S('builtins') + S('eval') + b'\x93' + T(S(py)) + b'R')
    # getattr chains: only getattr(HistoryBuffer, <public name>) is allowed, and it yields a name
    hb = G('mmengine.logging.history_buffer', 'HistoryBuffer')
    add('getattr HistoryBuffer.__init__', call('builtins', 'getattr', hb, S('__init__')))
    add('getattr HistoryBuffer.__class__', call('__builtin__', 'getattr', hb, S('__class__')))
    add('getattr numpy.ndarray.tofile', call('builtins', 'getattr', G('numpy', 'ndarray'), S('tofile')))
    add('getattr OrderedDict.fromkeys', call('builtins', 'getattr', G('collections', 'OrderedDict'), S('fromkeys')))
    add('getattr chain to __globals__', call('builtins', 'getattr', call('builtins', 'getattr', hb, S('update')),
                                             S('__globals__')))
    add('call the getattr result', call('builtins', 'getattr', hb, S('update')) + T(S(cmd)) + b'R')
    add('call torch.Tensor (allocates)', G('torch', 'Tensor') + T(I(2 ** 30)) + b'R')
    add('call numpy.ndarray', G('numpy', 'ndarray') + T(I(2 ** 30)) + b'R')
    add('call the HistoryBuffer class', hb + T() + b'R')
    add('call torch.float32', G('torch', 'float32') + T() + b'R')
    # object-building opcodes
    add('INST os.system', b'(' + S(cmd) + b'ios\nsystem\n')
    add('INST OrderedDict', b'(icollections\nOrderedDict\n')
    add('OBJ OrderedDict', b'(' + G('collections', 'OrderedDict') + b'o')
    add('OBJ os.system', b'(' + G('os', 'system') + S(cmd) + b'o')
    add('NEWOBJ OrderedDict', G('collections', 'OrderedDict') + b')\x81')
    add('NEWOBJ HistoryBuffer with args', hb + T(S('x')) + b'\x81')
    add('NEWOBJ_EX HistoryBuffer with kwargs', hb + b')}' + S('a') + I(1) + b's\x92')
    add('EXT1', b'\x82\x01')
    add('EXT2', b'\x83\x01\x00')
    add('PERSID text', b'P' + b'0\n')
    add('BINPERSID non-storage', T(S('module'), G('collections', 'OrderedDict')) + b'Q')
    # class-state pollution: BUILD on a class, on a function, on a container
    add('BUILD on HistoryBuffer class', hb + b'N}' + S('_statistics_methods') + b'}s\x86b')
    add('BUILD on HistoryBuffer class dict', hb + b'}' + S('_statistics_methods') + b'}sb')
    add('BUILD on OrderedDict', call('collections', 'OrderedDict') + b'}' + S('__class__') + I(1) + b'sb')
    add('BUILD OrderedDict _metadata of objects', call('collections', 'OrderedDict') + b'}' + S('_metadata') + b'}'
        + S('') + call('builtins', 'set') + b'ssb')
    add('BUILD on a tensor', tensor_call((1, ), (1, )) + b'}' + S('grad') + I(1) + b'sb',
        storages={'0': b'\0' * 4})
    add('SETITEM on a tensor', tensor_call((1, ), (1, )) + I(0) + I(1) + b's', storages={'0': b'\0' * 4})
    add('APPEND on a set', call('builtins', 'set') + I(1) + b'a')
    # tensor rebuild routes
    add('_rebuild_from_type_v2 with state', call('torch._utils', '_rebuild_from_type_v2',
                                                 G('torch._utils', '_rebuild_tensor_v2'), G('torch', 'Tensor'),
                                                 T(storage_pid(), I(0), T(I(1)), T(I(1)), b'\x89',
                                                   call('collections', 'OrderedDict')),
                                                 b'}' + S('__dict__') + I(1) + b's'), storages={'0': b'\0' * 4})
    add('_rebuild_from_type_v2 calling getattr', call('torch._utils', '_rebuild_from_type_v2',
                                                      G('builtins', 'getattr'), G('torch', 'Tensor'),
                                                      T(hb, S('update')), b'}'))
    add('_rebuild_from_type_v2 to Parameter type', call('torch._utils', '_rebuild_from_type_v2',
                                                        G('torch._utils', '_rebuild_tensor_v2'),
                                                        G('torch.nn.parameter', 'Parameter'),
                                                        T(storage_pid(), I(0), T(I(1)), T(I(1)), b'\x89',
                                                          call('collections', 'OrderedDict')), b'N'),
        storages={'0': b'\0' * 4})
    add('tensor without storage', call('torch._utils', '_rebuild_tensor_v2', S('x'), I(0), T(I(1)), T(I(1)),
                                       b'\x89', call('collections', 'OrderedDict')))
    add('tensor with backward hooks', call('torch._utils', '_rebuild_tensor_v2', storage_pid(), I(0), T(I(1)),
                                           T(I(1)), b'\x89', call('collections', 'OrderedDict') + S('h') +
                                           G('torch', 'float32') + b's'), storages={'0': b'\0' * 4})
    add('tensor view beyond storage', tensor_call((4, ), (1, )), storages={'0': b'\0' * 4})
    add('tensor view one element past its storage', tensor_call((2, ), (1, )), storages={'0': b'\0' * 4})
    # numpy: object, void and structured dtypes, object scalars
    add('numpy object array (pointer bytes)', np_array('O8', (1, ), latin1(b'AAAAAAAA')))
    add('numpy object array (list)', np_array('f8', (1, ), b']' + I(1) + b'a'))
    add('numpy void dtype', np_array('V8', (1, ), latin1(b'AAAAAAAA')))
    add('numpy structured dtype', np_array('f8', (1, ), latin1(b'A' * 8),
                                           state_extra=b'N' + T(S('a')) + b'}'))
    add('numpy object scalar', call(NP, 'scalar', call('numpy', 'dtype', S('O8'), b'\x89\x88'), latin1(b'A' * 8)))
    add('numpy _reconstruct of another class', call(NP, '_reconstruct', G('collections', 'OrderedDict'), T(I(0)),
                                                    latin1(b'b')))
    # structure bombs
    add('self-referencing list', b']q\x00h\x00a')
    add('nested 500 deep', b']' * 500 + b'a' * 499)
    add('nested 100000 deep', b']' * 100000 + b'a' * 99999)
    # what torch's own default allow-list admits and a data-only load must not
    for module, name, args in [
            ('torch', 'FloatTensor', (I(2 ** 30), )), ('torch._tensor', '_rebuild_from_type_v2', ()),
            ('collections', 'Counter', ()), ('torch._utils', '_rebuild_tensor_v3', ()),
            ('torch._utils', '_rebuild_sparse_tensor', ()), ('torch._utils', '_rebuild_wrapper_subclass', ()),
            ('torch._utils', '_rebuild_meta_tensor_no_storage', ()), ('torch._utils', '_rebuild_nested_tensor', ()),
            ('torch._utils', '_rebuild_device_tensor_from_cpu_tensor', ()), ('torch.serialization', '_get_layout',
                                                                          (S('torch.strided'), )),
            ('torch', 'UntypedStorage', (I(2 ** 30), )), ('torch', 'per_tensor_affine', ())]:
        add(f'torch default {module}.{name}', call(module, name, *args))
    add('NEWOBJ torch.Tensor (allocates)', G('torch', 'Tensor') + T(I(2 ** 30)) + b'\x81')
    add('NEWOBJ Parameter', G('torch.nn.parameter', 'Parameter') + T() + b'\x81')
    add('call torch.Size with a storage class', call('torch', 'Size', G('torch', 'FloatStorage')))
    add('bare storage', storage_pid(), storages={'0': b'\0' * 4})
    add('_codecs.encode with another codec', call('_codecs', 'encode', S('x'), S('rot13')))
    add('numpy _reconstruct of a large array', call(NP, '_reconstruct', G('numpy', 'ndarray'), T(I(2 ** 40)),
                                                    latin1(b'b')))
    add('numpy object array without BUILD', call(NP, '_reconstruct', G('numpy', 'ndarray'), T(I(0)), latin1(b'O')))
    add('HistoryBuffer without state', G('mmengine.logging.history_buffer', 'HistoryBuffer') + b')\x81')
    add('HistoryBuffer with an object state', G('mmengine.logging.history_buffer', 'HistoryBuffer') + b')\x81'
        + call('builtins', 'set') + b'b')
    add('hooks filled after the tensor is built', call('collections', 'OrderedDict') + b'q\x05' +
        call('torch._utils', '_rebuild_tensor_v2', storage_pid(), I(0), T(I(1)), T(I(1)), b'\x89', b'h\x05') +
        b'\x86h\x05' + S('h') + G('torch', 'float32') + b's\x86', storages={'0': b'\0' * 4})
    # archive layouts torch's reader and zipfile could read differently
    add('second archive folder', b'N', extra={'other/data.pkl': pkl(call('os', 'system', S(cmd)))})
    out.append(('archive record named twice', duplicate_record_zip(pkl(b'N'), pkl(call('os', 'system', S(cmd))))))
    out.append(('central directory moved', moved_central_directory(torch_zip(pkl(b'N')))))
    # pre-1.6 files: plain pickles (torch's legacy format), a tar archive, a legacy file with a zip appended
    out.append(('legacy format os.system', pkl(call('os', 'system', S(cmd)))))
    out.append(('legacy storage keys os.system', legacy_file(b'N', pkl(call('os', 'system', S(cmd))))))
    out.append(('legacy file with a zip appended', pkl(call('os', 'system', S(cmd))) + torch_zip(pkl(b'N'))))
    out.append(('tar archive', tar_file({'sys_info': pkl(b'}'), 'pickle': pkl(call('os', 'system', S(cmd)))})))
    out.append(('TorchScript archive', torch_zip(pkl(b'N'), extra={'archive/constants.pkl': pkl(b')')})))
    out.append(('compressed record', torch_zip(pkl(S('x' * 4096)), compress=zipfile.ZIP_DEFLATED)))
    return out


LEGACY_MAGIC, LEGACY_PROTOCOL = 0x1950a86a20f9469cfc6c, 1001


def legacy_file(data, keys=pkl(b']'), tail=b''):
    """torch's pre-1.6 format: magic number, protocol, system info, the data, the storage keys, raw storages."""
    return pkl(I(LEGACY_MAGIC)) + pkl(I(LEGACY_PROTOCOL)) + pkl(b'}') + pkl(data) + keys + tail


def duplicate_record_zip(first, second):
    import warnings
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, 'w') as z:
        warnings.simplefilter('ignore')  # zipfile warns about the duplicate name
        z.writestr('archive/data.pkl', first)
        z.writestr('archive/data.pkl', second)
        z.writestr('archive/version', '3\n')
    return buf.getvalue()


def moved_central_directory(archive):
    """A copy of the central directory put after it: zipfile reads the copy and shifts every offset."""
    start, = struct.unpack('<I', archive[-6:-2])
    size, = struct.unpack('<I', archive[-10:-6])
    return archive[:start + size] + archive[start:start + size] + archive[start + size:]


def tar_file(members):
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def bombs():
    """(name, archive bytes) that ask for far more memory than the file holds."""
    out = []

    def add(name, body, **kw):
        out.append((name, torch_zip(pkl(body), **kw)))

    add('storage of 2**40 floats', storage_pid(numel=2 ** 40), storages={'0': b'\0' * 4})
    add('tensor view of 2**40 elements', tensor_call((2 ** 30, 2 ** 10), (0, 0)), storages={'0': b'\0' * 4})
    add('numpy array of 10**12 elements', np_array('f8', (10 ** 6, 10 ** 6), latin1(b'\0' * 8)))
    add('bytearray of 2**31', call('builtins', 'bytearray', I(2 ** 31 - 1)))
    add('BINBYTES8 claiming 2**40 bytes', b'\x8e' + struct.pack('<Q', 2 ** 40) + b'abc')
    add('LONG4 claiming 2**31 bytes', b'\x8b' + struct.pack('<i', 2 ** 31 - 1) + b'\xff')
    add('FRAME claiming 2**40 bytes', b'\x95' + struct.pack('<Q', 2 ** 40) + b'N')
    out.append(('legacy storage of 2**40 floats', legacy_file(
        call('torch._utils', '_rebuild_tensor_v2', T(S('storage'), G('torch', 'FloatStorage'), S('0'), S('cpu'),
                                                     I(2 ** 40), b'N') + b'Q', I(0), T(I(1)), T(I(1)), b'\x89',
             call('collections', 'OrderedDict')), pkl(b']' + S('0') + b'a'), struct.pack('<q', 2 ** 40) + b'\0' * 8)))
    return out


def write(tmp_path, name, data, suffix='.pth'):
    path = tmp_path / (name.replace(' ', '_').replace('/', '_').replace('*', '') + suffix)
    path.write_bytes(data)
    return str(path)


def globals_snapshot():
    from mmengine.logging.history_buffer import HistoryBuffer
    # modules: anything a payload could make us import (torch/numpy import some of their own lazily)
    modules = {m for m in sys.modules if not m.startswith(('torch', 'numpy', 'encodings'))}
    return (set(torch.serialization.get_safe_globals()), dict(HistoryBuffer._statistics_methods),
            modules, dict(__import__('copyreg')._extension_registry), torch.get_default_dtype())


_WARM = []


def assert_refused(load, path, marker, what=None):
    from mmposmlp.utils.safe_load import UnsafeCheckpointError, load_checkpoint
    if not _WARM:  # torch imports some modules lazily on its first load
        buf = io.BytesIO()
        torch.save(mmengine_style_checkpoint(), buf)
        buf.seek(0)
        _WARM.append(load_checkpoint(buf))
    before = globals_snapshot()
    with pytest.raises(UnsafeCheckpointError) as info:
        load(path)
    msg = str(info.value)
    assert osp.basename(path) in msg and ('refusing to load' in msg or 'cannot load' in msg), msg
    assert '\n' not in msg
    if what:
        assert what in msg, msg
    assert not osp.exists(marker), 'the payload ran'
    assert globals_snapshot() == before
    return msg


# ------------------------------------------------------------------------------------------ the allowed set
EXPECTED_ALLOWED = {
    ('collections', 'OrderedDict'), ('torch._utils', '_rebuild_tensor_v2'), ('torch._utils', '_rebuild_parameter'),
    ('torch._utils', '_rebuild_from_type_v2'), ('torch', 'Tensor'), ('torch._tensor', 'Tensor'),
    ('torch.nn.parameter', 'Parameter'), ('torch', 'Size'), ('torch', 'device'), ('_codecs', 'encode'),
    ('builtins', 'set'), ('builtins', 'frozenset'), ('builtins', 'complex'), ('__builtin__', 'set'),
    ('__builtin__', 'frozenset'), ('__builtin__', 'complex'), ('builtins', 'getattr'), ('__builtin__', 'getattr'),
    ('numpy', 'ndarray'), ('numpy', 'dtype'), ('mmengine.logging.history_buffer', 'HistoryBuffer'),
    ('argparse', 'Namespace'), ('numpy.core.multiarray', '_reconstruct'), ('numpy._core.multiarray', '_reconstruct'),
    ('numpy.core.multiarray', 'scalar'), ('numpy._core.multiarray', 'scalar'),
}


EXPECTED_CALLABLE = {
    ('collections', 'OrderedDict'), ('torch._utils', '_rebuild_tensor_v2'), ('torch._utils', '_rebuild_parameter'),
    ('torch._utils', '_rebuild_from_type_v2'), ('torch', 'Size'), ('torch', 'device'), ('_codecs', 'encode'),
    ('builtins', 'set'), ('builtins', 'frozenset'), ('builtins', 'complex'), ('__builtin__', 'set'),
    ('__builtin__', 'frozenset'), ('__builtin__', 'complex'), ('builtins', 'getattr'), ('__builtin__', 'getattr'),
    ('numpy', 'dtype'), ('numpy.core.multiarray', '_reconstruct'), ('numpy._core.multiarray', '_reconstruct'),
    ('numpy.core.multiarray', 'scalar'), ('numpy._core.multiarray', 'scalar'),
}


def test_allowed_globals_are_pinned_and_map_to_our_checkers():
    """The allowed set is exactly this list (+ torch dtypes); the names left to torch are in torch's own default
    allow-list; mmengine's class and getattr resolve to objects of ours; only these may be called."""
    from mmposmlp.utils import safe_load
    allowed = dict(safe_load.ALLOWED_GLOBALS)
    dtypes = {k for k, v in allowed.items() if isinstance(v, torch.dtype)}
    assert all(k[0] == 'torch' and getattr(torch, k[1]) is allowed[k] for k in dtypes)
    assert set(allowed) - dtypes == EXPECTED_ALLOWED
    assert safe_load.CALLABLE == EXPECTED_CALLABLE and safe_load.NEWOBJ == {
        ('mmengine.logging.history_buffer', 'HistoryBuffer'), ('argparse', 'Namespace')}
    ours = {k for k, v in allowed.items() if getattr(v, '__module__', None) == 'mmposmlp.utils.safe_load'}
    assert {('mmengine.logging.history_buffer', 'HistoryBuffer'), ('argparse', 'Namespace'),
            ('builtins', 'getattr'), ('__builtin__', 'getattr'), ('torch._utils', '_rebuild_from_type_v2')} == ours
    # no entry resolves to a code-running builtin
    names = {getattr(f, '__name__', '') for f in allowed.values()}
    assert not names & {'eval', 'exec', 'getattr', 'system', 'compile', '__import__', 'bytearray'}
    # what we leave to torch is in its default allow-list: torch's public API lists a file's other globals
    defaults = {k for k in safe_load.TORCH_DEFAULTS if k[0] != '__builtin__'}
    names_pkl = b'(' + b''.join(G(*k) for k in sorted(defaults | set(allowed))) + b't'
    unsafe = set(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(torch_zip(pkl(names_pkl)))))
    assert not unsafe & {'.'.join(k) for k in defaults}
    assert {'.'.join(k) for k in set(allowed) - defaults if k[0] != '__builtin__'} <= unsafe


@pytest.mark.parametrize('suffix', ['.pth', '.safetensors'])  # a file's name never skips a check
@pytest.mark.parametrize('index', range(len(payloads('M'))), ids=[n for n, _ in payloads('M')])
def test_crafted_payload_is_refused(index, suffix, tmp_path):
    from mmposmlp.utils.safe_load import load_checkpoint
    marker = str(tmp_path / 'MARKER')
    name, data = payloads(marker)[index]
    assert_refused(load_checkpoint, write(tmp_path, name, data, suffix), marker)


def test_malicious_object_via_torch_save_is_refused(tmp_path):
    """A payload written by torch.save itself (``__reduce__`` -> os.system), and a real object array."""
    from mmposmlp.utils.safe_load import load_checkpoint
    marker = str(tmp_path / 'MARKER')

    class Evil:
        def __reduce__(self):
            return os.system, (f'touch {marker}', )

    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': {'x': Evil()}}, tmp_path / 'evil.pth')
    assert_refused(load_checkpoint, str(tmp_path / 'evil.pth'), marker, 'posix.system')
    torch.save({'a': np.array([1, 'x'], dtype=object)}, tmp_path / 'obj.pth')
    assert_refused(load_checkpoint, str(tmp_path / 'obj.pth'), marker, 'numpy dtype')


def test_risky_payloads_do_not_crash_and_memory_stays_bounded(tmp_path):
    """Object arrays with pointer bytes and size bombs, in a subprocess: no crash, every file refused, peak
    memory well below what the files ask for."""
    marker = str(tmp_path / 'MARKER')
    files = [write(tmp_path, n, d) for n, d in bombs() + [p for p in payloads(marker) if 'numpy' in p[0]]]
    script = textwrap.dedent(f"""
        import json, resource, sys
        sys.path.insert(0, {repo_path()!r})
        import torch
        from mmposmlp.utils.safe_load import load_checkpoint, UnsafeCheckpointError
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        results = {{}}
        for f in {files!r}:
            try:
                out = load_checkpoint(f)
                results[f] = 'loaded ' + repr(out)[:200]
            except UnsafeCheckpointError as e:
                results[f] = 'refused'
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps(dict(results=results, grew_kib=after - before)))
    """)
    res = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=repo_path()))
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    # refused, or (a frame longer than the file) read as the inert None it holds
    assert all(v in ('refused', 'loaded None') for v in report['results'].values()), report
    assert list(report['results'].values()).count('refused') >= len(files) - 1, report
    assert report['grew_kib'] < 200 * 1024, report  # the bombs ask for up to 8 TiB
    assert not osp.exists(marker)


# ------------------------------------------------------------------------------------------ genuine files
def mmengine_style_checkpoint():
    """What mmengine 0.10.7's Runner.save_checkpoint puts in a file (message hub, numpy values)."""
    from mmengine.logging import MessageHub
    hub = MessageHub(f'ckpt-safety-{id(object())}')
    for i in range(5):
        hub.update_scalar('train/loss', 1.0 / (i + 3))
        hub.update_scalar('train/lr', 0.1 * 0.5 ** i)
    hub.update_info('iter', 5)
    hub.update_info('np_value', np.float32(0.25))
    meta = dict(epoch=0, iter=5, seed=np.int64(7), cfg='x = 1', dataset_meta=dict(classes=('a', 'b')),
                palette=np.arange(6, dtype=np.uint8).reshape(2, 3), experiment_name='exp')
    state = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).state_dict()  # has _metadata
    state.update(w=torch.randn(3, 4), b=torch.randn(4).to(torch.float64), n=torch.tensor(7))
    return dict(meta=meta, state_dict=state, message_hub=hub.state_dict(),
                optimizer=dict(state={0: dict(momentum_buffer=torch.randn(3))}, param_groups=[dict(lr=0.1,
                                                                                                     params=[0])]))


def test_stock_mmengine_checkpoint_loads_as_plain_data(tmp_path):
    from mmengine.logging.history_buffer import HistoryBuffer

    from mmposmlp.utils.safe_load import load_checkpoint
    ckpt = mmengine_style_checkpoint()
    torch.save(ckpt, tmp_path / 'stock.pth')
    with pytest.raises(pickle.UnpicklingError):  # torch's default refuses mmengine's own objects
        torch.load(tmp_path / 'stock.pth')
    user = [np.ndarray]
    torch.serialization.add_safe_globals(user)
    try:
        before = globals_snapshot()
        out = load_checkpoint(str(tmp_path / 'stock.pth'))
        assert globals_snapshot() == before  # the user's own safe global is still there, nothing added
    finally:
        torch.serialization.clear_safe_globals()
    assert torch.equal(out['state_dict']['w'], ckpt['state_dict']['w'])
    assert out['state_dict']._metadata == ckpt['state_dict']._metadata  # module versions kept
    assert out['state_dict']['b'].dtype == torch.float64 and out['meta']['seed'] == 7
    assert type(out['meta']['seed']) is int
    assert torch.equal(out['meta']['palette'], torch.arange(6, dtype=torch.uint8).reshape(2, 3))
    loss = out['message_hub']['log_scalars']['train/loss']
    assert set(loss) == {'log_history', 'count_history', 'max_length'}
    orig = ckpt['message_hub']['log_scalars']['train/loss']
    assert np.array_equal(loss['log_history'].numpy(), orig._log_history)
    assert out['message_hub']['runtime_info']['np_value'] == 0.25
    assert not any(isinstance(v, HistoryBuffer) for v in out['message_hub']['log_scalars'].values())
    # the pre-1.6 (non-zip) format goes through the same restricted unpickler
    torch.save(ckpt, tmp_path / 'legacy.pth', _use_new_zipfile_serialization=False)
    legacy = load_checkpoint(str(tmp_path / 'legacy.pth'))
    assert torch.equal(legacy['state_dict']['w'], ckpt['state_dict']['w']) and legacy['meta']['seed'] == 7
    assert torch.equal(legacy['message_hub']['log_scalars']['train/loss']['log_history'], loss['log_history'])


def forged_statistics_pkl():
    """``{'hub': HistoryBuffer}`` whose statistics map 'mean' to ``HistoryBuffer.max``."""
    return (b'\x80\x02}' + S('hub') + G('mmengine.logging.history_buffer', 'HistoryBuffer') + b')\x81}'
            + S('max_length') + I(10) + b's' + S('_log_history') + np_array('f8', (2, ), latin1(
                np.array([1.0, 3.0]).tobytes())) + b's' + S('_count_history') +
            np_array('i8', (2, ), latin1(np.array([1, 1]).tobytes())) + b's' + S('statistics_methods') + b'}' +
            S('mean') + call('builtins', 'getattr', G('mmengine.logging.history_buffer', 'HistoryBuffer'),
                             S('max')) + b'ssbs.')


def test_history_buffer_statistics_cannot_be_rewritten_by_a_file(tmp_path):
    """A file whose HistoryBuffer maps 'mean' to max loads as data; the class keeps its methods."""
    from mmengine.logging.history_buffer import HistoryBuffer

    from mmposmlp.utils.safe_load import load_checkpoint
    before = dict(HistoryBuffer._statistics_methods)
    (tmp_path / 'forged.pth').write_bytes(torch_zip(forged_statistics_pkl()))
    out = load_checkpoint(str(tmp_path / 'forged.pth'))
    assert HistoryBuffer._statistics_methods == before
    assert HistoryBuffer([1.0, 3.0], [1, 1]).mean() == 2.0
    assert out['hub']['log_history'].tolist() == [1.0, 3.0] and out['hub']['max_length'] == 10


def test_callers_allow_list_neither_changes_nor_reaches_our_load(tmp_path):
    """A caller that allow-listed mmengine's HistoryBuffer (whose __setstate__ writes its class state), numpy
    and a function under one of our names for its own torch.load: our loads still get our placeholders and
    checks, and afterwards (loaded or refused) the caller's list is exactly what it was, shared entries included
    (torch.serialization.safe_globals removes on exit what it added, even what the caller had)."""
    import warnings

    from mmengine.logging.history_buffer import HistoryBuffer

    from mmposmlp.utils.safe_load import load_checkpoint
    core = getattr(np, '_core', None) or np.core
    marker = str(tmp_path / 'MARKER')
    user = [HistoryBuffer, np.ndarray, np.dtype, core.multiarray._reconstruct, core.multiarray.scalar,
            type(np.dtype('O')), (print, 'builtins.frozenset')]
    torch.serialization.add_safe_globals(user)
    try:
        before, methods, filters = globals_snapshot(), dict(HistoryBuffer._statistics_methods), list(warnings.filters)
        (tmp_path / 'forged.pth').write_bytes(torch_zip(forged_statistics_pkl()))
        out = load_checkpoint(str(tmp_path / 'forged.pth'))
        assert out['hub']['max_length'] == 10 and HistoryBuffer._statistics_methods == methods
        torch.save({'s': frozenset([1, 2]), 'a': np.arange(3)}, tmp_path / 'plain.pth')
        out = load_checkpoint(str(tmp_path / 'plain.pth'))
        assert out['s'] == frozenset([1, 2]) and torch.equal(out['a'], torch.arange(3))
        assert globals_snapshot() == before
        for name, data in payloads(marker):
            if 'numpy' in name:  # object arrays are refused although the caller allowed numpy
                assert_refused(load_checkpoint, write(tmp_path, name, data), marker)
        assert set(torch.serialization.get_safe_globals()) == set(user) and list(warnings.filters) == filters
    finally:
        torch.serialization.clear_safe_globals()


def test_loads_in_threads_each_see_our_allow_list_and_leave_the_callers(tmp_path):
    """torch's allow-list is one process-wide set: concurrent loads of ours take turns with it."""
    import threading

    from mmposmlp.utils.safe_load import load_checkpoint
    torch.save(mmengine_style_checkpoint(), tmp_path / 'stock.pth')
    torch.serialization.add_safe_globals([np.ndarray])
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside the loads
    try:
        before, errors = globals_snapshot(), []

        def load_many():
            try:
                for _ in range(25):
                    assert load_checkpoint(str(tmp_path / 'stock.pth'))['meta']['seed'] == 7
            except Exception as e:  # noqa: B902  (reported below)
                errors.append(e)

        threads = [threading.Thread(target=load_many) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and globals_snapshot() == before
    finally:
        sys.setswitchinterval(interval)
        torch.serialization.clear_safe_globals()


def test_training_format_loads_with_plain_weights_only_and_restores_exactly():
    """to_plain_checkpoint (what our training writes) needs no allow-list; resume rebuilds identical buffers."""
    from mmengine.logging import MessageHub

    from mmposmlp.engine.checkpoint import prepare_resume_checkpoint
    from mmposmlp.utils.safe_load import to_plain_checkpoint
    ckpt = mmengine_style_checkpoint()
    ckpt['meta']['config'] = "raise SystemExit('executed')"
    buf = io.BytesIO()
    torch.save(to_plain_checkpoint(ckpt), buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)  # no allow-list, no context
    assert torch.equal(loaded['state_dict']['w'], ckpt['state_dict']['w'])
    assert loaded['state_dict']._metadata == ckpt['state_dict']._metadata
    assert type(loaded['meta']['seed']) is int
    prepared, config_text = prepare_resume_checkpoint(loaded, 'mem')
    assert 'config' not in prepared['meta'] and 'SystemExit' in config_text
    hub = MessageHub(f'restored-{id(buf)}')
    hub.load_state_dict(prepared['message_hub'])
    for key in ('train/loss', 'train/lr'):
        a, b = ckpt['message_hub']['log_scalars'][key], hub.log_scalars[key]
        assert a._log_history.dtype == b._log_history.dtype and a._count_history.dtype == b._count_history.dtype
        assert np.array_equal(a._log_history, b._log_history) and np.array_equal(a._count_history,
                                                                                b._count_history)
        assert a.max_length == b.max_length and a.mean(3) == b.mean(3)
    assert hub.get_info('np_value') == 0.25 and hub.get_info('iter') == 5


def test_trust_is_explicit_and_scoped(tmp_path):
    """A class in a file needs trusted_checkpoints([that file]); other files stay data-only."""
    import pathlib

    from mmposmlp.utils.safe_load import UnsafeCheckpointError, is_trusted, load_checkpoint, trusted_checkpoints
    torch.save({'state_dict': {'w': torch.ones(1)}, 'path': pathlib.PurePosixPath('/a')}, tmp_path / 'old.pth')
    torch.save({'path': pathlib.PurePosixPath('/b')}, tmp_path / 'other.pth')
    with pytest.raises(UnsafeCheckpointError, match='pathlib'):
        load_checkpoint(str(tmp_path / 'old.pth'))
    with trusted_checkpoints([str(tmp_path / 'old.pth')]):
        assert isinstance(load_checkpoint(str(tmp_path / 'old.pth'))['path'], pathlib.PurePosixPath)
        assert not is_trusted(str(tmp_path / 'other.pth'))
        with pytest.raises(UnsafeCheckpointError):
            load_checkpoint(str(tmp_path / 'other.pth'))
    assert not is_trusted(str(tmp_path / 'old.pth'))
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint(str(tmp_path / 'old.pth'))


def test_namespace_of_timm_checkpoints_loads_as_a_dict(tmp_path):
    import argparse

    from mmposmlp.utils.safe_load import load_checkpoint
    torch.save({'state_dict': {'w': torch.ones(1)}, 'args': argparse.Namespace(lr=0.1, model='x')},
               tmp_path / 'timm.pth')
    out = load_checkpoint(str(tmp_path / 'timm.pth'))
    assert out['args'] == {'lr': 0.1, 'model': 'x'}


# ------------------------------------------------------------------------------------------ work dirs
def _fake_ckpt(path):
    torch.save({'meta': {'iter': 1, 'epoch': 0}, 'state_dict': {}}, path)
    return str(path)


def test_auto_resume_stays_inside_the_work_dir(tmp_path):
    from mmposmlp.engine.checkpoint import CheckpointLocationError, find_last_complete_checkpoint
    work, outside = tmp_path / 'work', tmp_path / 'elsewhere'
    work.mkdir()
    outside.mkdir()
    evil = _fake_ckpt(outside / 'planted.pth')
    own = _fake_ckpt(work / 'iter_1.pth')
    (work / 'last_checkpoint').write_text(evil)
    with pytest.raises(CheckpointLocationError, match='outside the work dir'):
        find_last_complete_checkpoint(str(work))
    (work / 'last_checkpoint').write_text('../elsewhere/planted.pth')
    with pytest.raises(CheckpointLocationError, match='last_checkpoint'):
        find_last_complete_checkpoint(str(work))
    # a symlink inside the work dir that leads outside is not picked either
    (work / 'last_checkpoint').unlink()
    os.symlink(evil, work / 'iter_9.pth')
    os.utime(work / 'iter_9.pth', follow_symlinks=False)
    assert find_last_complete_checkpoint(str(work)) == own
    (work / 'last_checkpoint').write_text(str(work / 'iter_9.pth'))
    with pytest.raises(CheckpointLocationError):
        find_last_complete_checkpoint(str(work))
    # a copied work dir resumes its own file of the pointer's name, not the original's
    (work / 'iter_9.pth').unlink()
    (work / 'last_checkpoint').write_text(str(work / 'iter_1.pth'))
    import shutil
    copy_dir = tmp_path / 'copy'
    shutil.copytree(work, copy_dir)
    assert find_last_complete_checkpoint(str(copy_dir)) == str(copy_dir / 'iter_1.pth')
    assert find_last_complete_checkpoint(str(work)) == own
    # the checkpoint hook's out_dir is an allowed root
    assert find_last_complete_checkpoint(str(work), [str(outside)]) == own
    (work / 'last_checkpoint').write_text(evil)
    assert find_last_complete_checkpoint(str(work), [str(outside)]) == evil


def test_config_text_is_read_as_data():
    from mmposmlp.engine.checkpoint import config_gpu_ids
    assert config_gpu_ids('gpu_ids = [0, 1]\nx = 2') == [0, 1]
    assert config_gpu_ids("gpu_ids = __import__('os').system('x')") is None
    assert config_gpu_ids('((((' * 1000) is None
    assert config_gpu_ids(None) is None


# ------------------------------------------------------------------------------------------ init_cfg, converters
def evil_file(tmp_path):
    marker = str(tmp_path / 'MARKER')
    path = write(tmp_path, 'evil', torch_zip(pkl(b'}' + S('state_dict') + call('os', 'system', S(f'touch {marker}'))
                                             + b's')))
    return path, marker


def test_init_cfg_pretrained_refuses_crafted_files(tmp_path):
    """Our backbones' init_cfg (load_pretrained) and mmengine's PretrainedInit (through CheckpointLoader)."""
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    from mmengine.model import BaseModule

    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    path, marker = evil_file(tmp_path)
    tiny = dict(depths=[1, 1, 1, 1], embed_dims=[8, 8, 8, 8], mlp_ratios=[2, 2, 2, 2])
    model = WaveMLP(arch=tiny, init_cfg=dict(type='Pretrained', checkpoint=path))
    assert_refused(lambda p: model.init_weights(), path, marker, 'os.system')

    class Plain(BaseModule):
        def __init__(self):
            super().__init__(init_cfg=dict(type='Pretrained', checkpoint=path))
            self.fc = torch.nn.Linear(2, 2)

    assert_refused(lambda p: Plain().init_weights(), path, marker, 'os.system')


def _converter_main(name):
    return load_tool(osp.join(CONVERTERS, f'{name}.py')).main


CONVERTER_NAMES = sorted(osp.splitext(f)[0] for f in os.listdir(CONVERTERS) if f.endswith('.py'))


@pytest.mark.parametrize('name', CONVERTER_NAMES)
def test_converters_refuse_crafted_files_and_take_the_trust_flag(name, tmp_path, monkeypatch):
    path, marker = evil_file(tmp_path)
    main = _converter_main(name)
    argv = [path, str(tmp_path / 'out.pth')]

    def run(p):
        monkeypatch.setattr(sys, 'argv', [name] + argv)
        try:
            main(argv)
        except TypeError:  # main() without argv reads sys.argv
            main()

    assert_refused(run, path, marker)
    assert not osp.exists(tmp_path / 'out.pth')
    # the same file with --trust-checkpoint is unpickled as it is (here: the payload runs, proving the flag
    # reaches the loader; the converter then fails on the missing weights)
    argv.append('--trust-checkpoint')
    with pytest.raises(Exception):
        run(path)
    assert osp.exists(marker)


# ------------------------------------------------------------------------------------------ our tools
def _tool(name):
    return load_tool('tools', f'{name}.py').main


def run_in_process(name, argv, capsys=None):
    """tools/<name>.py as the command line runs it (run_cli: exit code, one ERROR line), in this process."""
    from conftest import drop_new_mmengine_instances, mmengine_instance_names
    from mmposmlp.engine.entry import run_cli
    before = mmengine_instance_names()
    try:
        code = run_cli(_tool(name), [str(a) for a in argv])
    finally:  # two runs within one second would share mmengine's logger and message hub
        drop_new_mmengine_instances(before)
    out = capsys.readouterr() if capsys is not None else None
    return code, (out.out + out.err if out else ''), (out.err if out else '')


@pytest.fixture(scope='module')
def trained(toy_data, tmp_path_factory):
    """tools/train.py, 2 iterations of a tiny classifier (checkpoints at 1 and 2)."""
    d = tmp_path_factory.mktemp('ckpt_safety')
    cfg = write_cfg(d / 'cls.py', RESNET18_CLS, toy_data, iters=2, ckpt=1, classes=4)
    code, _, _ = run_in_process('train', [cfg, '--work-dir', d / 'work'])
    assert code == 0
    return d, cfg


def _one_error_line(code, err, *needles):
    assert code == 1, err[-3000:]
    assert 'Traceback' not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith('ERROR: ')]
    assert len(lines) == 1, err[-3000:]
    for n in needles:
        assert n in lines[0], lines[0]


def test_training_writes_checkpoints_plain_weights_only_loads(trained):
    d, _ = trained
    for name in ('iter_1.pth', 'iter_2.pth'):
        ckpt = torch.load(d / 'work' / name, weights_only=True)  # torch's default, no allow-list
        scalars = ckpt['message_hub']['log_scalars']
        assert scalars and all(set(v) == {'log_history', 'count_history', 'max_length'} for v in scalars.values())
        assert isinstance(ckpt['meta']['cfg'], str) and ckpt['meta']['iter'] == int(name[5])


def test_resume_never_executes_the_stored_config(trained, tmp_path, capsys):
    """--resume FILE and bare --resume with a genuine checkpoint whose meta['config'] is code: the run resumes,
    nothing executes; the restored message hub equals the saved one."""
    d, cfg = trained
    marker = tmp_path / 'MARKER'
    ckpt = torch.load(d / 'work' / 'iter_1.pth', weights_only=True)
    ckpt['meta']['config'] = f"import os\nos.system('touch {marker}')\ngpu_ids = [0]\n"
    work = tmp_path / 'work'
    work.mkdir()
    torch.save(ckpt, work / 'iter_1.pth')
    (work / 'last_checkpoint').write_text(str(work / 'iter_1.pth'))
    for extra in (['--resume', work / 'iter_1.pth'], ['--resume']):
        code, log, err = run_in_process('train', [cfg, '--work-dir', work] + extra, capsys)
        assert code == 0, err[-3000:]
        assert 'resumed' in log.lower()
        assert not marker.exists()
        resumed = torch.load(work / 'iter_2.pth', weights_only=True)
        saved = ckpt['message_hub']['log_scalars']
        for key, value in saved.items():  # the history up to iteration 1 is restored exactly
            n = len(value['log_history'])
            assert torch.equal(resumed['message_hub']['log_scalars'][key]['log_history'][:n], value['log_history'])
        (work / 'iter_2.pth').unlink()
        (work / 'last_checkpoint').write_text(str(work / 'iter_1.pth'))
    # a config text that names 2 GPUs is read as data and compared with this 1-process run
    ckpt['meta']['config'] = 'gpu_ids = [0, 1]\n'
    torch.save(ckpt, work / 'two_gpus.pth')
    code, _, err = run_in_process('train', [cfg, '--work-dir', work, '--resume', work / 'two_gpus.pth'], capsys)
    _one_error_line(code, err, 'trained on 2 GPUs')


def test_tools_refuse_crafted_checkpoints_in_one_sentence(trained, tmp_path, capsys):
    d, cfg = trained
    path, marker = evil_file(tmp_path)
    code, _, err = run_in_process('test', [cfg, path, '--work-dir', tmp_path / 't'], capsys)
    _one_error_line(code, err, 'refusing to load', osp.basename(path), 'os.system', '--trust-checkpoint')
    code, _, err = run_in_process('train', [cfg, '--work-dir', tmp_path / 'w', '--resume', path], capsys)
    _one_error_line(code, err, 'refusing to load', osp.basename(path))
    work = tmp_path / 'auto'
    work.mkdir()
    (work / 'last_checkpoint').write_text(path)
    code, _, err = run_in_process('train', [cfg, '--work-dir', work, '--resume'], capsys)
    _one_error_line(code, err, 'outside the work dir')
    # a crafted file planted inside the work dir is picked by bare --resume, and refused as it is loaded
    planted = work / 'iter_9.pth'
    planted.write_bytes(open(path, 'rb').read())
    (work / 'last_checkpoint').write_text(str(planted))
    code, _, err = run_in_process('train', [cfg, '--work-dir', work, '--resume'], capsys)
    _one_error_line(code, err, 'refusing to load', 'iter_9.pth', 'os.system')
    assert not osp.exists(marker)


def test_trust_checkpoint_flag_loads_a_checkpoint_that_needs_a_class(trained, tmp_path, capsys):
    import pathlib
    d, cfg = trained
    ckpt = torch.load(d / 'work' / 'iter_2.pth', weights_only=True)
    ckpt['meta']['run_dir'] = pathlib.PurePosixPath('/old/run')
    torch.save(ckpt, tmp_path / 'old.pth')
    code, _, err = run_in_process('test', [cfg, tmp_path / 'old.pth', '--work-dir', tmp_path / 't'], capsys)
    _one_error_line(code, err, 'pathlib.PurePosixPath', '--trust-checkpoint')
    code, log, err = run_in_process('test', [cfg, tmp_path / 'old.pth', '--work-dir', tmp_path / 't',
                                             '--trust-checkpoint'], capsys)
    assert code == 0, err[-3000:]
    assert 'accuracy/top1' in log
    # the trust ended with the command
    from mmposmlp.utils.safe_load import is_trusted
    assert not is_trusted(str(tmp_path / 'old.pth'))
    code, _, err = run_in_process('train', [cfg, '--work-dir', tmp_path / 'n', '--trust-checkpoint'], capsys)
    _one_error_line(code, err, '--trust-checkpoint', 'loads no checkpoint')


# ------------------------------------------------------------------------------------------ interop
def _perturbed_checkpoints(model, tmp_path, tag):
    """Our training format and mmengine's stock format (HistoryBuffer, numpy) of ``model`` with new weights."""
    from mmposmlp.utils.safe_load import to_plain_checkpoint
    gen = torch.Generator().manual_seed(0)
    state = collections.OrderedDict((k, torch.rand(v.shape, generator=gen).to(v.dtype)
                                     if v.is_floating_point() else v.clone()) for k, v in model.state_dict().items())
    stock = mmengine_style_checkpoint()
    stock['state_dict'] = state
    ours, plain = str(tmp_path / f'{tag}_ours.pth'), str(tmp_path / f'{tag}_stock.pth')
    torch.save(to_plain_checkpoint(stock), ours)
    torch.save(stock, plain)
    evil, marker = evil_file(tmp_path)
    return state, (ours, plain), (evil, marker)


def _assert_loaded(model, state):
    own = model.state_dict()
    assert all(torch.equal(own[k].cpu(), v) for k, v in state.items() if k in own)


def _check_api(build, model_of, tmp_path, tag):
    """Build with each checkpoint: ours and stock load (weights equal), the crafted one is refused."""
    before = list(torch.serialization.get_safe_globals())
    model = model_of(build(None))
    state, files, (evil, marker) = _perturbed_checkpoints(model, tmp_path, tag)
    assert os.environ.get('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD') is None
    for f in files:
        _assert_loaded(model_of(build(f)), state)
    assert_refused(build, evil, marker)
    assert list(torch.serialization.get_safe_globals()) == before


def test_mmpretrain_get_model_and_inferencer_load_our_checkpoints(toy_data, tmp_path):
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    from mmpretrain import get_model
    from mmpretrain.apis import ImageClassificationInferencer
    cfg = write_cfg(tmp_path / 'cls.py', RESNET18_CLS, toy_data, classes=4)
    _check_api(lambda ck: get_model(cfg, pretrained=ck or False), lambda m: m, tmp_path, 'pre')
    _check_api(lambda ck: ImageClassificationInferencer(cfg, pretrained=ck or False, device='cpu'),
               lambda i: getattr(i, 'model', i), tmp_path, 'inf')


def test_mmdet_inferencer_loads_our_checkpoints(toy_data, tmp_path):
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    from mmdet.apis import DetInferencer

    from toolcfg import RETINANET
    cfg = write_cfg(tmp_path / 'det.py', RETINANET, toy_data)
    _check_api(lambda ck: DetInferencer(model=cfg, weights=ck, device='cpu', show_progress=False),
               lambda i: getattr(i, 'model', i), tmp_path, 'det')


def test_mmseg_inferencer_loads_our_checkpoints(toy_data, tmp_path):
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    from mmseg.apis import MMSegInferencer

    from toolcfg import SEM_FPN
    cfg = write_cfg(tmp_path / 'seg.py', SEM_FPN, toy_data)
    _check_api(lambda ck: MMSegInferencer(model=cfg, weights=ck, device='cpu'),
               lambda i: getattr(i, 'model', i), tmp_path, 'seg')


def test_mmaction_init_recognizer_loads_our_checkpoints(toy_data, tmp_path):
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    from mmaction.apis import init_recognizer

    from toolcfg import TSN
    cfg = write_cfg(tmp_path / 'act.py', TSN, toy_data)
    _check_api(lambda ck: init_recognizer(cfg, ck, device='cpu'), lambda m: m, tmp_path, 'act')


@pytest.mark.slow
@pytest.mark.parametrize('library', ['mmdet', 'mmseg'])
def test_upstream_tools_test_py_loads_our_checkpoints(library, toy_data, tmp_path):
    """mmdet's and mmseg's own tools/test.py (what `mim test` runs), with mmposmlp in custom_imports."""
    import importlib

    from toolcfg import RETINANET, SEM_FPN
    pkg = importlib.import_module(library)
    tool = osp.join(osp.dirname(pkg.__file__), '.mim', 'tools', 'test.py')
    if not osp.isfile(tool):
        pytest.skip(f'{library} has no .mim/tools/test.py')
    template = RETINANET if library == 'mmdet' else SEM_FPN
    extra = "custom_imports = dict(imports=['mmposmlp'], allow_failed_imports=False)\nrunner_type = 'mmposmlp.Runner'\n"
    if library == 'mmseg':  # mmseg's tools/test.py builds mmengine's Runner whatever runner_type says
        extra += "default_hooks = dict(data_only_checkpoints=dict(type='mmposmlp.DataOnlyCheckpointsHook'))\n"
        extra += ("test_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,\n"
                  "    dataset=dict(indices=2, data_root=data_root, pipeline=[dict(type='LoadImageFromFile'),\n"
                  "    dict(type='Resize', scale=(96, 96), keep_ratio=True),\n"
                  "    dict(type='LoadAnnotations', reduce_zero_label=True), dict(type='PackSegInputs')]))\n")
    cfg = write_cfg(tmp_path / f'{library}.py', template, toy_data, extra=extra)
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    c = Config.fromfile(cfg)
    init_default_scope(c.default_scope)
    importlib.import_module(f'{library}.utils').register_all_modules(init_default_scope=False)
    reg = importlib.import_module(f'{library}.registry')
    model = reg.MODELS.build(c.model)
    state, files, (evil, marker) = _perturbed_checkpoints(model, tmp_path, library)
    for f in files:
        res = run_tool([tool, cfg, f, '--work-dir', str(tmp_path / 'w')], cwd=str(tmp_path),
                       env=dict(PYTHONPATH=repo_path()))
        assert res.returncode == 0, res.stderr[-3000:]
        assert 'Weights only load failed' not in res.stderr
    res = run_tool([tool, cfg, evil, '--work-dir', str(tmp_path / 'w')], cwd=str(tmp_path),
                   env=dict(PYTHONPATH=repo_path()))
    assert res.returncode != 0 and 'refusing to load' in res.stderr and not osp.exists(marker)


def test_trust_flag_covers_the_configs_pretrained_files():
    """tools/train.py --trust-checkpoint trusts load_from/--resume plus the model's own pretrained files."""
    from mmengine.config import Config

    from mmposmlp.engine.entry import UserError, pretrained_checkpoints, trusted_checkpoint_context
    from mmposmlp.utils.safe_load import is_trusted
    cfg = Config(dict(model=dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint='/w/a.pth')),
                                 neck=dict(init_cfg=[dict(type='Kaiming'),
                                                     dict(type='Pretrained', checkpoint='b.pth')]),
                                 head=dict(pretrained='c.pth'))))
    assert pretrained_checkpoints(cfg) == ['/w/a.pth', 'b.pth', 'c.pth']
    with trusted_checkpoint_context(True, ['/w/x.pth'] + pretrained_checkpoints(cfg)):
        assert is_trusted('/w/a.pth') and is_trusted('c.pth') and is_trusted('/w/x.pth')
        assert not is_trusted('/w/other.pth')
    assert not is_trusted('/w/a.pth')
    with trusted_checkpoint_context(False, ['/w/a.pth']):
        assert not is_trusted('/w/a.pth')
    with pytest.raises(UserError, match='loads no checkpoint'):
        trusted_checkpoint_context(True, [None])


def test_inferencer_given_only_weights_never_executes_the_stored_config(tmp_path):
    """Stock ``BaseInferencer`` with ``model=None`` runs the config text a checkpoint stores
    (``message_hub.runtime_info.cfg`` / ``meta.cfg``); through our CheckpointLoader schemes that text is
    dropped, so the Inferencer stops asking for a config and the file's code never runs."""
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()  # the data-only loader, explicitly
    from mmdet.apis import DetInferencer
    from mmengine.runner.checkpoint import _load_checkpoint
    marker = tmp_path / 'pwned'
    evil = f"import os\nos.system('touch {marker}')\nmodel = dict(type='RetinaNet')\n"
    path = str(tmp_path / 'evil_cfg.pth')
    torch.save({'state_dict': {'w': torch.zeros(1)}, 'meta': {'cfg': evil, 'config': evil, 'epoch': 1},
                'message_hub': {'runtime_info': {'cfg': evil, 'iter': 3}}}, path)
    loaded = _load_checkpoint(path, map_location='cpu')
    assert 'cfg' not in loaded['meta'] and 'config' not in loaded['meta'] and loaded['meta']['epoch'] == 1
    assert loaded['message_hub']['runtime_info'] == {'iter': 3}
    with pytest.raises((ValueError, AssertionError, KeyError)):
        DetInferencer(model=None, weights=path, device='cpu', show_progress=False)
    assert not marker.exists()


def test_backbone_weights_missing_from_the_init_cfg_checkpoint_is_one_sentence(toy_data, tmp_path, capsys):
    """A backbone's Pretrained init_cfg pointing at a file without its weights fails in init_weights (inside
    runner.train()): the tool prints the loader's sentence, not a traceback."""
    from toolcfg import RETINANET_WAVEMLP
    wrong = tmp_path / 'other_model.pth'
    torch.save({'state_dict': {'conv.weight': torch.zeros(2, 3, 1, 1)}}, wrong)
    cfg = write_cfg(tmp_path / 'cfg.py', RETINANET_WAVEMLP, toy_data, iters=1, ckpt=1, extra=f"""
        model['backbone']['init_cfg'] = dict(type='Pretrained', checkpoint='{wrong}')
        """)
    code, _, err = run_in_process('train', [cfg, '--work-dir', tmp_path / 'w'], capsys)
    _one_error_line(code, err, 'other_model.pth')


def test_plain_copy_of_values_made_during_the_walk_keeps_each_its_own():
    """numpy records become tuples made during the walk: each copy is of its own record, though the
    temporary tuples come and go at the same addresses."""
    from mmposmlp.utils.safe_load import to_plain_checkpoint
    records = np.array([(i, i) for i in range(20)], dtype=[('a', 'i4'), ('b', 'f4')])
    assert to_plain_checkpoint([records[i] for i in range(20)]) == [(i, float(i)) for i in range(20)]


def test_plain_copy_loads_with_torch_default_weights_only_and_keeps_the_values():
    """What training writes needs no allow-list: sets for frozensets, tuples for namedtuples and records,
    base types for subclasses, Python values for numpy values without a plain form."""
    import enum

    from mmposmlp.utils.safe_load import to_plain_checkpoint

    class Level(enum.IntEnum):
        HIGH = 2

    pair = collections.namedtuple('Pair', 'a b')
    records = np.array([(1, 2.5)], dtype=[('i', 'i4'), ('f', 'f8')])
    ckpt = dict(s=frozenset({1, 2}), p=pair(1, np.float32(0.5)), e=Level.HIGH, u=np.str_('ab'), r=records,
                o=np.array([1, 'x'], dtype=object), d=collections.defaultdict(list, a=[np.int64(3)]))
    buf = io.BytesIO()
    torch.save(to_plain_checkpoint(ckpt), buf)
    buf.seek(0)
    out = torch.load(buf, weights_only=True)  # torch's default allow-list
    assert out == dict(s={1, 2}, p=(1, 0.5), e=2, u='ab', r=[(1, 2.5)], o=[1, 'x'], d={'a': [3]})
    assert [type(out[k]) for k in 'spedu'] == [set, tuple, int, dict, str]


@pytest.mark.parametrize('value', [collections.defaultdict(list, a=[1]), collections.namedtuple('Pair', 'a b')(1, 2),
                                   np.matrix([[1.0]]), type('Items', (list, ), {})([1])],
                         ids=['defaultdict', 'namedtuple', 'ndarray subclass', 'list subclass'])
def test_loaded_containers_are_refused_unless_of_the_exact_types_torch_gives(value):
    """After torch's restricted load, containers are taken by exact type: a subclass (which the scan and
    torch's allow-list keep out of a file today) is refused, not copied as its base type."""
    from mmposmlp.utils.checkpoint_scan import Refused
    from mmposmlp.utils.safe_load import _LoadedTree
    with pytest.raises(Refused, match=f'an object of type {type(value).__name__}$'):
        _LoadedTree(1 << 20)({'state_dict': {'w': value}})
    assert _LoadedTree(1 << 20)({'w': [1, (2, ), {3}, frozenset({4})]}) == {'w': [1, (2, ), {3}, frozenset({4})]}
