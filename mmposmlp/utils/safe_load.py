"""Checkpoints are data: :func:`load_checkpoint` reads a file with torch's own restricted unpickler,
``torch.load(f, weights_only=True)``, and checks what that unpickler does not cover.

Before torch reads a byte, :func:`~.checkpoint_scan.scan_file` checks the archive and what each pickle calls
(:data:`ALLOWED_GLOBALS`, :data:`CALLABLE`, :data:`NEWOBJ`); during the load torch's process-wide allow-list is
exactly ours; after it the result becomes plain data (:class:`_LoadedTree`). A refusal is one sentence naming
the file and what it asked for; trusting a file is a per-command choice (:mod:`.trust`). With
:func:`register_mmengine_loaders`, mmengine's ``CheckpointLoader`` reads local and http(s) files the same way.
"""
import collections
import contextlib
import io
import os
import os.path as osp
import pickle
import re
import struct
import threading
import zipfile
from typing import Any, Optional

import numpy as np
import torch

from .checkpoint_scan import describe, scan_file
from .checkpoint_scan import Refused as _Refusal
from .plain_checkpoint import (NUMERIC_DTYPES, PlainTree, drop_config_text, history_buffer_from_plain,
                               is_state_dict_metadata, keep_config_text, plain_history, to_plain_checkpoint)
from .trust import TRUST_HINT, add_trust_argument, is_trusted, trusted_checkpoints  # noqa: F401

__all__ = ['UnsafeCheckpointError', 'ALLOWED_GLOBALS', 'load_checkpoint', 'to_plain_checkpoint',
           'history_buffer_from_plain', 'trusted_checkpoints', 'is_trusted', 'add_trust_argument',
           'keep_config_text', 'load_local_checkpoint', 'register_mmengine_loaders']

MAX_DEPTH = 100


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint asked for something a data-only load refuses."""


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
        raise _Refusal(f'_rebuild_from_type_v2 of {describe(new_type)} with state {describe(state)} (only plain '
                       'tensors without attributes are allowed)')
    return func(*args)


def _history_getattr(obj, name, *rest):
    """HistoryBuffer pickles its statistics methods as ``getattr(HistoryBuffer, 'min')``: a name, not the method."""
    if rest or obj is not _HistoryBuffer or not isinstance(name, str) or \
            not re.fullmatch(r'[A-Za-z][A-Za-z0-9_]{0,63}', name):
        raise _Refusal(f'getattr({describe(obj)}, {describe(name)}) (only HistoryBuffer statistics methods are '
                       'allowed)')
    return f'HistoryBuffer.{name}'


_NP_CORE = ('numpy.core.multiarray', 'numpy._core.multiarray')
#: the functions numpy's own pickles name (numpy 1 and 2 spell their module differently)
_NP_PICKLE = dict(_reconstruct=np.zeros(0).__reduce__()[0], scalar=np.float32(0).__reduce__()[0])
_DTYPES = {('torch', n): v for n, v in vars(torch).items() if isinstance(v, torch.dtype) and str(v) == f'torch.{n}'}

#: Every global a checkpoint may name (besides the storage types of :data:`.checkpoint_scan.STORAGES`), and
#: the object torch's unpickler gets for it. Pinned by tests/test_checkpoint_safety.py.
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
_POLICY = (frozenset(ALLOWED_GLOBALS), frozenset(CALLABLE), frozenset(NEWOBJ))
#: torch's allow-list during a load: the objects above under the names torch does not know, and the types
#: whose state torch then lets a file set (numpy's dtype classes, our placeholders)
_TORCH_ENTRIES = [(v, f'{m}.{n}') for (m, n), v in ALLOWED_GLOBALS.items()
                  if (m, n) not in TORCH_DEFAULTS and m != '__builtin__'] + [
                      (type(np.dtype(c)), f'numpy.dtypes.{type(np.dtype(c)).__name__}') for c in NUMERIC_DTYPES]


# ---------------------------------------------------------------------------------------------- after torch
def _history_state(x):
    keys = {'max_length', '_log_history', '_count_history'}
    state = x.state if isinstance(x.state, dict) else {}
    if not (keys <= set(state) <= keys | {'statistics_methods'} and type(state['max_length']) is int and
            all(type(state[k]) is np.ndarray for k in ('_log_history', '_count_history'))):
        raise _Refusal(f'a HistoryBuffer with state {describe(sorted(map(str, state)) or x.state)}')
    # the statistics methods are dropped: a load never changes HistoryBuffer._statistics_methods
    return plain_history(state['_log_history'], state['_count_history'], state['max_length'])


#: the containers a restricted load gives, by exact type (subclasses are refused)
_CONTAINERS = (dict, collections.OrderedDict, list, tuple, set, frozenset, np.ndarray)


class _LoadedTree(PlainTree):
    """What torch's restricted load returned, as plain data: numpy dtypes become their names, placeholders
    their state; refused are cycles, deep nesting, tensors larger than the file (``limit`` bytes) or with
    backward hooks, ``OrderedDict`` attributes besides a state dict's ``_metadata``, and anything not plain."""
    frozenset_as = frozenset

    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def tensor(self, x):
        if type(x) not in (torch.Tensor, torch.nn.Parameter):
            raise _Refusal(f'an object of type {type(x).__name__}')
        if x.numel() * x.element_size() > self.limit:
            raise _Refusal(f'a tensor of {x.numel()} elements, larger than the file')
        if x._backward_hooks:  # what the file gave _rebuild_tensor_v2 or _rebuild_parameter as hooks
            raise _Refusal('a tensor with backward hooks')
        return x

    def convert(self, x, depth):
        if type(x) not in _CONTAINERS and isinstance(x, _CONTAINERS):  # a subclass, not torch's own output
            raise _Refusal(f'an object of type {type(x).__name__}')
        return super().convert(x, depth)

    def enter(self, x, depth):
        if id(x) in self.active:
            raise _Refusal('a self-referencing structure')
        if depth > MAX_DEPTH:
            raise _Refusal(f'data nested deeper than {MAX_DEPTH} levels')

    def metadata(self, x):
        attrs = getattr(x, '__dict__', None)
        if attrs and not (set(attrs) == {'_metadata'} and is_state_dict_metadata(attrs['_metadata'])):
            raise _Refusal(f'OrderedDict attributes {describe(sorted(map(str, attrs)))}')
        return super().metadata(x)

    def other(self, x, walk):
        t = type(x)
        if isinstance(x, np.dtype):
            return str(x)
        if t is _HistoryBuffer:
            return walk(_history_state(x))
        if t is _Namespace and isinstance(x.state, dict) and all(isinstance(k, str) for k in x.state):
            return {k: walk(v) for k, v in x.state.items()}
        raise _Refusal(f'{describe(x)} without a state of data' if t in (_HistoryBuffer, _Namespace) else
                       f'an object of type {t.__name__}')


