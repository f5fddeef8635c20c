"""Parameters and FLOPs of the shipped configs (logic behind tools/analysis/complexity.py).

Counter and conventions
-----------------------
* FLOPs are counted with ``fvcore.nn.FlopCountAnalysis`` (a ``torch.jit`` trace); fvcore counts
  **one multiply-add as one FLOP** for convolutions, linear layers, ``matmul``/``bmm``/``einsum``,
  the convention of the papers' tables. :data:`EXTRA_HANDLES` adds the matrix products fvcore skips:
  attention through ``scaled_dot_product_attention`` (``q k^T`` and ``attn v``) and the gating units'
  token mixing written as ``baddbmm``. fvcore's default handlers also add small per-element
  counts for batch/layer/group norms, adaptive average pooling and up-sampling; element-wise
  add/mul, softmax and activations are not counted (the skipped op names are listed per config
  in ``--json``).
* Inputs: classification 1x3x224x224 (whole model: backbone + neck + head); semantic segmentation
  1x3x512x512 (backbone + neck + decode/auxiliary heads via ``EncoderDecoder._forward``);
  detection 1x3x800x1280 (the usual 1280x800 of the papers' detection tables): **backbone + neck**
  only (RPN/RoI heads contain data-dependent proposal code that a trace cannot follow, so
  detector FLOPs here are lower than the papers', which include the heads); video recognition
  1x3x16x224x224 (24 frames for ``24x4x1`` configs): backbone + head.
* Parameters: every parameter of the whole model built from the config (detectors and
  segmentors included), with the config's number of classes.
* Reported numbers come from the metafile next to the config (``configs/<family>/metafile.yml``,
  ``configs/<family>/paper_tables/metafile.yml``): an entry's ``Paper Parameters`` / ``Paper FLOPs``
  (or a ``Parameters`` / ``FLOPs`` line commented ``# reported``), else :data:`REPORTED` (transcribed
  from the papers' tables, labelled "reported").
"""
import fnmatch
import glob
import json
import os.path as osp
import re
import time
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn

# config-name glob -> (params M, GFLOPs or None, source[, input of the reported FLOPs]); the papers'
# numbers, *reported*, not measured. The FLOPs difference is only computed where input and counted part match.
_WAVE_SEG = ('Wave-MLP paper Table 4 (full segmentor; FLOPs presumably at 512x2048, the PVT '
             'Semantic-FPN convention: 4x ours at 512x512 is within 6%); its params match the depthwise-phase '
             '(-dw) backbones, not the fc-phase ones')
_WAVE_DET = ('Wave-MLP paper Table 3 (full detector); its params match the depthwise-phase (-dw) backbones, '
             'not the fc-phase ones')
_CPVT_GAP = ('CPVT ships 0-5 PEGs; the paper prints 5.9M (tiny) / 22.9M (small) for "0-5" in Table 12 and '
             '6 / 23 / 88M in Tables 3, 4 and 15, ours is DeiT minus the position table plus five 3x3 depthwise '
             'PEGs (Table 2 / 9: 6 / 22 / 86M are the single-PEG "0-1" model and the bare architecture)')
_VIDEO_ABL = 'PosMLP-Video paper Table {} (SSV1, 16x224x224, one view)'

_LVT_NOTE = ('IMLP paper Table 1 ({}); the paper counts conv / linear / norm modules only: without the '
             'attention matmuls and RASA\'s functional atrous convs ours are 0.760 / 0.841 / 0.922 / 1.003G '
             '(LVT-R1..R4) and 0.665 / 0.746 / 0.827 / 0.908G (+ IMLP*), tests/test_lvt.py')
