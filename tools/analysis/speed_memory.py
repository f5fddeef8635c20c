"""Throughput and peak-memory benchmarking of mmposmlp models (logic behind tools/analysis/benchmark.py).

Measurement protocol
--------------------
* **Candidates** are built from configs (:func:`mmposmlp.testing.build_model_from_cfg`), from presets
  (``mmdet-swin-t``: mmdet's ``SwinTransformer`` with the Swin-T arch; ``mmaction-swin3d-t``:
  mmaction2's ``SwinTransformer3D`` tiny, Video Swin-T) or from the authors'
  official code (``reference:<family>``, see :func:`build_reference`).
* **Timing** runs all candidates in the *same* process, round-robin: every round calls each candidate
  once, the order rotating from round to round so that no candidate always runs first (thermal /
  frequency / cache drift hits everybody alike). Each candidate gets ``warmup`` untimed calls first.
  Reported: the median step time, images (or clips) per second = batch / median, and the ratio of
  the first candidate's throughput to each other's, all from this one run.
* **Peak memory**: on CUDA ``torch.cuda.max_memory_allocated`` during a second step (the first
  builds lazy caches and library workspaces) minus the memory allocated before it. On CPU each
  candidate is rebuilt in a fresh subprocess; the value is the peak resident set size during one
  step (``VmHWM``, reset through ``/proc/self/clear_refs`` just before the step; ``ru_maxrss``
  where that is not possible) minus the resident size just before it, i.e. the extra memory the
  step needs on top of the resident model and inputs (glibc keeps freed pages, which is why a
  fresh process is used).
* **Training step** = forward + loss + backward (no optimizer): backbone-only sums the means of the
  outputs; whole models use their own ``mode='loss'`` with random ground truth.
"""
import gc
import importlib
import importlib.util
import json
import math
import os
import os.path as osp
import resource
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn as nn

@dataclass(frozen=True)
class Preset:
    """A comparison candidate by name: a ``backbone`` (a registry cfg built in ``scope``) or a
    whole ``model`` (an upstream config file, ``scope::path`` as mmengine resolves it)."""
    kind: str  # 'backbone' | 'model'
    scope: str
    cfg: Optional[dict] = None  # backbone presets
    config: Optional[str] = None  # whole-model presets
    describes: str = ''
    whole_model: Optional[str] = None  # backbone presets: the preset of a whole model around it


PRESETS = {
    'mmdet-swin-t': Preset('backbone', 'mmdet', cfg=dict(
        type='SwinTransformer', embed_dims=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window_size=7,
        out_indices=(0, 1, 2, 3), drop_path_rate=0.2), describes="mmdet's SwinTransformer, Swin-T arch",
        whole_model='mmdet-mask-rcnn-swin-t'),
    'mmaction-swin3d-t': Preset('backbone', 'mmaction', cfg=dict(
        type='SwinTransformer3D', arch='tiny', pretrained=None, pretrained2d=False, patch_size=(2, 4, 4),
        window_size=(8, 7, 7), drop_path_rate=0.1), describes="mmaction2's SwinTransformer3D, Video Swin-T",
        whole_model='mmaction-swin3d-t-k400'),
    'mmdet-mask-rcnn-swin-t': Preset('model', 'mmdet', config='mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py',
                                     describes="mmdet's Mask R-CNN Swin-T 1x config"),
    'mmaction-swin3d-t-k400': Preset(
        'model', 'mmaction',
        config='mmaction::recognition/swin/swin-tiny-p244-w877_in1k-pre_8xb8-amp-32x2x1-30e_kinetics400-rgb.py',
        describes="mmaction2's Video Swin-T Kinetics-400 config"),
}

#: our backbone type -> reference family (official code) usable with ``--reference-repo``
REFERENCE_FAMILIES = {'mmposmlp.PosMLP': 'posmlp', 'mmposmlp.WaveMLP': 'wavemlp', 'mmposmlp.PVTPEG': 'pcpvt'}


