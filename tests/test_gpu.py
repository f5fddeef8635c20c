"""On a CUDA GPU (marker ``gpu``; skipped without CUDA, so ``make test`` and CI stay CPU-only).

Run on a GPU machine with ``pytest tests/test_gpu.py -m gpu``. Every backbone family is checked:

* **fp32 on CUDA = CPU fp64 reference**: TF32 off, forward (eval and train mode) and every parameter
  gradient within 1e-4 relative (``‖cuda - ref‖ / ‖ref‖`` per tensor).
* **AMP** (autocast fp16 with a dynamic loss scale as GradScaler's: start at 2**16, halve while any
  gradient is not finite; bf16 unscaled): outputs and gradients finite and within :data:`AMP_TOL` of
  the fp64 reference (gradients per tensor, relative to ``max(‖ref‖, AMP_FLOOR * rms)``).
* **init_weights on CUDA** (mmengine's Runner initialises after moving the model to the GPU).
* **channels_last** (channels_last_3d for clips) models and inputs give the contiguous results.
* **torch.compile** (inductor) forward and backward equal eager; ``fullgraph=True`` where the family
  traces as one graph on CPU too (tests/test_compile.py for PosMLP).
* **with_cp** (gradient checkpointing) gives the gradients of the plain model.
* **Tools**: ``tools/dist_train.sh`` with NCCL at world size 1 and ``tools/train.py --amp`` toy
  trainings per task (classifier, Mask R-CNN, Semantic FPN, Recognizer3D): losses fall and a
  checkpoint resumes.

Measured errors are written to the JSON file named by ``MMPOSMLP_GPU_REPORT`` when it is set
(docs/benchmarks.md quotes them).
"""
import copy
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason='needs a CUDA GPU (marker gpu)')]

FP32_TOL = 1e-4
#: dtype -> (output tolerance, gradient tolerance), relative to the fp64 reference, per tensor (norms)
AMP_TOL = {'fp16': (1e-2, 1e-1), 'bf16': (5e-2, 1.5e-1)}
FP16_INIT_SCALE = 2.0 ** 16  # GradScaler's default initial scale
VANISHING = 1e-6
AMP_FLOOR = 0.1

# ----------------------------------------------------------------------------- models
POSMLP_TINY = dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 2, 1], groups=[2, 4, 8, 16],
                   mlp_ratios=[4, 4, 4, 2], window_sizes=[7, 7, 7, 7])
VIDEO_TINY = dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2, groups=[2, 2, 4, 4],
                  window_sizes=[(4, 4, 4), (4, 4, 4), (4, 2, 2), (4, 2, 2)])
WAVE_TINY = dict(depths=[1, 1, 2, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[2, 2, 2, 2])
PVT_TINY = dict(depths=[1, 1, 2, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                mlp_ratios=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1])
CPVT_TINY = dict(embed_dims=32, num_layers=3, num_heads=2, feedforward_channels=64)
IMLP_FFN = dict(type='mmposmlp.IMLP', kernel_size=3)
IMLP_HOSTS = {
    'SwinTransformerIMLP': dict(arch=dict(embed_dims=16, depths=[2, 1], num_heads=[1, 2]), img_size=64,
                                window_size=4, out_indices=(0, 1), drop_path_rate=0.),
    'VisionTransformerIMLP': dict(arch=dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=64),
                                  img_size=32, patch_size=8, out_type='avg_featmap'),
    'PoolFormerIMLP': dict(arch=dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[4, 4, 4, 4],
                                     layer_scale_init_value=1e-5), out_indices=(0, 2, 4, 6)),
    'DetSwinTransformerIMLP': dict(embed_dims=16, depths=[2, 1], num_heads=[1, 2], strides=(4, 2),
                                   out_indices=(0, 1), window_size=4, drop_path_rate=0.),
    'SegSwinTransformerIMLP': dict(embed_dims=16, depths=[2, 1], num_heads=[1, 2], strides=(4, 2),
                                   out_indices=(0, 1), window_size=4, drop_path_rate=0.),
}
IMAGE = (2, 3, 100, 112)  # PosMLP: 25x28 tokens -> padded windows at every stage
CLIP = (2, 3, 6, 40, 40)  # 6 frames < 2 windows of 4: padded + masked in time and space