REPORTED = {
    'posmlp-t_*in1k*': (21, 5.2, 'PosMLP paper Table 2'),
    'posmlp-s_*in1k*': (37, 8.7, 'PosMLP paper Table 2'),
    'posmlp-b_*in1k*': (82, 18.6, 'PosMLP paper Table 2'),
    'mask-rcnn_posmlp-t_1x*': (40.5, None, 'PosMLP paper Table 8'),
    'mask-rcnn_posmlp-s_1x*': (56.1, None, 'PosMLP paper Table 8'),
    'retinanet_posmlp-t_1x*': (31.1, None, 'PosMLP paper Table 8'),
    'retinanet_posmlp-s_1x*': (47.3, None, 'PosMLP paper Table 8'),
    'wavemlp-t-dw_*in1k*': (15, 2.1, 'Wave-MLP paper Table 2'),
    'wavemlp-t_*in1k*': (17, 2.4, 'Wave-MLP paper Table 2'),
    'wavemlp-s_*in1k*': (30, 4.5, 'Wave-MLP paper Table 2'),
    'wavemlp-m_*in1k*': (44, 7.9, 'Wave-MLP paper Table 2'),
    'wavemlp-b_*in1k*': (63, 10.2, 'Wave-MLP paper Table 2'),
    'retinanet_wavemlp-t-dw_fpn_1x*': (25.3, 196.3, _WAVE_DET, '800x1280'),
    'retinanet_wavemlp-s-dw_fpn_1x*': (37.1, 231.3, _WAVE_DET, '800x1280'),
    'retinanet_wavemlp-m-dw_fpn_1x*': (49.4, 291.3, _WAVE_DET, '800x1280'),
    'retinanet_wavemlp-b-dw_fpn_1x*': (66.1, 333.9, _WAVE_DET, '800x1280'),
    'mask-rcnn_wavemlp-t-dw_fpn_1x*': (35.2, 214.6, _WAVE_DET, '800x1280'),
    'mask-rcnn_wavemlp-s-dw_fpn_1x*': (47.0, 250.3, _WAVE_DET, '800x1280'),
    'mask-rcnn_wavemlp-m-dw_fpn_1x*': (59.6, 311.5, _WAVE_DET, '800x1280'),
    'mask-rcnn_wavemlp-b-dw_fpn_1x*': (75.1, 353.2, _WAVE_DET, '800x1280'),
    'fpn_wavemlp-t-dw_*ade20k*': (19.3, 131, _WAVE_SEG, '512x2048'),
    'fpn_wavemlp-s-dw_*ade20k*': (31.2, 168, _WAVE_SEG, '512x2048'),
    'fpn_wavemlp-m-dw_*ade20k*': (43.3, 231, _WAVE_SEG, '512x2048'),
    'cpvt-ti_*in1k*': (6, None, 'CPVT paper Table 4 (CPVT-Ti, 0-5 PEGs); ' + _CPVT_GAP),
    'cpvt-ti-gap_*in1k*': (6, None, 'CPVT paper Table 4 (CPVT-Ti-GAP); ' + _CPVT_GAP),
    'cpvt-s_*in1k*': (23, None, 'CPVT paper Table 4 (CPVT-S); ' + _CPVT_GAP),
    'cpvt-s-gap_*in1k*': (23, 4.6, 'CPVT paper Tables 4 and 15 (CPVT-S-GAP); ' + _CPVT_GAP),
    'cpvt-b_*in1k*': (88, None, 'CPVT paper Table 4 (CPVT-B); ' + _CPVT_GAP),
    'cpvt-b-gap_*in1k*': (88, None, 'CPVT paper Table 4 (CPVT-B-GAP); ' + _CPVT_GAP),
    'pvt-peg-t-gap_*in1k*': (13, None, 'CPVT paper Table 13 (PVT-tiny+PEG+GAP)'),
    'pvt-peg-s-gap_*in1k*': (25, 3.8, 'CPVT paper Tables 13 and 15 (PVT-small+PEG+GAP)'),
    'pvt-peg-m-gap_*in1k*': (44, None, 'CPVT paper Table 13 (PVT-Medium+PEG+GAP)'),
    'posmlp-video-s-posgu_*': (7.95, 25.08, _VIDEO_ABL.format(3)),
    'posmlp-video-s-potgu_*': (7.65, 20.32, _VIDEO_ABL.format(3)),
    'posmlp-video-s-postgu_*': (17.19, 103.09, _VIDEO_ABL.format(3)),
    'posmlp-video-s-potgu2posgu_*': (13.51, 40.49, _VIDEO_ABL.format(3)),
    'posmlp-video-s-posgu2potgu_*': (13.51, 40.49, _VIDEO_ABL.format(3)),
    'posmlp-video-s-scratch_*': (13.51, 40.49, _VIDEO_ABL.format('3 / 5 / 8 (V1)')),
    'posmlp-video-s-sgu-tgu_*': (13.83, 40.76, _VIDEO_ABL.format(3)),
    'posmlp-video-s_4xb8-u16-60e_sthv1-rgb': (13.51, 40.49, _VIDEO_ABL.format('3 (IN-1K row)')),
    'posmlp-video-s-w8x14_*': (13.50, 20.38, _VIDEO_ABL.format(5)),
    'posmlp-video-s-w16x7_*': (13.30, 36.64, _VIDEO_ABL.format(5)),
    'posmlp-video-s-w16x28_*': (13.57, 46.86, _VIDEO_ABL.format(5)),
    'posmlp-video-s-v2_*': (13.49, 40.35, _VIDEO_ABL.format(8)),
    'posmlp-video-s-v3_*': (9.80, 30.46, _VIDEO_ABL.format(8)),
    'posmlp-video-s-v4_*': (7.96, 25.52, _VIDEO_ABL.format(8)),
    'deit-ti-imlp_*': (5.00, 1.10, 'IMLP paper Table 1'),
    'deit-s-imlp_*': (18.84, 3.93, 'IMLP paper Table 1'),
    'deit-b-imlp_*': (73.66, 14.92, 'IMLP paper Table 1 (n = 5)'),
    'swin-t-imlp_*in1k*': (24.29, 3.88, 'IMLP paper Table 1'),
    'swin-s-imlp_*in1k*': (42.40, 7.49, 'IMLP paper Table 1'),
    'swin-b-imlp_*in1k*': (75.45, 13.34, 'IMLP paper Table 1 (n = 5)'),
    'poolformer-s12-imlp_*': (9.80, 1.48, 'IMLP paper Table 1'),
    'poolformer-s24-imlp_*': (17.15, 2.72, 'IMLP paper Table 1'),
    'poolformer-s36-imlp_*': (24.50, 3.97, 'IMLP paper Table 1'),
    'poolformer-m36-imlp_*': (44.19, 6.93, 'IMLP paper Table 1'),
    'poolformer-m48-imlp_*': (58.62, 9.46, 'IMLP paper Table 1 (n = 5)'),
    'lvt-r1_*': (5.52, 0.76, _LVT_NOTE.format('LVT-R1')),
    'lvt-r1-imlp_*': (4.98, 0.68, _LVT_NOTE.format('LVT-R1 + IMLP* (n = 5)')),
    'lvt-r2_*': (5.52, 0.84, _LVT_NOTE.format('LVT-R2')),
    'lvt-r2-imlp_*': (4.98, 0.76, _LVT_NOTE.format('LVT-R2 + IMLP* (n = 5)')),
    'lvt-r3_*': (5.52, 0.92, _LVT_NOTE.format('LVT-R3')),
    'lvt-r3-imlp_*': (4.98, 0.84, _LVT_NOTE.format('LVT-R3 + IMLP* (n = 5)')),
    'lvt-r4_*': (5.52, 1.00, _LVT_NOTE.format('LVT-R4')),
    'lvt-r4-imlp_*': (4.98, 0.92, _LVT_NOTE.format('LVT-R4 + IMLP* (n = 5)')),
    'deit-ti-imlp-channel_*': (4.89, 1.08, 'IMLP paper Table 2 (w/ channel)'),
    'deit-ti-imlp-spatial_*': (5.83, 1.28, 'IMLP paper Table 2 (w/ spatial)'),
    'deit-ti-imlp-k1_*': (4.92, 1.08, 'IMLP paper Table 5 (n = 1)'),
    'deit-ti-imlp-k5_*': (5.15, 1.13, 'IMLP paper Table 5 (n = 5)'),
    'deit-ti-imlp-k7_*': (5.37, 1.17, 'IMLP paper Table 5 (n = 7)'),
    'deit-ti-imlp-channel-kd_*': (4.89, 1.08, 'IMLP paper Table 2 (w/ channel + KD; the student)'),
    'deit-ti-softplus_*': (5.72, 1.26, 'IMLP paper Table 8 (DeiT with SoftPlus; params/FLOPs headers swapped there)'),
    'mask-rcnn_swin-t-imlp_*': (44, 251, 'IMLP paper Table 6 (full detector)', '800x1280'),
    'upernet_swin-t-imlp_*': (56, 928, 'IMLP paper Table 7 (full segmentor; Swin\'s UperNet FLOPs are at 512x2048)',
                              '512x2048'),
}