# ============================================================================ candidates
@dataclass
class Spec:
    """What to build; JSON-serialisable so that a memory subprocess can rebuild it."""
    source: str  # config path, preset name, or 'reference'
    name: str = ''
    backbone_only: bool = False
    with_cp: bool = False
    compile: bool = False
    reference_repo: Optional[str] = None  # for source == 'reference': the official checkout
    reference_cfg: Optional[str] = None  # the config whose architecture the reference mirrors

    def __post_init__(self):
        if not self.name:
            if self.source == 'reference':
                self.name = f'official({osp.basename(self.reference_cfg or "")})'
            else:
                self.name = osp.splitext(osp.basename(self.source))[0]
            if self.compile:
                self.name += '+compile'
            if self.with_cp:
                self.name += '+cp'


@dataclass
class Built:
    spec: Spec
    module: nn.Module  # what is called (the backbone for backbone-only, else the model)
    scope: Optional[str]  # mmdet/mmseg/mmpretrain/mmaction for whole models, None for plain modules
    is_backbone: bool
    extra: dict = field(default_factory=dict)

    @property
    def measured(self) -> str:
        """What a step of this candidate runs, e.g. ``MaskRCNN, whole model (mmdet)``."""
        name = self.extra.get('class') or type(self.module).__name__
        return f'{name}, backbone' if self.is_backbone else f'{name}, whole model ({self.scope})'


def measures_backbone(spec: Spec) -> bool:
    """Whether ``spec`` measures a backbone alone (``--backbone-only`` or a backbone preset)."""
    preset = PRESETS.get(spec.source)
    return spec.backbone_only or (preset is not None and preset.kind == 'backbone')


def check_comparable(specs: Sequence[Spec]) -> None:
    """Refuse, in one sentence, a comparison of a backbone alone with a whole model."""
    whole = [s for s in specs if not measures_backbone(s)]
    parts = [s for s in specs if measures_backbone(s)]
    if not whole or not parts:
        return
    preset = PRESETS.get(parts[0].source)
    if preset is not None:
        fix = ''
        if preset.whole_model:
            whole_preset = PRESETS[preset.whole_model]
            fix = f', or compare whole models with the preset {preset.whole_model!r} ({whole_preset.describes})'
        raise ValueError(f'{parts[0].source!r} is a backbone alone ({preset.describes}) but {whole[0].name!r} is '
                         f'measured as a whole model: add --backbone-only to compare backbones{fix}.')
    raise ValueError(f'{whole[0].name!r} is measured as a whole model and {parts[0].name!r} as a backbone alone: '
                     'measure both the same way (with or without --backbone-only).')


def _load_cfg(path, with_cp=False):
    from mmengine.config import Config
    if '::' in path:  # an upstream package's config (mmdet::..., mmaction::...)
        from mmengine.hub import get_config
        cfg = get_config(path)
    else:
        cfg = Config.fromfile(path)
    if with_cp:
        if 'backbone' not in cfg.model:
            raise ValueError(f'{path}: --with-cp needs a model with a backbone')
        cfg.model.backbone.with_cp = True
    return cfg