# ---------------------------------------------------------------------------------------------- loading
_ALLOW_LIST_LOCK = threading.Lock()


@contextlib.contextmanager
def _torch_allow_list_is_ours():
    """torch's process-wide allow-list holds exactly our entries during a load, the caller's after it (not
    ``torch.serialization.safe_globals``: the caller's ``HistoryBuffer`` would reach our load, and entries the
    caller shares with us would be gone after it); loads in other threads wait."""
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
    """A path opened once (torch reads the handle the scan read), or a file object's bytes from where it is."""
    if isinstance(file, (str, os.PathLike)):
        with open(file, 'rb') as f:
            yield f
    else:
        yield io.BytesIO(file.read())


_READ_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                RuntimeError, OverflowError, MemoryError, UnicodeDecodeError, struct.error, zipfile.BadZipFile,
                RecursionError)


def load_checkpoint(file, map_location='cpu', source: Optional[str] = None, trusted: Optional[bool] = None) -> Any:
    """A torch checkpoint (a path or a binary file object) as data; ``source`` names it in errors.
    ``trusted=True`` unpickles without restrictions (runs code from the file); ``None`` does so only for the
    files of :func:`trusted_checkpoints`."""
    if source is None:
        source = os.fspath(file) if isinstance(file, (str, os.PathLike)) else getattr(file, 'name', '<file object>')
    if is_trusted(file) if trusted is None else trusted:
        return torch.load(file, map_location=map_location, weights_only=False)
    try:
        with _opened(file) as f:
            size = f.seek(0, io.SEEK_END)
            f.seek(0)
            scan_file(f, size, _POLICY)
            with _torch_allow_list_is_ours():
                data = torch.load(f, map_location=map_location, weights_only=True, mmap=False)
        return _LoadedTree(size)(data)
    except _Refusal as e:
        raise UnsafeCheckpointError(f'refusing to load {source}: it asks for {e}, which a data-only load does not '
                                    f'allow; {TRUST_HINT}.') from None
    except _READ_ERRORS as e:
        reason = ' '.join(str(e).split('WeightsUnpickler error: ')[-1].split())[:200]
        raise UnsafeCheckpointError(f'cannot load {source}: it is not a readable torch checkpoint '
                                    f'({type(e).__name__}: {reason}).') from None


# ---------------------------------------------------------------------------------------------- mmengine
def load_local_checkpoint(filename, map_location=None):
    """mmengine ``CheckpointLoader`` scheme for local paths: the file read as data, stored config text dropped."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return drop_config_text(load_checkpoint(filename, map_location), filename)


def _load_from_http(filename, map_location, model_dir=None, progress=True):
    """mmengine's ``load_from_http`` made safe: downloaded once into torch's hub cache, the published hash
    checked (:func:`mmposmlp.utils.download.fetch`), then read as data."""
    from .download import fetch
    trusted = is_trusted(filename) or None
    ckpt = fetch(filename, lambda path: load_checkpoint(path, map_location, source=filename, trusted=trusted))
    return drop_config_text(ckpt, filename)


def register_mmengine_loaders() -> None:
    """Make mmengine's ``CheckpointLoader`` (public ``register_scheme``; idempotent) read local and http(s)
    files with :func:`load_checkpoint`, so stock APIs (Inferencers, ``get_model``, the libraries'
    tools/test.py) read checkpoints as data. Registering is the only global change; loads change nothing."""
    from mmengine.runner.checkpoint import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes='', loader=load_local_checkpoint, force=True)
    CheckpointLoader.register_scheme(prefixes=('http://', 'https://'), loader=_load_from_http, force=True)