def _build(kind, **kw):
    from mmengine.registry import DefaultScope

    from mmposmlp.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmposmlp'):
        return MODELS.build(dict(type=f'mmposmlp.{kind}', **kw))


def _posmlp(gate_type, shift=True, **kw):
    return _build('PosMLP', arch=dict(POSMLP_TINY), gate_type=gate_type, shift=shift, out_indices=(0, 1, 2, 3),
                  drop_path_rate=0., **kw)


def _video(block_type, **kw):
    return _build('PosMLPVideo', arch=dict(VIDEO_TINY), block_type=block_type, out_indices=(0, 1, 2, 3),
                  drop_path_rate=0., **kw)


def _cases():
    from mmposmlp.models.backbones.posmlp_video import BLOCK_TYPES
    from mmposmlp.models.layers.gating import GATE_TYPES
    from mmposmlp.models.layers.patm import PHASE_MODES
    cases = {f'posmlp-{g}-shifted-padded': (lambda g=g, **kw: _posmlp(g, **kw), IMAGE) for g in GATE_TYPES}
    cases['posmlp-ggqpe-unshifted-unpadded'] = (lambda **kw: _posmlp('ggqpe', shift=False, **kw), (2, 3, 112, 112))
    cases.update({f'posmlp-video-{b}': (lambda b=b, **kw: _video(b, **kw), CLIP) for b in BLOCK_TYPES})
    cases.update({f'wavemlp-{p}': (lambda p=p, **kw: _build('WaveMLP', arch=dict(WAVE_TINY, phase_mode=p),
                                                             out_indices=(0, 1, 2, 3), **kw), (2, 3, 64, 64))
                  for p in PHASE_MODES})
    cases['pvt-peg'] = (lambda **kw: _build('PVTPEG', arch=dict(PVT_TINY), out_indices=(0, 1, 2, 3), **kw),
                        (2, 3, 64, 64))
    cases['cpvt'] = (lambda **kw: _build('CPVT', arch=dict(CPVT_TINY), img_size=64, patch_size=8,
                                         peg_positions=(0, 1), out_type='avg_featmap', **kw), (2, 3, 64, 80))
    cases['imlp-pvt-peg'] = (lambda **kw: _build('PVTPEG', arch=dict(PVT_TINY), out_indices=(0, 1, 2, 3),
                                                 ffn_cfg=IMLP_FFN, **kw), (2, 3, 64, 64))
    cases['imlp-cpvt'] = (lambda **kw: _build('CPVT', arch=dict(CPVT_TINY), img_size=64, patch_size=8,
                                              peg_positions=(0, 1), out_type='avg_featmap', ffn_cfg=IMLP_FFN,
                                              **kw), (2, 3, 64, 80))
    for host, kw0 in IMLP_HOSTS.items():
        shape = (2, 3, 32, 48) if host == 'VisionTransformerIMLP' else (2, 3, 64, 64)
        cases[f'imlp-{host}'] = (lambda host=host, kw0=kw0, **kw: _build(host, ffn_cfg=IMLP_FFN, **kw0, **kw),
                                 shape)
    return cases


try:
    CASES = _cases()
except ImportError:  # mmposmlp's models cannot import here: nothing to parametrize over
    CASES = {}

#: one model per family for the slower checks (torch.compile, with_cp), with fullgraph where CPU traces it
FAMILIES = {'posmlp-ggqpe-shifted-padded': True, 'posmlp-video-PoTGU+PoSGU': False, 'wavemlp-fc': False,
            'pvt-peg': False, 'cpvt': False, 'imlp-SwinTransformerIMLP': False}


def make_model(name, seed=0, **kw):
    """The tiny model ``name`` with perturbed parameters (no zero biases or identity mixings)."""
    factory, shape = CASES[name]
    torch.manual_seed(seed)
    model = factory(**kw)
    if hasattr(model, 'init_weights'):
        model.init_weights()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)
    return model, shape


def _outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    flat = []
    for o in out:
        flat.extend(_outputs(o))
    return flat


def _loss(outs, weights):
    """sum_i mean(out_i * w_i): fixed random projections of every output."""
    dtype = torch.float64 if outs[0].dtype == torch.float64 else torch.float32
    return sum((o.to(dtype) * w.to(o.device, dtype)).mean() for o, w in zip(outs, weights))