def build_candidate(spec: Spec) -> Built:
    """Build the module a :class:`Spec` describes (random weights)."""
    from mmposmlp.testing import build_model_from_cfg, model_registry
    if spec.source == 'reference':
        module = build_reference(spec.reference_cfg, spec.reference_repo, backbone_only=spec.backbone_only)
        built = Built(spec, module, None, spec.backbone_only)
    elif spec.source in PRESETS and PRESETS[spec.source].kind == 'backbone':
        preset = PRESETS[spec.source]
        from mmengine.registry import DefaultScope
        cfg = dict(preset.cfg, with_cp=spec.with_cp) if spec.with_cp else dict(preset.cfg)
        with DefaultScope.overwrite_default_scope(preset.scope):
            module = model_registry(preset.scope).build(cfg)
        module.init_weights()
        built = Built(spec, module, None, True)
    elif spec.source in PRESETS or osp.isfile(spec.source):
        path = PRESETS[spec.source].config if spec.source in PRESETS else spec.source
        model, scope = build_model_from_cfg(_load_cfg(path, spec.with_cp))
        if spec.backbone_only:
            built = Built(spec, model.backbone, None, True)
        else:
            built = Built(spec, model, scope, False)
    else:
        raise FileNotFoundError(f'{spec.source!r} is neither a config file nor a preset '
                                f'({sorted(PRESETS)}) nor "reference"')
    built.extra['class'] = type(built.module).__name__
    if spec.compile:
        if built.is_backbone:
            built.module = torch.compile(built.module, dynamic=False)
        else:  # compile the backbone inside the whole model (heads often have data-dependent code)
            built.module.backbone = torch.compile(built.module.backbone, dynamic=False)
    return built


# ============================================================================ official implementations
def _backbone_cfg(cfg_path):
    from mmengine.config import Config
    cfg = Config.fromfile(cfg_path)
    bb = cfg.model.get('backbone')
    if bb is None or bb.get('type') not in REFERENCE_FAMILIES:
        raise ValueError(f'{cfg_path}: --reference-repo supports configs whose backbone is one of '
                         f'{sorted(REFERENCE_FAMILIES)}; got {bb and bb.get("type")}')
    return cfg, bb, REFERENCE_FAMILIES[bb['type']]


def _import_file(name, path):
    if not osp.isfile(path):
        raise FileNotFoundError(f'official source {path} not found: pass the repository root of the '
                                'official checkout to --reference-repo')
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # timm's register_model looks the module up
    spec.loader.exec_module(mod)
    return mod


def _official_posmlp_module(repo):
    if not osp.isfile(osp.join(repo, 'models', 'posmlp.py')):
        raise FileNotFoundError(f'{repo}/models/posmlp.py not found: pass the root of a Zhicaiwww/PosMLP checkout')
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == 'models' or k.startswith('models.')}
    sys.path.insert(0, repo)
    try:
        return importlib.import_module('models.posmlp')
    finally:
        sys.path.remove(repo)
        for k in [k for k in sys.modules if k == 'models' or k.startswith('models.')]:
            sys.modules[f'_official_posmlp_{k}'] = sys.modules.pop(k)
        sys.modules.update(saved)