INPUTS = {'mmpretrain': (1, 3, 224, 224), 'mmseg': (1, 3, 512, 512), 'mmdet': (1, 3, 800, 1280),
          'mmaction': (1, 3, 16, 224, 224)}
COUNTED = {'mmpretrain': 'whole model', 'mmseg': 'backbone+neck+heads', 'mmdet': 'backbone+neck',
           'mmaction': 'backbone+head'}


class _Forward(nn.Module):
    """Wrap a model so that ``forward(x)`` is the part that is counted."""

    def __init__(self, model, scope):
        super().__init__()
        self.model = model
        self.scope = scope

    def forward(self, x):
        m = self.model
        if self.scope is None:
            return m(x)
        if self.scope == 'mmdet':
            return m.extract_feat(x)
        if self.scope == 'mmseg':
            return m._forward(x)
        if self.scope == 'mmaction':
            return m(x[:, None], mode='tensor')
        return m(x, mode='tensor')


def _shape(v):
    from fvcore.nn.jit_handles import get_shape
    return get_shape(v)


def _prod(xs):
    out = 1
    for x in xs:
        out *= int(x)
    return out


def sdpa_flop_jit(inputs, outputs) -> int:
    """``scaled_dot_product_attention(q, k, v)``: ``q k^T`` and ``attn v``, one MAC per multiply-add.

    q ``(..., L, E)``, k ``(..., S, E)``, v ``(..., S, Ev)``: ``batch * L * S * (E + Ev)`` (the scaling,
    mask and softmax are element-wise and not counted, as for every other op).
    """
    q, k, v = (_shape(x) for x in inputs[:3])
    batch = _prod(q[:-2])
    return batch * q[-2] * k[-2] * (q[-1] + v[-1])