def run_model(model, x, weights, train=True, autocast=None, loss_scale=1.0):
    """(outputs as float64 CPU tensors, {name: grad as float64 CPU}) of one forward(+backward)."""
    model.train(train)
    model.zero_grad(set_to_none=True)
    ctx = torch.autocast('cuda', dtype=autocast) if autocast is not None else _null()
    if not train:
        with torch.no_grad(), ctx:
            outs = _outputs(model(x))
        return [o.detach().double().cpu() for o in outs], {}
    with ctx:
        outs = _outputs(model(x))
    (_loss(outs, weights) * loss_scale).backward()
    grads = {n: (p.grad.double().cpu() / loss_scale if p.grad is not None else None)
             for n, p in model.named_parameters()}
    return [o.detach().double().cpu() for o in outs], grads


def run_fp16_scaled(model, x, weights):
    """A training step under fp16 autocast with GradScaler's dynamic scale: start at 2**16 and halve
    while any gradient is inf/nan. Returns (outputs, grads, scale used)."""
    scale = FP16_INIT_SCALE
    while True:
        outs, grads = run_model(model, x, weights, autocast=torch.float16, loss_scale=scale)
        if all(g is None or torch.isfinite(g).all() for g in grads.values()) or scale < 1:
            return outs, grads, scale
        scale /= 2


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def rel_err(a, ref, floor=0.0):
    den = max(float(ref.norm()), floor)
    return float((a - ref).norm() / den) if den > 0 else float((a - ref).norm())


def compare(outs, grads, ref_outs, ref_grads, floor=0.0):
    """Largest relative error over the outputs and over the gradients; asserts matching structure.

    A gradient's error is relative to its reference norm; gradients that vanish analytically (a
    conv bias before a train-mode BatchNorm: reference norm under ``VANISHING * rms``, ``rms`` the
    root mean square of the reference gradient norms over all tensors) are judged against ``rms``,
    not against their rounding noise. ``floor`` (AMP): every gradient's error is relative to at least
    ``floor * rms`` (small gradients are judged on the scale of the typical one).
    """
    assert len(outs) == len(ref_outs)
    assert [o.shape for o in outs] == [o.shape for o in ref_outs]
    e_out = max(rel_err(a, b) for a, b in zip(outs, ref_outs))
    assert grads.keys() == ref_grads.keys()
    norms = [float(r.norm()) ** 2 for r in ref_grads.values() if r is not None]
    rms = (sum(norms) / max(len(norms), 1)) ** 0.5
    e_grad, worst = 0.0, None
    for n, g in grads.items():
        r = ref_grads[n]
        assert (g is None) == (r is None), n
        if g is None:
            continue
        assert torch.isfinite(g).all(), f'non-finite gradient of {n}'
        e = rel_err(g, r, rms if float(r.norm()) < VANISHING * rms else floor * rms)
        if e > e_grad:
            e_grad, worst = e, n
    return e_out, e_grad, worst


_REPORT = {}


def record(key, **values):
    path = os.environ.get('MMPOSMLP_GPU_REPORT')
    if not path:
        return
    _REPORT[key] = values
    with open(path, 'w') as f:
        json.dump(_REPORT, f, indent=1, sort_keys=True)


@pytest.fixture(autouse=True)
def _no_tf32():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


_REF_CACHE = {}


def reference(name):
    """CPU float64 outputs (eval and train mode) and train-mode gradients of ``name``; cached."""
    if name not in _REF_CACHE:
        model, shape = make_model(name)
        g = torch.Generator().manual_seed(123)
        x = torch.randn(shape, generator=g)
        ref = copy.deepcopy(model).double()
        xd = x.double()
        eval_outs, _ = run_model(ref, xd, None, train=False)
        weights = [torch.randn(o.shape, generator=g) for o in eval_outs]
        train_outs, train_grads = run_model(ref, xd, weights, train=True)
        _REF_CACHE[name] = (model, x, weights, eval_outs, train_outs, train_grads)
    model, x, weights, eval_outs, train_outs, train_grads = _REF_CACHE[name]
    return copy.deepcopy(model), x.clone(), weights, eval_outs, train_outs, train_grads


