"""ONNX export of any shipped config's model (or its backbone), checked in onnxruntime.

What is exported is the model's *tensor path*, the part before any post-processing - the
graphs mmdeploy's "partition" exports produce:

==================  ==========================================  ===================================
model               graph                                       outputs
==================  ==========================================  ===================================
ImageClassifier     backbone + neck + head                      ``cls_score`` (logits)
single-stage det.   backbone + neck + ``bbox_head.forward``     ``cls_score_i``, ``bbox_pred_i``
two-stage det.      backbone + neck + ``rpn_head.forward``      ``rpn_cls_score_i``, ``rpn_bbox_pred_i``
EncoderDecoder      backbone + neck + ``decode_head.forward``   ``seg_logits`` (1/4 resolution)
Recognizer3D        backbone + ``cls_head.forward``             ``cls_score``
``part='backbone'``  the backbone                               ``feat_i`` (one per out_indices)
==================  ==========================================  ===================================

The graph's input is the data preprocessor's output (normalised, padded NCHW images or NCTHW
clips); normalisation, NMS, box decoding and resizing stay outside, as in mmdeploy.

Exporter: ``torch.onnx.export(..., dynamo=True)`` (``torch.export`` based; the default and the
maintained exporter since torch 2.9 - the TorchScript exporter is deprecated). Dynamic height
and width (and frames) are ``torch.export`` dims: a model whose Python code branches on the
input size would be specialised, so such models are refused with one sentence
(:data:`DYNAMIC_REFUSALS`). The PosMLP family builds its padding, shifts and window masks in the
graph while exporting (``mmposmlp.models.layers.windows.InGraphWindowLayout``): the exporter puts the
model in its export mode (``mmposmlp.models.layers.export_mode.export_mode``) for the export.
"""
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from mmposmlp.engine.entry import UserError
from mmposmlp.models.layers.export_mode import export_mode

#: backbone / neck / head class name -> the one sentence saying why it exports with static shapes only
DYNAMIC_REFUSALS: Dict[str, str] = {
    'SwinTransformerIMLP': (
        "mmpretrain's Swin blocks choose their window and shift in Python from each feature map's size "
        '(min(H, W) against the window), so one graph cannot serve every size: export it with static shapes '
        '(drop --dynamic) at the size you deploy.'),
    'FPNHead': (
        "mmseg's FPNHead upsamples through mmseg's Upsample, which turns every scaled size into a Python int "
        '(int(size * scale_factor)), so an export bakes the example\'s sizes into the graph: export it with static '
        'shapes (drop --dynamic) at the size you deploy.'),
}

PARTS = ('model', 'backbone')


class ExportError(UserError):
    """A problem the user can fix, said in one sentence (printed without a traceback)."""


@dataclasses.dataclass
class OnnxCheck:
    """onnxruntime against PyTorch on one input."""
    shape: Tuple[int, ...]
    max_abs_diff: float
    max_abs_ref: float
    tolerance: float

    @property
    def relative(self) -> float:
        return self.max_abs_diff / max(self.max_abs_ref, 1e-12)

    @property
    def ok(self) -> bool:
        return self.relative <= self.tolerance

    def __str__(self):
        shape = 'x'.join(str(s) for s in self.shape)
        verdict = 'OK' if self.ok else f'FAILED (tolerance {self.tolerance:.0e} relative)'
        return (f'onnxruntime vs PyTorch at {shape}: max abs diff {self.max_abs_diff:.3e} (relative to max '
                f'|output| {self.max_abs_ref:.3e}: {self.relative:.3e}) {verdict}')