def baddbmm_flop_jit(inputs, outputs) -> int:
    """``baddbmm(input, b1, b2)`` / ``addbmm``: the batched product ``b1 @ b2`` (``B * n * m * p`` MACs)."""
    b1, b2 = _shape(inputs[1]), _shape(inputs[2])
    return b1[0] * b1[1] * b1[2] * b2[2]


def addmv_flop_jit(inputs, outputs) -> int:
    """``addmv(input, mat, vec)``: ``n * m`` MACs."""
    return _prod(_shape(inputs[1]))


#: fvcore has no handler for these matrix products (it lists them as skipped): attention through
#: ``F.scaled_dot_product_attention`` (mmpretrain ViT / DeiT, PVT, CPVT) and the token mixing of the
#: gating units written as ``baddbmm`` (PosMLP, PosMLP-Video).
EXTRA_HANDLES = {
    'aten::scaled_dot_product_attention': sdpa_flop_jit,
    'aten::_scaled_dot_product_flash_attention_for_cpu': sdpa_flop_jit,
    'aten::baddbmm': baddbmm_flop_jit,
    'aten::addbmm': baddbmm_flop_jit,
    'aten::addmv': addmv_flop_jit,
}

#: element-wise ops that no counter of the papers counts (their tables are multiply-accumulates of the
#: matrix products and convolutions); listed so that ``skipped_ops`` shows only ops that could matter.
ELEMENTWISE_OPS = frozenset(
    'aten::' + n for n in (
        'add', 'add_', 'sub', 'rsub', 'mul', 'mul_', 'div', 'div_', 'neg', 'pow', 'sqrt', 'rsqrt', 'exp', 'log',
        'sin', 'cos', 'tanh', 'sigmoid', 'gelu', 'relu', 'relu_', 'silu', 'hardswish', 'softmax', 'log_softmax',
        'erf', 'abs', 'clamp', 'clamp_min', 'mean', 'sum', 'max', 'min', 'avg_pool2d', 'avg_pool3d', 'max_pool2d',
        'max_pool3d', 'dropout', 'dropout_', 'fill_', 'zero_', 'copy_', 'where', 'masked_fill', 'masked_fill_',
        'lerp', 'addcmul', 'sign', 'floor', 'ceil', 'round', 'remainder', 'eq', 'ne', 'lt', 'gt', 'le', 'ge',
        'cumsum', 'linalg_vector_norm', 'norm', 'reciprocal', 'square', 'sub_', 'add_'))