# ----------------------------------------------------------------------------- numerics
@pytest.mark.parametrize('name', list(CASES))
def test_cuda_fp32_equals_cpu_fp64(name):
    model, x, weights, eval_ref, train_ref, grad_ref = reference(name)
    model, x = model.cuda(), x.cuda()
    eval_outs, _ = run_model(model, x, weights, train=False)
    e_eval = max(rel_err(a, b) for a, b in zip(eval_outs, eval_ref))
    outs, grads = run_model(model, x, weights, train=True)
    e_out, e_grad, worst = compare(outs, grads, train_ref, grad_ref)
    record(f'fp32/{name}', eval_out=e_eval, train_out=e_out, grad=e_grad, worst_grad=worst)
    assert e_eval < FP32_TOL, f'eval output rel. error {e_eval:.2e}'
    assert e_out < FP32_TOL, f'train output rel. error {e_out:.2e}'
    assert e_grad < FP32_TOL, f'gradient of {worst}: rel. error {e_grad:.2e}'


@pytest.mark.parametrize('dtype', ['fp16', 'bf16'])
@pytest.mark.parametrize('name', list(CASES))
def test_amp_finite_and_close(name, dtype):
    model, x, weights, eval_ref, train_ref, grad_ref = reference(name)
    model, x = model.cuda(), x.cuda()
    ac = torch.float16 if dtype == 'fp16' else torch.bfloat16
    eval_outs, _ = run_model(model, x, weights, train=False, autocast=ac)
    if dtype == 'fp16':
        outs, grads, scale = run_fp16_scaled(model, x, weights)
    else:
        (outs, grads), scale = run_model(model, x, weights, train=True, autocast=ac), 1.0
    for o in eval_outs + outs:
        assert torch.isfinite(o).all(), 'non-finite output'
    e_eval = max(rel_err(a, b) for a, b in zip(eval_outs, eval_ref))
    e_out, e_grad, worst = compare(outs, grads, train_ref, grad_ref, AMP_FLOOR)
    record(f'{dtype}/{name}', eval_out=e_eval, train_out=e_out, grad=e_grad, worst_grad=worst, loss_scale=scale)
    tol_out, tol_grad = AMP_TOL[dtype]
    assert max(e_eval, e_out) < tol_out, f'{dtype} output rel. error {max(e_eval, e_out):.2e}'
    assert e_grad < tol_grad, f'{dtype} gradient of {worst}: rel. error {e_grad:.2e}'


