"""Deployment: ONNX export of the backbones and the tensor paths of whole models (above models)."""
from .onnx_export import (DYNAMIC_REFUSALS, ExportError, OnnxCheck, build_export_model, check_onnxruntime,
                          dynamic_refusal, export_onnx)

__all__ = ['DYNAMIC_REFUSALS', 'ExportError', 'OnnxCheck', 'build_export_model', 'check_onnxruntime',
           'dynamic_refusal', 'export_onnx']