def count_flops(model: nn.Module, shape, scope: Optional[str] = None) -> Tuple[int, Dict[str, int]]:
    """(total FLOPs with 1 MAC = 1 FLOP, {skipped op: count}) of ``model`` on one random input.

    fvcore's handlers plus :data:`EXTRA_HANDLES`; ``skipped`` lists every other op that is neither a
    pure data movement (fvcore ignores those) nor in :data:`ELEMENTWISE_OPS`, so a new matrix product
    shows up there instead of being silently dropped.
    """
    from fvcore.nn import FlopCountAnalysis
    model.eval()
    x = torch.randn(tuple(shape))
    with torch.no_grad():
        fca = FlopCountAnalysis(_Forward(model, scope), x)
        fca.set_op_handle(**EXTRA_HANDLES)
        fca.unsupported_ops_warnings(False)
        fca.uncalled_modules_warnings(False)
        fca.tracer_warnings('none')
        total = fca.total()
        skipped = {k: v for k, v in fca.unsupported_ops().items() if k not in ELEMENTWISE_OPS}
    return int(total), skipped


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def reported_for(cfg_path: str) -> Optional[dict]:
    """The papers' numbers for a config: its entry in the metafile next to it (``Paper Parameters`` /
    ``Paper FLOPs``, or a ``Parameters``/``FLOPs`` line commented ``# reported``; OpenMMLab metafiles
    otherwise hold the implementation's own measured values, which are not the papers'), else the first
    :data:`REPORTED` glob matching its name."""
    name = osp.splitext(osp.basename(cfg_path))[0]
    from_meta = _reported_in_metafile(cfg_path, name)
    if from_meta:
        return from_meta
    for pattern, entry in REPORTED.items():
        if fnmatch.fnmatch(name, pattern):
            p, fl, src = entry[:3]
            return dict(params_m=p, gflops=fl, source=src, input=entry[3] if len(entry) > 3 else None)
    return None


def _reported_in_metafile(cfg_path: str, name: str) -> Optional[dict]:
    meta = osp.join(osp.dirname(cfg_path), 'metafile.yml')
    if not osp.isfile(meta):
        return None
    try:
        with open(meta) as f:
            text = f.read()
    except OSError:
        return None
    blocks = re.split(r'\n\s*- Name:\s*', text)
    for b in blocks[1:]:
        if b.split('\n', 1)[0].strip() != name:
            continue
        vals, sources = {}, []
        for field in ('Parameters', 'FLOPs'):
            m = (re.search(rf'^\s*Paper {field}:\s*([^#\n]+)(?:#([^\n]*))?$', b, re.M)
                 or re.search(rf'^\s*{field}:\s*([^#\n]+)#([^\n]*reported[^\n]*)$', b, re.M))
            if m:
                vals[field] = _as_number(m.group(1))
                comment = (m.group(2) or '').strip()
                if comment and comment not in sources:
                    sources.append(comment)
        if vals:
            source = '; '.join(sources) if sources else 'reported'
            return dict(params_m=_to_unit(vals.get('Parameters'), 1e6), gflops=_to_unit(vals.get('FLOPs'), 1e9),
                        source=f'{source} ({osp.relpath(meta)})')
    return None


def _as_number(v):
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    m = re.match(r'\s*([\d.]+)\s*([KMGT]?)', str(v))
    if not m:
        return None
    return float(m.group(1)) * {'': 1, 'K': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}[m.group(2)]