@pytest.mark.parametrize('dtype', ['fp16', 'bf16'])
def test_amp_full_size_posmlp_t(dtype):
    """The full PosMLP-T at 224 (GQPE Gaussian logits, LayerNorms, 56x56 tokens) under AMP: finite,
    close to fp32 (TF32 off) on the same GPU."""
    torch.manual_seed(0)
    model = _build('PosMLP', arch='tiny', drop_path_rate=0., out_indices=(0, 1, 2, 3)).cuda()
    model.init_weights()
    x = torch.randn(4, 3, 224, 224, device='cuda')
    weights = [torch.randn(4, c, 224 // s, 224 // s) for c, s in zip(model.out_channels, (4, 8, 16, 32))]
    ref_outs, ref_grads = run_model(model, x, weights)
    if dtype == 'fp16':
        outs, grads, scale = run_fp16_scaled(model, x, weights)
    else:
        (outs, grads), scale = run_model(model, x, weights, autocast=torch.bfloat16), 1.0
    for o in outs:
        assert torch.isfinite(o).all()
    e_out, e_grad, worst = compare(outs, grads, ref_outs, ref_grads, AMP_FLOOR)
    record(f'{dtype}/posmlp-t-224', train_out=e_out, grad=e_grad, worst_grad=worst, loss_scale=scale)
    tol_out, tol_grad = AMP_TOL[dtype]
    assert e_out < tol_out and e_grad < tol_grad, (e_out, e_grad, worst)


@pytest.mark.parametrize('name', list(CASES))
def test_channels_last(name):
    """channels_last (3d for clips) weights and inputs on CUDA: the fp64 reference at fp32 accuracy."""
    model, x, weights, eval_ref, train_ref, grad_ref = reference(name)
    fmt = torch.channels_last_3d if x.dim() == 5 else torch.channels_last
    model, x = model.cuda().to(memory_format=fmt), x.cuda().contiguous(memory_format=fmt)
    eval_outs, _ = run_model(model, x, weights, train=False)
    e_eval = max(rel_err(a, b) for a, b in zip(eval_outs, eval_ref))
    outs, grads = run_model(model, x, weights)
    e_out, e_grad, worst = compare(outs, grads, train_ref, grad_ref)
    record(f'channels_last/{name}', eval_out=e_eval, train_out=e_out, grad=e_grad, worst_grad=worst)
    assert max(e_eval, e_out) < FP32_TOL and e_grad < FP32_TOL, (e_eval, e_out, e_grad, worst)


@pytest.mark.parametrize('name', list(CASES))
def test_init_weights_on_cuda(name):
    """mmengine's Runner calls init_weights after moving the model to the GPU."""
    factory, _ = CASES[name]
    torch.manual_seed(0)
    model = factory().cuda()
    model.init_weights()
    for n, p in model.named_parameters():
        assert p.is_cuda and torch.isfinite(p).all(), n


@pytest.mark.parametrize('name', list(FAMILIES))
def test_torch_compile_equals_eager(name):
    """Compiled eval outputs, train outputs and gradients against the CPU fp64 reference (the criterion
    of the fp32 test: a gradient that vanishes analytically, e.g. a conv bias before a train-mode
    BatchNorm, is rounding noise in fp32 eager and compiled alike and is judged against the typical
    gradient)."""
    model, x, weights, eval_ref, train_ref, grad_ref = reference(name)
    model, x = model.cuda(), x.cuda()
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=FAMILIES[name])
    # eval before train: a training step moves BatchNorm running statistics that eval mode uses
    eval_outs, _ = run_model(compiled, x, weights, train=False)
    outs, grads = run_model(compiled, x, weights)
    grads = {n.replace('_orig_mod.', ''): g for n, g in grads.items()}
    e_eval = max(rel_err(a, b) for a, b in zip(eval_outs, eval_ref))
    e_out, e_grad, worst = compare(outs, grads, train_ref, grad_ref)
    record(f'compile/{name}', fullgraph=FAMILIES[name], eval_out=e_eval, train_out=e_out, grad=e_grad)
    assert max(e_eval, e_out) < FP32_TOL and e_grad < FP32_TOL, (e_eval, e_out, e_grad, worst)


@pytest.mark.parametrize('name', list(FAMILIES))
def test_with_cp_same_gradients(name):
    plain, shape = make_model(name)
    cp, _ = make_model(name, with_cp=True)
    cp.load_state_dict(plain.state_dict())
    x = torch.randn(shape, device='cuda')
    plain, cp = plain.cuda(), cp.cuda()
    weights = [torch.randn(o.shape) for o in run_model(plain, x, None, train=False)[0]]
    ref_outs, ref_grads = run_model(plain, x, weights)
    outs, grads = run_model(cp, x, weights)
    e_out, e_grad, worst = compare(outs, grads, ref_outs, ref_grads)
    record(f'with_cp/{name}', train_out=e_out, grad=e_grad)
    assert e_out < 1e-6 and e_grad < 1e-6, (e_out, e_grad, worst)


# ----------------------------------------------------------------------------- tools
ITERS = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={iters}, val_interval=100000)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False, begin=0, end={iters})]
default_hooks = dict(checkpoint=dict(by_epoch=False, interval={ckpt}), logger=dict(interval=1))
log_processor = dict(by_epoch=False)
val_cfg = None
val_dataloader = None
val_evaluator = None
"""
VIDEO = """
_base_ = '{root}/configs/posmlp_video/posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'
model = dict(backbone=dict(_delete_=True, type='mmposmlp.PosMLPVideo', drop_path_rate=0.0,
                           arch=dict(embed_dims=[16, 32, 48, 64], depths=[1, 1, 1, 1], mlp_ratio=2,
                                     groups=[2, 4, 4, 8],
                                     window_sizes=[(8, 4, 4), (8, 4, 4), (8, 2, 2), (8, 2, 2)])),
             cls_head=dict(in_channels=64, num_classes=4, label_smooth_eps=0.),
             data_preprocessor=dict(blending=None))
pipe = [dict(type='OpenCVInit'), dict(type='SampleFrames', clip_len=8, frame_interval=2, num_clips=1),
        dict(type='OpenCVDecode'), dict(type='Resize', scale=(64, 64), keep_ratio=False),
        dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
                        dataset=dict(ann_file='data/toy/kinetics400/kinetics400_train_list_videos.txt',
                                     data_prefix=dict(video='data/toy/kinetics400/videos_train'), pipeline=pipe))