def build_reference(cfg_path: str, repo: str, backbone_only: bool = False, num_classes: Optional[int] = None):
    """The authors' official model with the architecture of ``cfg_path`` (random init).

    PosMLP: ``Zhicaiwww/PosMLP`` ``models/posmlp.py`` ``PosMLP``; Wave-MLP: huawei-noah
    ``Efficient-AI-Backbones`` ``wavemlp_pytorch/models/wavemlp.py`` ``WaveMLP_*``; PVT+PEG:
    ``Meituan-AutoML/Twins`` ``gvt.py`` ``pcpvt_*_v0``. ``backbone_only`` returns a wrapper that
    calls ``forward_features``.
    """
    cfg, bb, family = _backbone_cfg(cfg_path)
    head = cfg.model.get('head') or {}
    ncls = num_classes or head.get('num_classes', 1000)
    arch = bb.get('arch', 'tiny')
    if family == 'posmlp':
        from mmposmlp.models.backbones.posmlp import PosMLP
        s = PosMLP._parse_arch(arch)
        if bb.get('gate_type', 'ggqpe') != 'ggqpe' or bb.get('shift', False) or bb.get('window_sizes'):
            raise ValueError('the official PosMLP reference is only wired for the default GGQPE, '
                             'unshifted, default-window models')
        mod = _official_posmlp_module(repo)
        model = mod.PosMLP(embed_dims=tuple(s['embed_dims']), depths=tuple(s['depths']), gamma=tuple(s['groups']),
                           mlp_ratio=tuple(s['mlp_ratios']), win_size=tuple(s['window_sizes']),
                           num_levels=len(s['depths']), num_classes=ncls, drop_path_rate=0.)
    elif family == 'wavemlp':
        names = {'t-dw': 'WaveMLP_T_dw', 'tiny-dw': 'WaveMLP_T_dw', 't': 'WaveMLP_T', 'tiny': 'WaveMLP_T',
                 's': 'WaveMLP_S', 'small': 'WaveMLP_S', 'm': 'WaveMLP_M', 'medium': 'WaveMLP_M',
                 'b': 'WaveMLP_B', 'base': 'WaveMLP_B'}
        if not isinstance(arch, str) or arch.lower() not in names:
            raise ValueError(f'official Wave-MLP reference needs a named arch, got {arch!r}')
        mod = _import_file('_official_wavemlp', osp.join(repo, 'wavemlp_pytorch', 'models', 'wavemlp.py'))
        model = getattr(mod, names[arch.lower()])(num_classes=ncls)
    else:  # pcpvt
        names = {'s': 'pcpvt_small_v0', 'small': 'pcpvt_small_v0', 'b': 'pcpvt_base_v0', 'base': 'pcpvt_base_v0',
                 'l': 'pcpvt_large_v0', 'large': 'pcpvt_large_v0'}
        if not isinstance(arch, str) or arch.lower() not in names:
            raise ValueError(f'official PCPVT reference needs arch s/b/l, got {arch!r}')
        mod = _import_file('_official_twins_gvt', osp.join(repo, 'gvt.py'))
        model = getattr(mod, names[arch.lower()])(num_classes=ncls)
    model.eval()
    model._mmposmlp_family = family
    return _FeatureWrapper(model) if backbone_only else model


class _FeatureWrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.forward_features(x)


def convert_reference_to_ours(official: nn.Module, family: str) -> Dict[str, torch.Tensor]:
    """Official state dict -> keys of our mmpretrain ``ImageClassifier`` (backbone.* / head.fc.*)."""
    sd = official.state_dict()
    if family == 'posmlp':
        from mmposmlp.models.converters.posmlp import convert_official_posmlp
        conv = convert_official_posmlp(sd)
        return {('head.fc.' + k[5:]) if k.startswith('head.') else 'backbone.' + k: v for k, v in conv.items()}
    if family == 'wavemlp':
        from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp
        return convert_official_wavemlp(sd)
    from mmposmlp.models.converters.pvt_peg import convert_pcpvt, convert_pcpvt_head
    out = {'backbone.' + k: v for k, v in convert_pcpvt(sd).items()}
    out.update({'head.' + k: v for k, v in convert_pcpvt_head(sd).items()})
    return out


@torch.no_grad()
def check_reference_equal(ours: nn.Module, official: nn.Module, shape, tol: float = 1e-4, seed: int = 0) -> dict:
    """Load the official (random) weights into ours via the converter and compare logits."""
    family = official._mmposmlp_family
    state = convert_reference_to_ours(official, family)
    res = ours.load_state_dict(state, strict=False)
    missing = [k for k in res.missing_keys if not k.endswith('num_batches_tracked')]
    if missing or res.unexpected_keys:
        raise RuntimeError(f'converted official weights do not fit: missing {missing[:5]}, '
                           f'unexpected {res.unexpected_keys[:5]}')
    ours.eval()
    official.eval()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    a = ours(x, mode='tensor')
    b = official(x)
    diff = (a - b).abs().max().item()
    return dict(max_abs_diff=diff, logits_abs_max=b.abs().max().item(), tol=tol, equal=diff <= tol,
                shape=list(shape))