def model_kind(model: nn.Module) -> str:
    """'classifier' | 'single_stage' | 'two_stage' | 'segmentor' | 'recognizer3d', from the class
    hierarchy (no downstream library import)."""
    names = {c.__name__ for c in type(model).__mro__}
    if 'ImageClassifier' in names:
        return 'classifier'
    if 'TwoStageDetector' in names:
        return 'two_stage'
    if 'SingleStageDetector' in names:
        return 'single_stage'
    if 'EncoderDecoder' in names:
        return 'segmentor'
    if 'Recognizer3D' in names:
        return 'recognizer3d'
    raise ExportError(f'{type(model).__name__} is not a model this tool exports: it serves mmpretrain '
                      'ImageClassifier, mmdet single- and two-stage detectors, mmseg EncoderDecoder and '
                      'mmaction2 Recognizer3D (or use --part backbone).')


def _flatten(out) -> List[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    raise ExportError(f'the model returned a {type(out).__name__}, not tensors: it cannot be an ONNX output.')


class TensorPath(nn.Module):
    """The exported computation: ``x`` -> a flat tuple of tensors (see the module table)."""

    def __init__(self, model: nn.Module, part: str = 'model'):
        super().__init__()
        if part not in PARTS:
            raise ExportError(f'unknown part {part!r}; choose one of {PARTS}.')
        self.model = model
        self.part = part
        self.kind = model_kind(model)
        self.video = self.kind == 'recognizer3d'

    def forward(self, x: torch.Tensor):
        m = self.model
        if self.part == 'backbone':
            out = m.backbone(x)
        elif self.kind == 'classifier':
            out = m(x, mode='tensor')
        elif self.kind == 'single_stage':
            out = m.bbox_head(m.extract_feat(x))
        elif self.kind == 'two_stage':
            out = m.rpn_head(m.extract_feat(x))
        elif self.kind == 'segmentor':
            out = m.decode_head(m.extract_feat(x))
        else:  # Recognizer3D: (B, C, T, H, W) clips
            feats = m.backbone(x)
            if getattr(m, 'with_neck', False):
                feats, _ = m.neck(feats)
            out = m.cls_head(feats)
        return tuple(_flatten(out))

    def output_names(self, outputs) -> List[str]:
        """Names of the flat outputs, from the structure of one eager forward's result."""
        if self.part == 'backbone':
            return [f'feat_{i}' for i in range(len(_flatten(outputs)))]
        if self.kind in ('classifier', 'recognizer3d'):
            return ['cls_score']
        if self.kind == 'segmentor':
            return ['seg_logits']
        groups = ('rpn_cls_score', 'rpn_bbox_pred') if self.kind == 'two_stage' else ('cls_score', 'bbox_pred')
        return [f'{groups[j] if j < len(groups) else f"head_out{j}"}_{i}'
                for j, level in enumerate(outputs) for i in range(len(_flatten(level)))]

    def structured(self, x: torch.Tensor):
        """One eager forward keeping the nesting (for :meth:`output_names`)."""
        m = self.model
        if self.part == 'backbone':
            return m.backbone(x)
        if self.kind == 'single_stage':
            return m.bbox_head(m.extract_feat(x))
        if self.kind == 'two_stage':
            return m.rpn_head(m.extract_feat(x))
        return self.forward(x)


def dynamic_refusal(model: nn.Module) -> Optional[str]:
    """``(module type, one-sentence reason)`` why ``model`` exports with static shapes only, or None."""
    for name in ('backbone', 'neck', 'decode_head', 'bbox_head', 'rpn_head', 'cls_head'):
        part = getattr(model, name, None)
        if part is not None and type(part).__name__ in DYNAMIC_REFUSALS:
            return type(part).__name__, DYNAMIC_REFUSALS[type(part).__name__]
    return None


def build_export_model(config: str, checkpoint: str, cfg_options: Optional[dict] = None) -> nn.Module:
    """The config's model in eval mode with ``checkpoint``'s weights (loaded with
    ``weights_only=True``; every weight of the model must be in it)."""
    import os.path as osp

    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import MODELS

    from mmposmlp.engine.entry import load_config
    from mmposmlp.models.checkpoints import load_checkpoint_file, load_state_dict_checked
    if not osp.isfile(config):
        raise ExportError(f'config file {config} does not exist.')
    if not osp.isfile(checkpoint):
        raise ExportError(f'checkpoint {checkpoint} does not exist: train one with tools/train.py or convert '
                          'official weights with tools/model_converters/.')
    cfg, _ = load_config(config, cfg_options)
    model = MODELS.build(cfg.model)
    state = load_checkpoint_file(checkpoint)
    load_state_dict_checked(model, state, allowed_unexpected=(), source=checkpoint)
    model = revert_sync_batchnorm(model)  # SyncBN (segmentation configs) runs as BN outside DDP
    return model.eval()


def export_onnx(path: str, model: nn.Module, example: torch.Tensor, part: str = 'model', dynamic: bool = False,
                opset: int = 18) -> Tuple[TensorPath, List[str]]:
    """Export ``model``'s tensor path (or backbone) at ``example`` to ``path``.

    ``dynamic``: height and width (and frames of clips) are symbolic dims of the graph's input;
    the batch size stays that of ``example``.
    Returns the exported module and its output names.
    """
    wrapper = TensorPath(model, part).eval()
    video = wrapper.video or example.dim() == 5
    if dynamic:
        refusal = dynamic_refusal(model)
        if refusal is not None:
            raise ExportError(f'{type(model).__name__} with {refusal[0]} exports with static shapes only: '
                              f'{refusal[1]}')
    with torch.no_grad():
        names = wrapper.output_names(wrapper.structured(example))
    dynamic_shapes = None
    if dynamic:
        # Dim.DYNAMIC: an error if the model specialises a dim to a constant; relations the shape
        # solver cannot prove (e.g. "the padded size is >= the size") are accepted as guards
        axes = (2, 3, 4) if video else (2, 3)
        dynamic_shapes = {'x': {a: torch.export.Dim.DYNAMIC for a in axes}}
    with torch.no_grad(), export_mode(model):  # the model's export form (window layouts built in the graph)
        try:
            program = torch.onnx.export(wrapper, (example, ), dynamo=True, input_names=['input'],
                                        output_names=names, dynamic_shapes=dynamic_shapes, opset_version=opset,
                                        optimize=True, verbose=False)
        except Exception as err:  # noqa: BLE001  (the exporter raises many types)
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            hint = (' A dynamic export fails like this when the model branches in Python on the input size: '
                    'export with static shapes (drop --dynamic).' if dynamic else '')
            raise ExportError(f'torch.onnx.export failed for {type(model).__name__}: {first[:400]}.{hint}') from err
    program.save(path)
    return wrapper, names


def check_onnxruntime(path: str, wrapper: nn.Module, inputs: Sequence[torch.Tensor],
                      tolerance: float = 1e-4) -> List[OnnxCheck]:
    """Run the ONNX graph in onnxruntime (CPU) and the PyTorch model on each input; compare all
    outputs (max abs difference relative to the largest reference output)."""
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise ExportError('checking the graph needs onnxruntime: pip install onnxruntime.') from err
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=['CPUExecutionProvider'])
    input_name = session.get_inputs()[0].name
    checks = []
    for x in inputs:
        with torch.no_grad():
            refs = [t.float() for t in wrapper(x)]
        outs = session.run(None, {input_name: x.numpy()})
        if len(outs) != len(refs):
            raise ExportError(f'the ONNX graph returned {len(outs)} outputs, PyTorch {len(refs)}.')
        diff, scale = 0.0, 0.0
        for ref, out in zip(refs, outs):
            out = torch.from_numpy(out)
            if tuple(out.shape) != tuple(ref.shape):
                raise ExportError(f'the ONNX graph returned shape {tuple(out.shape)} where PyTorch returns '
                                  f'{tuple(ref.shape)} at input {tuple(x.shape)}.')
            diff = max(diff, (out - ref).abs().max().item() if ref.numel() else 0.0)
            scale = max(scale, ref.abs().max().item() if ref.numel() else 0.0)
        checks.append(OnnxCheck(tuple(x.shape), diff, scale, tolerance))
    return checks