def _to_unit(v, unit):
    if v is None:
        return None
    return v / unit if v > 1e4 else v  # small numbers are already in M / G


def input_shape_for(cfg_path: str, scope: str):
    shape = INPUTS.get(scope, (1, 3, 224, 224))
    if scope == 'mmaction':
        m = re.search(r'(\d+)x\d+x\d+', osp.basename(cfg_path)) or re.search(r'-u(\d+)-', osp.basename(cfg_path))
        t = int(m.group(1)) if m else 16
        shape = (1, 3, t, 224, 224)
    m = re.search(r'-(\d+)px', osp.basename(cfg_path))  # e.g. posmlp-t_8xb120_in1k-384px.py
    if m and scope == 'mmpretrain':
        shape = (1, 3, int(m.group(1)), int(m.group(1)))
    return shape


def positional_matrix_bytes(model: nn.Module) -> int:
    """Bytes of the ``(groups, N, N)`` token-mixing matrices the gating units materialise (fp32)."""
    total = 0
    for m in model.modules():
        n, g = getattr(m, 'num_tokens', None), getattr(m, 'groups', None)
        if isinstance(n, int) and isinstance(g, int) and hasattr(m, 'mixing'):
            total += 4 * g * n * n
    return total


def config_complexity(cfg_path: str, flops: bool = True, cache: Optional[dict] = None,
                      max_input_pixels: Optional[int] = None, max_matrix_gib: float = 2.0) -> dict:
    """Params/FLOPs of one config; failures give ``n/a`` with the reason, never raise."""
    from mmengine.config import Config
    from mmposmlp.testing import build_model_from_cfg
    row = dict(config=cfg_path, params_m=None, gflops=None, input=None, counted=None, note='')
    t0 = time.time()
    try:
        cfg = Config.fromfile(cfg_path)
        model, scope = build_model_from_cfg(cfg)
    except Exception as e:  # noqa: BLE001
        row['note'] = f'build failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}'
        return row
    row['params_m'] = count_params(model) / 1e6
    row['scope'] = scope
    shape = input_shape_for(cfg_path, scope)
    row['input'] = 'x'.join(str(s) for s in shape[2:])
    row['counted'] = COUNTED.get(scope, 'whole model')
    if flops:
        pixels = 1
        for s in shape[2:]:
            pixels *= s
        key = json.dumps(cfg.model.to_dict() if hasattr(cfg.model, 'to_dict') else str(cfg.model),
                         sort_keys=True, default=str) + str(shape)
        if cache is not None and key in cache:
            row['gflops'], row['skipped_ops'] = cache[key]
            row['note'] = 'same model as another config'
        elif max_input_pixels and pixels > max_input_pixels:
            row['note'] = f'FLOPs skipped: input {row["input"]} above --max-pixels'
        elif positional_matrix_bytes(model) > max_matrix_gib * 2**30:
            # a trace would hold several copies of each (G, N, N) map (logits, softmax, grads of
            # the trace): PoSTGU's joint 16x14x14 windows need tens of GiB - more than this machine
            row['note'] = (f'FLOPs skipped: the gating units materialise '
                           f'{positional_matrix_bytes(model) / 2**30:.1f} GiB of (G, N, N) mixing matrices '
                           f'(limit {max_matrix_gib} GiB, --max-matrix-gib)')
        else:
            try:
                total, skipped = count_flops(model, shape, scope)
                row['gflops'], row['skipped_ops'] = total / 1e9, skipped
                if cache is not None:
                    cache[key] = (row['gflops'], skipped)
            except Exception as e:  # noqa: BLE001
                row['note'] = f'FLOPs failed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ""}'
    row['reported'] = reported_for(cfg_path)
    row['seconds'] = round(time.time() - t0, 1)
    return row


def find_configs(root: str = 'configs', pattern: str = '*') -> list:
    files = sorted(glob.glob(osp.join(root, '**', '*.py'), recursive=True))
    return [f for f in files if '_base_' not in f.split(osp.sep) and fnmatch.fnmatch(osp.basename(f), pattern)]


def _fmt(v, nd=2):
    return 'n/a' if v is None else f'{v:.{nd}f}'