@torch.no_grad()
def randomize_(model: nn.Module, scale: float = 0.05, seed: int = 0) -> nn.Module:
    """Perturb every float parameter (and BN running stats) so that an equality check is not
    passed trivially by near-identity initialisations."""
    g = torch.Generator().manual_seed(seed)
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if not t.is_floating_point():
            continue
        if name.endswith('running_var'):
            t.copy_(1 + torch.rand(t.shape, generator=g))
        elif name.endswith(('rel_indices', 'relative_position_index')):
            continue
        else:
            t.add_(torch.randn(t.shape, generator=g) * scale)
    return model


# ============================================================================ steps
def _dummy_samples(model, scope, shape, with_gt):
    n, h, w = shape[0], shape[-2], shape[-1]
    if scope == 'mmpretrain':
        from mmpretrain.structures import DataSample
        num_classes = getattr(model.head, 'num_classes', 1000)
        return [DataSample().set_gt_label(int(i % num_classes)) for i in range(n)]
    if scope == 'mmaction':
        from mmaction.structures import ActionDataSample
        num_classes = getattr(model.cls_head, 'num_classes', 400)
        return [ActionDataSample().set_gt_label(int(i % num_classes)) for i in range(n)]
    if scope == 'mmseg':
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        out = []
        num_classes = model.decode_head.num_classes
        for _ in range(n):
            s = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w)))
            if with_gt:
                s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, h, w)))
            out.append(s)
        return out
    if scope == 'mmdet':
        import numpy as np
        from mmdet.structures import DetDataSample
        from mmdet.structures.mask import BitmapMasks
        from mmengine.structures import InstanceData
        out = []
        g = torch.Generator().manual_seed(0)
        for _ in range(n):
            s = DetDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), scale_factor=(1.0, 1.0),
                                            batch_input_shape=(h, w), pad_shape=(h, w)))
            if with_gt:
                k = 5
                xy = torch.rand(k, 2, generator=g) * torch.tensor([w * 0.6, h * 0.6])
                wh = (torch.rand(k, 2, generator=g) * 0.3 + 0.05) * torch.tensor([w, h])
                boxes = torch.cat([xy, xy + wh], 1)
                inst = InstanceData(bboxes=boxes, labels=torch.randint(0, 3, (k,), generator=g))
                if getattr(model, 'with_mask', False):
                    masks = np.zeros((k, h, w), dtype=np.uint8)
                    for i, (x0, y0, x1, y1) in enumerate(boxes.int().tolist()):
                        masks[i, y0:y1, x0:x1] = 1
                    inst.masks = BitmapMasks(masks, h, w)
                s.gt_instances = inst
            out.append(s)
        return out
    raise ValueError(f'unknown scope {scope!r}')


def make_step(built: Built, shape: Sequence[int], mode: str = 'infer', amp: Optional[str] = None,
              device: str = 'cpu', channels_last: bool = False) -> Callable[[], None]:
    """A zero-argument callable running one inference or training step on fixed random inputs.

    ``channels_last``: the module's weights and the input in channels_last (channels_last_3d for
    clips) memory format.
    """
    if mode not in ('infer', 'train'):
        raise ValueError(f'mode must be "infer" or "train", got {mode!r}')
    module = built.module.to(device)
    x = torch.randn(tuple(shape), device=device)
    if channels_last:
        fmt = torch.channels_last_3d if x.dim() == 5 else torch.channels_last
        module = module.to(memory_format=fmt)
        x = x.contiguous(memory_format=fmt)
    if built.scope == 'mmaction' and x.dim() == 5:
        x = x[:, None]  # (B, num_clips=1, C, T, H, W)
    if amp not in (None, 'fp32', 'bf16', 'fp16'):
        raise ValueError(f'amp must be fp32, bf16 or fp16, got {amp!r}')
    dev_type = 'cuda' if str(device).startswith('cuda') else 'cpu'
    dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(amp)
    autocast = (lambda: torch.autocast(dev_type, dtype=dtype)) if dtype else nullcontext
    samples = None
    if built.scope is not None and (mode == 'train' or built.scope == 'mmdet'):
        samples = _dummy_samples(module, built.scope, tuple(shape), with_gt=mode == 'train')
        samples = [s.to(device) for s in samples]  # as the data preprocessor would

    def forward():
        if built.scope is None:
            return module(x)
        if mode == 'train':
            return module(x, samples, mode='loss')
        if built.scope == 'mmdet':
            return module(x, samples, mode='predict')
        return module(x, mode='tensor')

    if mode == 'infer':
        module.eval()

        def step():
            # no_grad, as mmengine's val/test loops (inference_mode tensors cached by layers, e.g.
            # window masks, could not be reused by a later training step in the same process)
            with torch.no_grad(), autocast():
                forward()
    else:
        module.train()
        params = [p for p in module.parameters() if p.requires_grad]

        def loss():
            with autocast():
                out = forward()
                if built.scope is None:
                    outs = out if isinstance(out, (tuple, list)) else [out]
                    return sum(o.float().mean() for o in outs)
                return module.parse_losses(out)[0]

        def step():
            loss().backward()
            for p in params:
                p.grad = None

        step.loss = loss  # the forward half (module_profile.saved_bytes_by_module)
    return step


