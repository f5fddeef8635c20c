"""torch / mmengine compatibility shims.

torch >= 2.6 loads with ``weights_only=True``; mmengine 0.10.7 checkpoints carry a message hub with
``HistoryBuffer`` objects and numpy arrays, which torch's default allow-list refuses. We neither turn safe
loading off nor grow torch's process-wide allow-list: :mod:`mmposmlp.utils.safe_load` reads such files as
data (torch's weights-only unpickler with checks around it), and our training writes checkpoints that need
no allow-list at all.
"""
import contextlib

import torch

from .safe_load import load_checkpoint, register_mmengine_loaders


def safe_torch_load(path, map_location='cpu'):
    """Load a checkpoint as data (tensors, containers, numbers, strings); see :mod:`mmposmlp.utils.safe_load`."""
    return load_checkpoint(path, map_location=map_location)


# kept name: mmengine's CheckpointLoader reads local and http(s) files through the data-only loader
patch_mmengine_checkpoint_loading = register_mmengine_loaders


@contextlib.contextmanager
def allow_mmengine_checkpoints():
    """For code that loads an mmengine checkpoint itself through ``CheckpointLoader`` (mmdeploy's
    ``torch2onnx``): registers the data-only loaders (:func:`register_mmengine_loaders`, which stay registered)."""
    register_mmengine_loaders()
    yield


# ------------------------------------------------------------------ torch.compile helpers
def is_compiling() -> bool:
    """``torch.compiler.is_compiling()`` (torch >= 2.3), with the torch 2.0-2.2 spelling."""
    compiler = getattr(torch, 'compiler', None)
    if compiler is not None and hasattr(compiler, 'is_compiling'):
        return compiler.is_compiling()
    dynamo = getattr(torch, '_dynamo', None)
    return bool(dynamo is not None and hasattr(dynamo, 'is_compiling') and dynamo.is_compiling())


def assume_constant_result(fn):
    """``torch.compiler.assume_constant_result`` where it exists (torch >= 2.1), else ``fn`` as is
    (then torch.compile traces ``fn`` and may break the graph there; eager mode is unaffected)."""
    deco = getattr(getattr(torch, 'compiler', None), 'assume_constant_result', None)
    return deco(fn) if deco is not None else fn
