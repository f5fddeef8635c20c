"""ConvPE stem: the recomputing training path equals the modules' path bit for bit, keeps less for
backward, and is left for the modules' path wherever it would not be exact."""
import copy

import pytest
import torch
import torch.nn as nn

from mmposmlp.models.backbones.posmlp import ConvPatchEmbed, PosMLP

BN = dict(type='BN', eps=1e-6)
C = 16  # embed dims; the 1/2-resolution maps have C // 2 channels


def _stem(norm_cfg=BN, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    stem = ConvPatchEmbed(3, C, norm_cfg, dict(type='GELU')).to(dtype).train()
    for m in stem.modules():  # non-trivial affine parameters and running statistics
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.5, 0.5)
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    return stem


#: which of the stem's norms run on their running statistics (eval mode, a detector's ``norm_eval``)
NORM_MODES = dict(batch=(), running=(0, 1, 2), mixed=(0, ))


def _modules_path(stem):
    """A copy of ``stem`` whose forward is the plain chain of its ConvModules."""
    ref = copy.deepcopy(stem)
    ref.forward = lambda x: nn.Sequential.forward(ref, x)
    return ref


def _image(dtype=torch.float64, shape=(2, 3, 37, 50)):
    return torch.randn(*shape, dtype=dtype).contiguous(memory_format=torch.channels_last)


def _recomputes(stem, x) -> bool:
    """Whether ``stem(x)``'s autograd graph holds the recomputing function."""
    seen, todo = set(), [stem(x).grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        todo += [f for f, _ in fn.next_functions]
    return any(type(fn).__name__ == 'NormActConvFunctionBackward' for fn in seen)


def _train_step(stem, x, grad):
    x = x.clone().requires_grad_()
    out = stem(x)
    out.backward(grad)
    return out.detach(), x.grad


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('momentum', [0.1, None])
@pytest.mark.parametrize('norms', list(NORM_MODES))
def test_training_steps_equal_modules_path(dtype, momentum, norms):
    """Output, input gradient, every parameter gradient and the running statistics after each of two
    training steps: bit-identical (the same kernels run on the same inputs)."""
    stem = _stem(dict(BN, momentum=momentum), dtype)
    for i in NORM_MODES[norms]:
        stem[i].bn.eval()
    ref = _modules_path(stem)
    x = _image(dtype)
    assert _recomputes(stem, x) and not _recomputes(ref, x)
    stem.load_state_dict(ref.state_dict())  # undo the statistics update of the probe above
    for step in range(2):
        grad = torch.randn(2, 10, 13, C, dtype=dtype).permute(0, 3, 1, 2)  # channels-last, as the stages send it
        (out, gx), (ref_out, ref_gx) = _train_step(stem, x, grad), _train_step(ref, x, grad)
        assert torch.equal(out, ref_out) and torch.equal(gx, ref_gx)
        for (name, p), q in zip(stem.named_parameters(), ref.parameters()):
            assert torch.equal(p.grad, q.grad), name
            p.grad = q.grad = None
        for (name, b), r in zip(stem.named_buffers(), ref.buffers()):
            assert torch.equal(b, r), (step, name)
    assert int(stem[1].bn.num_batches_tracked) == (0 if norms == 'running' else 3)  # one count per training forward


def test_state_dict_keys_unchanged():
    keys = list(_stem().state_dict())
    assert keys[:6] == ['0.conv.weight', '0.conv.bias', '0.bn.weight', '0.bn.bias', '0.bn.running_mean',
                        '0.bn.running_var'] and len(keys) == 21


def _kept_bytes(stem, x) -> int:
    """Bytes autograd keeps for backward (each storage once, parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in stem.parameters()}
    kept = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        stem(x)
    return sum(kept.values())


@pytest.mark.parametrize('norms', ['batch', 'running'])
def test_keeps_less_for_backward(norms):
    """Not kept: the first conv's output, both normed maps and both activations, and with batch
    statistics the two fused norms' running statistics (the image, the two 1/4-resolution conv
    outputs and the per-channel statistics still are)."""
    stem, x = _stem(), _image(shape=(1, 3, 64, 96))
    for i in NORM_MODES[norms]:
        stem[i].bn.eval()
    half, quarter = 8 * 32 * 48 * (C // 2), 8 * 16 * 24 * C  # fp64 bytes of a 1/2- and a 1/4-resolution map
    running_stats = 8 * 2 * (C // 2 + C) if norms == 'batch' else 0
    assert _kept_bytes(_modules_path(stem), x) - _kept_bytes(stem, x) == 3 * half + 2 * quarter + running_stats


def _configs():
    def requires_no_grad(stem):
        stem[1].bn.weight.requires_grad_(False)

    def hooked(stem):
        stem[0].activate.register_forward_hook(lambda *a: None)

    def fused_conv_bn_eval(stem):
        stem.eval()
        stem[0].turn_on_efficient_conv_bn_eval()

    return dict(frozen_norm=requires_no_grad, hook=hooked, relu=lambda s: s[1].__setattr__('activate', nn.ReLU()),
                fused_conv_bn_eval=fused_conv_bn_eval)


@pytest.mark.parametrize('change', list(_configs()))
def test_modules_path_where_recompute_does_not_apply(change):
    stem, x = _stem(), _image()
    _configs()[change](stem)
    ref = _modules_path(stem)
    assert not _recomputes(stem, x)
    grad = torch.randn(2, C, 10, 13, dtype=torch.float64)
    assert torch.equal(_train_step(stem, x, grad)[1], _train_step(ref, x, grad)[1])


def test_modules_path_without_autograd_or_for_other_norms():
    x = _image()
    with torch.no_grad():
        assert not _stem().eval()(x).requires_grad
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert not _recomputes(_stem(dtype=torch.float32), _image(torch.float32))
    assert not _recomputes(_stem(dict(type='LN', eps=1e-6)), x)
    sync = _stem(dict(type='SyncBN', eps=1e-6))
    assert isinstance(sync[0].bn, nn.SyncBatchNorm) and not sync._recomputing_training(x)


@pytest.mark.parametrize('norm_eval', [False, True])
def test_backbone_training_step_equals_modules_path(norm_eval):
    """A whole backbone's training step (``norm_eval``: the stem's BatchNorms on their running
    statistics, as in the detection configs)."""
    model = PosMLP(arch=dict(embed_dims=[16, 32], depths=[1, 1], groups=[2, 2], mlp_ratios=[2, 2], window_sizes=[7, 7]),
                   out_indices=(0, 1), norm_eval=norm_eval).double().train()
    assert model.patch_embed[0].bn.training is not norm_eval
    x = torch.randn(1, 3, 60, 76, dtype=torch.float64)
    assert _recomputes(model.patch_embed, x.contiguous(memory_format=torch.channels_last))
    ref = copy.deepcopy(model)
    ref.patch_embed.forward = lambda x: nn.Sequential.forward(ref.patch_embed, x)
    outs, ref_outs = model(x), ref(x)
    sum(o.square().sum() for o in outs).backward()
    sum(o.square().sum() for o in ref_outs).backward()
    assert all(torch.equal(o, r) for o, r in zip(outs, ref_outs))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert torch.equal(p.grad, q.grad), name
    for (name, b), r in zip(model.named_buffers(), ref.buffers()):
        assert torch.equal(b, r), name