def _sync(device):
    if str(device).startswith('cuda'):
        torch.cuda.synchronize()


def time_alternating(steps: Dict[str, Callable[[], None]], iters: int = 5, warmup: int = 1,
                     device: str = 'cpu') -> Dict[str, List[float]]:
    """Round-robin timing; the starting candidate rotates every round. Returns seconds per call."""
    names = list(steps)
    for _ in range(warmup):
        for n in names:
            steps[n]()
    _sync(device)
    times = {n: [] for n in names}
    for r in range(iters):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            _sync(device)
            t0 = time.perf_counter()
            steps[n]()
            _sync(device)
            times[n].append(time.perf_counter() - t0)
    return times


def summarize(times: Dict[str, List[float]], batch: int) -> List[dict]:
    """Median step time, throughput and ratio (first candidate's throughput / this one's)."""
    rows = []
    first = None
    for name, ts in times.items():
        med = statistics.median(ts)
        thr = batch / med
        if first is None:
            first = thr
        rows.append(dict(name=name, median_s=med, min_s=min(ts), iters=len(ts), throughput=thr,
                         first_over_this=first / thr))
    return rows


def profile_step(step: Callable[[], None], device: str = 'cpu', warmup: int = 2, steps: int = 3,
                 row_limit: int = 30) -> str:
    """``torch.profiler`` summary of ``steps`` calls of ``step`` (after ``warmup``): operators sorted
    by device time (CUDA) or CPU time, as a text table."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        step()
    _sync(device)
    cuda = str(device).startswith('cuda')
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        _sync(device)
    key = 'cuda_time_total' if cuda else 'cpu_time_total'
    try:
        return prof.key_averages().table(sort_by=key, row_limit=row_limit)
    except (AttributeError, KeyError):  # newer torch names it device_time_total
        return prof.key_averages().table(sort_by='device_time_total' if cuda else key, row_limit=row_limit)


# ============================================================================ memory
def _rss_bytes():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _maxrss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process (Linux >= 4.0)."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def _hwm_bytes():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
    return _maxrss_bytes()


def measure_memory_inprocess(built: Built, shape, mode='infer', amp=None, device='cpu',
                             channels_last: bool = False) -> dict:
    """Peak extra memory of one step in *this* process (CUDA exact; CPU only valid in a fresh process)."""
    step = make_step(built, shape, mode, amp, device, channels_last)
    gc.collect()
    if str(device).startswith('cuda'):
        step()  # warm-up: lazily built caches and cuDNN/cuBLAS workspaces are not the step's peak
        torch.cuda.synchronize()
        gc.collect()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return dict(peak_mib=(torch.cuda.max_memory_allocated() - base) / 2**20,
                    method='torch.cuda.max_memory_allocated during the 2nd step - allocated before it')
    base = _rss_bytes()
    if _reset_peak_rss():  # peak of this step only (model building may have peaked higher)
        step()
        return dict(peak_mib=(_hwm_bytes() - base) / 2**20, method='VmHWM (reset before the step) - rss, fresh process')
    step()
    return dict(peak_mib=(_maxrss_bytes() - base) / 2**20, method='ru_maxrss - rss (fresh process)')


def measure_memory(spec: Spec, shape, mode='infer', amp=None, device='cpu', timeout=1800,
                   threads: Optional[int] = None, channels_last: bool = False) -> dict:
    """Peak memory of one step; on CPU in a fresh subprocess per candidate."""
    if str(device).startswith('cuda'):
        built = build_candidate(spec)
        try:
            return measure_memory_inprocess(built, shape, mode, amp, device, channels_last)
        finally:
            del built
            gc.collect()
            torch.cuda.empty_cache()
    payload = json.dumps(dict(spec=spec.__dict__, shape=list(shape), mode=mode, amp=amp,
                              threads=threads or torch.get_num_threads()))
    env = os.environ.copy()  # the child imports this very tool and mmposmlp (not another installed copy)
    root = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
    env['PYTHONPATH'] = os.pathsep.join([root] + ([env['PYTHONPATH']] if env.get('PYTHONPATH') else []))
    proc = subprocess.run([sys.executable, '-m', 'tools.analysis.speed_memory', '--memory-child', payload],
                          capture_output=True, text=True, timeout=timeout, env=env)
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith('MEMORY_RESULT '):
            return json.loads(line[len('MEMORY_RESULT '):])
    return dict(peak_mib=float('nan'), error=(proc.stderr or proc.stdout).strip().splitlines()[-1:])


def _memory_child(payload: str):
    d = json.loads(payload)
    if d.get('threads'):
        torch.set_num_threads(d['threads'])
    built = build_candidate(Spec(**d['spec']))
    res = measure_memory_inprocess(built, d['shape'], d['mode'], d['amp'], 'cpu')
    print('MEMORY_RESULT ' + json.dumps(res), flush=True)


# ============================================================================ scaling
def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) against log(x): y ~ x**k."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    if den == 0:
        raise ValueError('need at least two different sizes to fit an exponent')
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den


def plot_scaling(results: Dict[str, List[dict]], out_png: str, xlabel: str, title: str = ''):
    """results: name -> [dict(x=..., time_s=..., mem_mib=...)] ; log-log time and memory panels."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, pts in results.items():
        xs = [p['x'] for p in pts]
        k = fit_exponent(xs, [p['time_s'] for p in pts]) if len(pts) > 1 else float('nan')
        axes[0].plot(xs, [p['time_s'] for p in pts], 'o-', label=f'{name} (k={k:.2f})')
        mem = [p.get('mem_mib') for p in pts]
        if all(m is not None and m == m for m in mem):
            km = fit_exponent(xs, mem) if len(pts) > 1 else float('nan')
            axes[1].plot(xs, mem, 'o-', label=f'{name} (k={km:.2f})')
    for ax, yl in zip(axes, ('median time per image [s]', 'peak extra memory [MiB]')):
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel(xlabel)
        ax.set_ylabel(yl)
        ax.grid(True, which='both', alpha=.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def machine_description() -> dict:
    model = ''
    try:
        out = subprocess.run(['lscpu'], capture_output=True, text=True).stdout
        model = next((ln.split(':', 1)[1].strip() for ln in out.splitlines() if ln.startswith('Model name')), '')
    except OSError:
        pass
    return dict(cpu=model, cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                cuda=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)


if __name__ == '__main__':  # memory child entry point
    if len(sys.argv) == 3 and sys.argv[1] == '--memory-child':
        _memory_child(sys.argv[2])
    else:
        sys.exit('internal entry point; use tools/analysis/benchmark.py')