optim_wrapper = dict(optimizer=dict(lr=2e-3, weight_decay=0.0))
"""
# the toy ImageNet folders through CustomDataset (replacing, not merging into, the base ImageNet dataset)
CLASSIFIER = """
_base_ = '{root}/configs/posmlp/toy/posmlp-t_toy-in1k.py'
train_dataloader = dict(batch_size=8, dataset=dict(
    _delete_=True, type='CustomDataset', data_root='data/toy/imagenet', data_prefix='train', ann_file='',
    with_label=True, pipeline=[dict(type='LoadImageFromFile'),
                               dict(type='RandomResizedCrop', scale=64, backend='pillow', interpolation='bicubic'),
                               dict(type='PackInputs')]))
test_dataloader = None
test_cfg = None
test_evaluator = None
"""
TOY_TASKS = {
    'classifier': CLASSIFIER,
    'mask-rcnn': "_base_ = '{root}/configs/posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py'\n",
    'semantic-fpn': "_base_ = '{root}/configs/posmlp/toy/fpn_posmlp-t_toy-ade20k.py'\n",
    'recognizer3d': VIDEO,
}
TRAIN_LINE = re.compile(r'Iter\(train\)\s*\[\s*(\d+)/\d+\].*?\sloss: ([\d.]+)')


@pytest.fixture
def toy_cwd(tmp_path, request):
    """A working directory whose data/toy is the toy data (the toy configs use data/toy/...): the folder
    named by ``MMPOSMLP_TOY_DATA`` (written by tools/misc/make_toy_datasets.py, e.g. on a machine with
    PyAV when the GPU machine has none), else generated here (conftest's ``toy_data``)."""
    root = os.environ.get('MMPOSMLP_TOY_DATA') or request.getfixturevalue('toy_data')
    os.makedirs(tmp_path / 'data')
    os.symlink(os.path.abspath(root), tmp_path / 'data' / 'toy')
    return tmp_path


def _tool(args, cwd, timeout=900):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''),
               PYTHON=sys.executable)
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    return log


def _losses(log):
    return {int(i): float(v) for i, v in TRAIN_LINE.findall(log)}


@pytest.mark.parametrize('task', list(TOY_TASKS))
def test_toy_training_amp_losses_fall_and_resume(task, toy_cwd):
    iters, half = 40, 20
    cfg = toy_cwd / f'{task}.py'
    cfg.write_text(textwrap.dedent(TOY_TASKS[task]).format(root=ROOT) + ITERS.format(iters=iters, ckpt=half))
    train = [sys.executable, os.path.join(ROOT, 'tools', 'train.py'), str(cfg), '--amp']
    log = _tool(train + ['--work-dir', str(toy_cwd / 'a')], toy_cwd)
    assert 'AmpOptimWrapper' in log or 'loss_scale' in log, log[-3000:]
    losses = _losses(log)
    assert sorted(losses) == list(range(1, iters + 1)), sorted(losses)
    first = sum(losses[i] for i in range(1, 9)) / 8
    last = sum(losses[i] for i in range(iters - 7, iters + 1)) / 8
    ckpt = toy_cwd / 'a' / f'iter_{half}.pth'
    assert ckpt.is_file()
    log_b = _tool(train + ['--work-dir', str(toy_cwd / 'b'), '--resume', str(ckpt)], toy_cwd)
    resumed = _losses(log_b)
    record(f'toy/{task}', first8=first, last8=last, resumed_iters=sorted(resumed)[:1] + sorted(resumed)[-1:],
           loss_a_last=losses[iters], loss_b_last=resumed.get(iters))
    assert last < first, f'{task}: mean loss of the last 8 iterations {last:.4f} >= first 8 {first:.4f}'
    assert sorted(resumed) == list(range(half + 1, iters + 1)), sorted(resumed)
    assert (toy_cwd / 'b' / f'iter_{iters}.pth').is_file()


