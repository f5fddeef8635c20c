"""Trusting a checkpoint is an explicit, per-command choice: ``--trust-checkpoint`` in our tools,
:func:`trusted_checkpoints` in code. Only the files named there are unpickled without restrictions."""
import contextlib
import contextvars
import os
import os.path as osp
from typing import Iterable, Optional

TRUST_HINT = 'if you trust this file, rerun with --trust-checkpoint (or load it inside trusted_checkpoints([path]))'
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
