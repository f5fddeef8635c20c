"""Grouped / depthwise 2-D convolution with a tap-wise weight gradient on CUDA.

The token mixing of these models is carried by convolutions with few input channels per group:
Wave-MLP's token-FCs (``(1, K)`` / ``(K, 1)``, 2 channels per group, PATM Eq. 4-6), PosMLP's ConvPM
(3x3/s2, depthwise multiplier), the PEG (3x3 depthwise, CPVT Eq. 1) and IMLP's depthwise conv. For
some of these shapes cuDNN's weight-gradient kernels (``wgrad_alg0/alg1_engine``) are very slow:
with many groups on small maps (Wave-MLP-T stage 3: 21.6 ms against 1.9 ms on an H200, fp16) they
took up to 97% of a training step (docs/benchmarks.md); on large maps cuDNN is the faster one.
:class:`GroupedConv2d` keeps cuDNN for the forward pass and the input gradient, and for the weight
gradient times, once per shape (like ``cudnn.benchmark``), cuDNN against one multiply-and-reduce
per kernel tap,

    dW[o, i, kh, kw] = sum_{b, y, x} dY[b, o, y, x] * X_pad[b, g(o) ci + i, y s_h + kh d_h, x s_w + kw d_w],

(fp32 accumulation; fp64 for fp64 inputs) and uses the faster from then on. Parameters, state-dict
keys and results are those of ``nn.Conv2d``; on the CPU, in eval / no-grad, under
``torch.compile`` and for non-zero padding modes it *is* ``nn.Conv2d``.
"""
from typing import Dict, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F


def tapwise_weight_grad(grad_out: torch.Tensor, x: torch.Tensor, weight_shape: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                        groups: int) -> torch.Tensor:
    """The weight gradient of ``F.conv2d(x, w, None, stride, padding, dilation, groups)`` given
    ``grad_out``, one reduction per kernel tap (the formula in the module docstring), accumulated and
    returned in fp32 (fp64 for fp64 inputs)."""
    c_out, ci, kh_n, kw_n = weight_shape
    b, c_in, _, _ = x.shape
    _, _, h_out, w_out = grad_out.shape
    co = c_out // groups
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
    g6 = grad_out.reshape(b, groups, co, 1, h_out, w_out)
    acc = torch.promote_types(x.dtype, torch.float32)
    grad_w = torch.empty((c_out, ci, kh_n, kw_n), dtype=acc, device=x.device)
    for kh in range(kh_n):
        h0 = kh * dh
        for kw in range(kw_n):
            w0 = kw * dw
            xs = xp[:, :, h0:h0 + sh * (h_out - 1) + 1:sh, w0:w0 + sw * (w_out - 1) + 1:sw]
            prod = g6 * xs.reshape(b, groups, 1, ci, h_out, w_out)
            grad_w[:, :, kh, kw] = prod.sum(dim=(0, 4, 5), dtype=acc).reshape(c_out, ci)
    return grad_w


#: weight-gradient method per (shapes, layouts, dtype, conv arguments, device): 'cudnn' or 'tapwise'
WEIGHT_GRAD_CHOICE: Dict[tuple, str] = {}


def _cudnn_weight_grad(grad_out, x, weight, stride, padding, dilation, groups):
    return torch.ops.aten.convolution_backward(
        grad_out, x, weight.to(x.dtype), None, list(stride), list(padding), list(dilation), False, [0, 0],
        groups, [False, True, False])[1]


def _time_cuda(fn, repeats=2) -> float:
    fn()  # warm-up: cuDNN's algorithm choice, the caching allocator
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def weight_grad(grad_out, x, weight, stride, padding, dilation, groups) -> torch.Tensor:
    """The conv's weight gradient in ``weight``'s dtype, by the method :data:`WEIGHT_GRAD_CHOICE` holds for
    these shapes (timed on first use on CUDA; tap-wise elsewhere)."""
    methods = {
        'cudnn': lambda: _cudnn_weight_grad(grad_out, x, weight, stride, padding, dilation, groups),
        'tapwise': lambda: tapwise_weight_grad(grad_out, x, weight.shape, stride, padding, dilation, groups)}
    if not x.is_cuda:
        choice = 'tapwise'
    else:
        key = (tuple(x.shape), x.is_contiguous(), grad_out.is_contiguous(), x.dtype, tuple(weight.shape),
               tuple(stride), tuple(padding), tuple(dilation), groups, x.device.index)
        choice = WEIGHT_GRAD_CHOICE.get(key)
        if choice is None and torch.cuda.is_current_stream_capturing():
            choice = 'cudnn'  # no timing (it synchronises) inside a CUDA graph capture; nothing stored
        elif choice is None:
            timings = {name: _time_cuda(fn) for name, fn in methods.items()}
            choice = WEIGHT_GRAD_CHOICE[key] = min(timings, key=timings.get)
    return methods[choice]().to(weight.dtype)


class _TapwiseWeightGradConv2d(torch.autograd.Function):
    """``F.conv2d`` whose backward takes the input gradient from ATen (cuDNN) and the weight gradient
    from :func:`weight_grad`. The weight and bias are cast to the input's dtype inside, so their
    gradients come back in their own (fp32) dtype."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.conv = (tuple(stride), tuple(padding), tuple(dilation), groups)
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.save_for_backward(x, weight)
        w = weight.to(x.dtype)
        return F.conv2d(x, w, None if bias is None else bias.to(x.dtype), stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.conv
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.aten.convolution_backward(
                grad_out, x, weight.to(x.dtype), None, list(stride), list(padding), list(dilation), False,
                [0, 0], groups, [True, False, False])[0]
        if ctx.needs_input_grad[1]:
            grad_w = weight_grad(grad_out, x, weight, stride, padding, dilation, groups)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(dim=(0, 2, 3), dtype=torch.promote_types(grad_out.dtype, torch.float32)).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b, None, None, None, None


class GroupedConv2d(nn.Conv2d):
    """``nn.Conv2d`` for grouped / depthwise convs whose weight gradient on CUDA comes from the faster
    of cuDNN and a tap-wise reduction (see the module docstring); identical parameters, keys and
    results."""

    def picks_weight_grad_method(self, x: torch.Tensor) -> bool:
        return (x.is_cuda and torch.is_grad_enabled() and self.weight.requires_grad
                and self.padding_mode == 'zeros' and not isinstance(self.padding, str)
                and not torch.compiler.is_compiling())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.picks_weight_grad_method(x):
            return super().forward(x)
        dtype = torch.get_autocast_dtype('cuda') if torch.is_autocast_enabled('cuda') else x.dtype
        with torch.autocast('cuda', enabled=False):
            return _TapwiseWeightGradConv2d.apply(x.to(dtype), self.weight, self.bias, self.stride,
                                                  self.padding, self.dilation, self.groups)