def _delta(ours, paper):
    if ours is None or paper is None:
        return ''
    return f'{100 * (ours - paper) / paper:+.1f}%'


def _flops_delta(row, rep):
    if not rep or row.get('counted') == 'backbone+neck':
        return ''
    if rep.get('input') and rep['input'] != row.get('input'):
        return f"(paper at {rep['input']})"
    return _delta(row.get('gflops'), rep.get('gflops'))


def config_folder(cfg_path: str) -> str:
    """``configs/posmlp/paper_tables/x.py`` -> ``posmlp/paper_tables`` (the model-zoo section)."""
    parts = osp.normpath(cfg_path).split(osp.sep)[:-1]
    if 'configs' in parts:
        return '/'.join(parts[len(parts) - parts[::-1].index('configs'):])
    return parts[-1] if parts else ''


#: the hidden block at the end of :func:`markdown_table`'s output: one ``<config> <params M> <GFLOPs>`` line per
#: row, unrounded (``repr``), so that ``--merge`` computes the "d" columns of the rows it keeps from the
#: measurements, not from the 2-decimal cells.
MEASUREMENTS_BEGIN = '<!-- unrounded measurements (config, params M, GFLOPs), read back by --merge:'
MEASUREMENTS_END = '-->'


def rows_from_markdown(text: str, configs: list) -> list:
    """The rows of an earlier :func:`markdown_table` (measured columns only: params, GFLOPs, input, counted,
    note), matched to ``configs`` by file name; rows of configs no longer there are dropped. The papers'
    columns are not read back: :func:`reported_for` gives them again.

    Params and GFLOPs come unrounded from the file's measurements block. A file written before that block
    existed has only the rounded cells: such a row keeps its printed paper and "d" cells under
    ``row['printed']`` (computed by the run that measured it), see :func:`needs_recount`.
    """
    by_stem = {osp.splitext(osp.basename(c))[0]: c for c in configs}
    exact = _measurements_block(text)
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) < 11 or cells[0] not in by_stem or not re.fullmatch(r'[\d.]+|n/a', cells[1]):
            continue
        num = (lambda v: None if v == 'n/a' else float(v))
        row = dict(config=by_stem[cells[0]], params_m=num(cells[1]), gflops=num(cells[2]),
                   input=None if cells[3] == 'n/a' else cells[3],
                   counted=None if cells[4] == 'n/a' else cells[4], note=cells[-1])
        if cells[0] in exact:
            params_m, gflops = exact[cells[0]]
            if (_fmt(params_m), _fmt(gflops)) != (cells[1], cells[2]):
                raise ValueError(f'{cells[0]}: the table says {cells[1]}M / {cells[2]} GFLOPs but the measurements '
                                 f'block {params_m}M / {gflops} GFLOPs; regenerate the file instead of editing it')
            row.update(params_m=params_m, gflops=gflops)
        else:
            row['printed'] = dict(zip(('paper_params', 'd_params', 'paper_gflops', 'd_flops'), cells[5:9]))
        rows.append(row)
    return rows


def _measurements_block(text: str) -> dict:
    """``{config stem: (params M, GFLOPs or None)}`` of the measurements block (empty when there is none)."""
    if MEASUREMENTS_BEGIN not in text:
        return {}
    block = text.split(MEASUREMENTS_BEGIN, 1)[1].split(MEASUREMENTS_END, 1)[0]
    num = (lambda v: None if v == 'n/a' else float(v))
    out = {}
    for line in block.strip().splitlines():
        stem, params_m, gflops = line.split()
        out[stem] = (num(params_m), num(gflops))
    return out


def paper_cells(row: dict) -> Tuple[str, str, str, str]:
    """(paper params, d params, paper GFLOPs, d FLOPs) cells of a row, the "d" from its measurements."""
    rep = row.get('reported') or {}
    return (_fmt(rep.get('params_m'), 1) if rep else '', _delta(row['params_m'], rep.get('params_m')),
            _fmt(rep.get('gflops'), 1) if rep and rep.get('gflops') else '', _flops_delta(row, rep))