def test_dist_train_nccl_world_size_one(toy_cwd):
    cfg = toy_cwd / 'cls.py'
    cfg.write_text(TOY_TASKS['classifier'].format(root=ROOT) + ITERS.format(iters=4, ckpt=4))
    log = _tool(['bash', os.path.join(ROOT, 'tools', 'dist_train.sh'), str(cfg), '1', '--amp',
                 '--work-dir', str(toy_cwd / 'w')], toy_cwd)
    assert "'backend': 'nccl'" in log and 'Distributed launcher: pytorch' in log, log[-3000:]
    assert sorted(_losses(log)) == [1, 2, 3, 4]
    assert (toy_cwd / 'w' / 'iter_4.pth').is_file()


# ----------------------------------------------------------------------------- grouped convs
GROUPED_CONVS = {  # (in, out, kernel, stride, padding, groups, H=W): Wave-MLP token-FC, ConvPM, PEG shapes
    'wave-token-fc-small-map': (64, 32, (1, 7), 1, (0, 3), 32, 14),
    'wave-token-fc-large-map': (32, 16, (7, 1), 1, (3, 0), 16, 56),
    'posmlp-convpm': (24, 48, 3, 2, 1, 24, 28),
    'peg-depthwise': (32, 32, 3, 1, 1, 32, 28),
}


@pytest.mark.parametrize('channels_last', [False, True])
@pytest.mark.parametrize('case', list(GROUPED_CONVS))
def test_grouped_conv_weight_grad_methods_equal_fp64(case, channels_last):
    """Both weight-gradient methods GroupedConv2d chooses between, and the module itself (fp32 and fp16
    autocast), against the CPU fp64 gradients of nn.Conv2d."""
    import torch.nn as nn

    from mmposmlp.models.layers import grouped_conv as G
    cin, cout, k, s, p, g, hw = GROUPED_CONVS[case]
    torch.manual_seed(0)
    ref = nn.Conv2d(cin, cout, k, s, p, groups=g).double()
    x = torch.randn(4, cin, hw, hw, dtype=torch.float64, requires_grad=True)
    y = ref(x)
    gy = torch.randn_like(y)
    y.backward(gy)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    xc, gyc = (t.detach().float().cuda().contiguous(memory_format=fmt) for t in (x, gy))
    wc = ref.weight.detach().float().cuda()
    conv_args = (ref.stride, ref.padding, ref.dilation, g)
    for name, gw in (('cudnn', G._cudnn_weight_grad(gyc, xc, wc, *conv_args)),
                     ('tapwise', G.tapwise_weight_grad(gyc, xc, wc.shape, *conv_args))):
        assert rel_err(gw.cpu().double(), ref.weight.grad) < FP32_TOL, name
    ours = G.GroupedConv2d(cin, cout, k, s, p, groups=g).cuda()
    ours.load_state_dict(ref.state_dict())
    for autocast, tol in ((None, FP32_TOL), (torch.float16, AMP_TOL['fp16'][1])):
        xg = xc.clone().requires_grad_()
        with torch.autocast('cuda', dtype=autocast or torch.float32, enabled=autocast is not None):
            out = ours(xg)
        assert ours.picks_weight_grad_method(xg)
        out.backward(gyc.to(out.dtype))
        for got, want in ((xg.grad, x.grad), (ours.weight.grad, ref.weight.grad), (ours.bias.grad, ref.bias.grad)):
            err = rel_err(got.cpu().double(), want)
            assert got.dtype == torch.float32 and err < tol, (autocast, err)
        ours.zero_grad()
    assert any(key[4] == tuple(ref.weight.shape) for key in G.WEIGHT_GRAD_CHOICE)
    record(f'grouped_conv/{case}/cl={channels_last}',
           choice=[v for key, v in G.WEIGHT_GRAD_CHOICE.items() if key[4] == tuple(ref.weight.shape)])


def test_rng_state_restores_from_a_checkpoint_loaded_onto_the_gpu(tmp_path):
    """Runner.resume loads checkpoints onto the training device: the saved RNG states come back as CUDA
    tensors and must still restore (the generators take CPU byte tensors)."""
    from mmposmlp.engine.resume_state import capture_rng_state, restore_rng_state
    torch.cuda.init()
    state = capture_rng_state()
    expected = (torch.rand(3), torch.rand(3, device='cuda'))
    torch.save(state, tmp_path / 'rng.pth')
    loaded = torch.load(tmp_path / 'rng.pth', map_location='cuda', weights_only=True)
    assert loaded['torch'].is_cuda
    restore_rng_state(loaded)
    got = (torch.rand(3), torch.rand(3, device='cuda'))
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
