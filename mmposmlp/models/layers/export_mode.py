"""The export mode of a model: modules whose forward takes another, graph-friendly form while the
model is exported (window layouts, padding and masks computed in the graph, no shape- or
storage-keyed cache, no chunking).

The mode is a plain attribute of those modules (:class:`ExportModeMixin`), set on a whole model by
the exporter (:func:`export_mode`, a context manager, or :func:`set_export_mode`), and read by
:func:`exporting`. An exporter that does not set it (a direct ``torch.export`` / ``torch.onnx.export``
call, e.g. mmdeploy's) is still recognised through torch's own public ``torch.compiler.is_exporting()``
and ``torch.onnx.is_in_onnx_export()``.
"""
import contextlib
from typing import Dict, Iterator

import torch
import torch.nn as nn

from mmposmlp.utils.compat import is_compiling

__all__ = ['ExportModeMixin', 'export_mode', 'exporting', 'set_export_mode', 'torch_is_exporting']


class ExportModeMixin:
    """A module with an export form; ``export_mode`` is set by :func:`set_export_mode` / :func:`export_mode`."""

    export_mode: bool = False


def torch_is_exporting() -> bool:
    """True while torch exports (``torch.export``, either ONNX exporter), False under ``torch.compile``."""
    compiler = getattr(torch, 'compiler', None)
    if compiler is not None and hasattr(compiler, 'is_exporting') and compiler.is_exporting():
        return True
    if is_compiling():  # torch.compile: the cached layouts enter the graph as constants
        return False
    onnx = getattr(torch, 'onnx', None)
    return bool(onnx is not None and onnx.is_in_onnx_export())


def exporting(module: nn.Module) -> bool:
    """Whether ``module`` runs in its export form: its ``export_mode`` is set, or torch is exporting."""
    return bool(getattr(module, 'export_mode', False)) or torch_is_exporting()


def set_export_mode(model: nn.Module, enabled: bool = True) -> Dict[nn.Module, bool]:
    """Set ``export_mode`` on every :class:`ExportModeMixin` module of ``model``; returns their previous modes."""
    previous = {}
    for m in model.modules():
        if isinstance(m, ExportModeMixin):
            previous[m] = m.export_mode
            m.export_mode = bool(enabled)
    return previous


@contextlib.contextmanager
def export_mode(model: nn.Module, enabled: bool = True) -> Iterator[nn.Module]:
    """Run ``model`` in its export form inside the block (what an exported graph computes), then restore."""
    previous = set_export_mode(model, enabled)
    try:
        yield model
    finally:
        for m, mode in previous.items():
            m.export_mode = mode