def _is_delta(cell: str) -> bool:
    return cell.startswith(('+', '-'))


def needs_recount(row: dict) -> bool:
    """A row read back without its unrounded measurements whose papers' numbers changed since (or that now
    gets a "d" it did not print): its "d" cells can only be recomputed by counting the config again (the
    rounded cells would shift them)."""
    printed = row.get('printed')
    if printed is None:
        return False
    paper_params, d_params, paper_gflops, d_flops = paper_cells(row)
    return ((paper_params, paper_gflops) != (printed['paper_params'], printed['paper_gflops'])
            or (_is_delta(d_params) and not _is_delta(printed['d_params']))
            or (_is_delta(d_flops) and not _is_delta(printed['d_flops'])))


def _kept_cells(row: dict) -> Tuple[str, str, str, str]:
    """:func:`paper_cells` of a row read back without measurements: a "d" from the measurements is the
    printed one (computed by the run that measured the row), any other cell is computed again."""
    cells = paper_cells(row)
    if needs_recount(row):
        stem = osp.splitext(osp.basename(row['config']))[0]
        raise ValueError(f'{stem}: the papers\' numbers changed and only rounded measurements are known; '
                         'count the config again')
    printed = row['printed']
    return (cells[0], printed['d_params'] if _is_delta(cells[1]) else cells[1],
            cells[2], printed['d_flops'] if _is_delta(cells[3]) else cells[3])


def markdown_table(rows, header_note: str = '') -> str:
    """Model-zoo markdown: one table per family, then the hidden block of unrounded measurements."""
    out = ['# Model zoo: parameters and FLOPs', '',
           '<!-- generated by tools/analysis/complexity.py; do not edit by hand -->', '',
           header_note,
           '',
           'Counter: `fvcore.nn.FlopCountAnalysis`, **1 multiply-add = 1 FLOP** (the papers\' convention) for '
           'convolutions, linear layers, matmul/bmm/einsum, attention (`scaled_dot_product_attention`: '
           '`q k^T` and `attn v`) and the gating units\' token mixing (`baddbmm`); fvcore\'s default handlers '
           'add small per-element counts for norms, adaptive pooling and up-sampling; element-wise add/mul '
           '(the gating product included), softmax and activations are not counted. Inputs and counted parts: '
           'classification 224x224, whole model; segmentation 512x512, backbone+neck+heads; detection '
           '800x1280, **backbone+neck only** (the papers\' detector FLOPs include the RPN/RoI heads, so ours '
           'are lower by design there); video 16x224x224 (24 frames for 24x4x1 configs), backbone+head. '
           'Params: whole model as built from the config. "Paper" columns are the papers\' tables '
           '(**reported**, not measured here); "d" is ours relative to the paper.', '']
    fam = {}
    for r in sorted(rows, key=lambda r: (osp.dirname(r['config']), osp.basename(r['config']))):
        fam.setdefault(config_folder(r['config']), []).append(r)
    measured = []
    for f, rs in fam.items():
        out += [f'## {f}', '',
                '| config | params (M) | GFLOPs | input | counted | paper params (M) | d params | '
                'paper GFLOPs | d FLOPs | paper source | note |',
                '|---|---|---|---|---|---|---|---|---|---|---|']
        for r in rs:
            stem = osp.splitext(osp.basename(r['config']))[0]
            if r.get('printed') is not None:  # read back without unrounded measurements: keep its printed "d"
                cells = _kept_cells(r)
            else:
                cells = paper_cells(r)
                if r['params_m'] is not None:
                    measured.append(f"{stem} {r['params_m']!r} "
                                    f"{'n/a' if r['gflops'] is None else repr(r['gflops'])}")
            out.append('| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |'.format(
                stem, _fmt(r['params_m']), _fmt(r['gflops']), r.get('input') or 'n/a', r.get('counted') or 'n/a',
                *cells, (r.get('reported') or {}).get('source', ''), r.get('note', '').replace('|', '/')))
        out.append('')
    if measured:
        out += [MEASUREMENTS_BEGIN] + measured + [MEASUREMENTS_END]
    return '\n'.join(out) + '\n'
