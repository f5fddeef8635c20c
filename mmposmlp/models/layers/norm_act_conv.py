"""``[conv_in ->] BatchNorm -> GELU -> conv_out`` as one autograd function that keeps only its input.

Autograd keeps, for such a chain, the norm's input, the normalised map, the activation (and, with
``conv_in``, its output): four full-size maps. :class:`NormActConvFunction` keeps only the chain's input;
backward recomputes the rest with the kernels the separate modules' forward ran (``convolution``,
``native_batch_norm``, ``gelu``) and calls the backward kernels autograd calls for them
(``convolution_backward``, ``gelu_backward``, ``native_batch_norm_backward``). Same kernels on the same
inputs: outputs, gradients and running statistics are bit-identical to the modules' path. The norm may
be in training mode (batch statistics, running statistics updated once, in forward) or in eval mode
(running statistics, e.g. a detector's ``norm_eval``). ConvPE's stem uses it in eager CPU training
(``conv_in`` where it is cheap to recompute: the 3-channel first conv).
"""
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from mmposmlp.utils.compat import is_compiling
from .export_mode import torch_is_exporting

__all__ = ['ConvArgs', 'NormActConvFunction', 'batch_norm_momentum', 'eager_cpu_training', 'no_hooks',
           'norm_act_conv', 'plain_chain']


class ConvArgs(NamedTuple):
    """Geometry of an ``nn.Conv2d`` (zeros padding, one group)."""
    stride: Tuple[int, int]
    padding: Tuple[int, int]
    dilation: Tuple[int, int]

    @classmethod
    def of(cls, conv: nn.Conv2d) -> 'ConvArgs':
        return cls(tuple(conv.stride), tuple(conv.padding), tuple(conv.dilation))


class ChainSpec(NamedTuple):
    conv_in: Optional[ConvArgs]
    conv_out: ConvArgs
    batch_stats: bool  # the norm is in training mode
    eps: float
    approximate: str


def _conv(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], args: ConvArgs) -> torch.Tensor:
    return F.conv2d(x, weight, bias, args.stride, args.padding, args.dilation, 1)


def _conv_backward(grad, x, weight, args: ConvArgs, mask):
    """``(grad_input, grad_weight, grad_bias)`` as autograd's ``ConvolutionBackward0`` computes them."""
    return torch.ops.aten.convolution_backward(grad, x, weight, [weight.shape[0]], list(args.stride),
                                               list(args.padding), list(args.dilation), False, [0, 0], 1, mask)


class NormActConvFunction(torch.autograd.Function):
    """``conv_out(gelu(batch_norm(conv_in(x))))``, keeping ``x`` and the per-channel statistics only.
    With batch statistics, ``running_mean`` / ``running_var`` are updated once, in forward, by the norm
    kernel itself (``momentum`` as :class:`torch.nn.BatchNorm2d` computes it); otherwise they normalise."""

    @staticmethod
    def forward(ctx, x, in_weight, in_bias, norm_weight, norm_bias, out_weight, out_bias,
                running_mean, running_var, momentum: float, spec: ChainSpec):
        c = x if spec.conv_in is None else _conv(x, in_weight, in_bias, spec.conv_in)
        normed, mean, invstd = torch.ops.aten.native_batch_norm(c, norm_weight, norm_bias, running_mean, running_var,
                                                                spec.batch_stats, momentum, spec.eps)
        act = torch.ops.aten.gelu.out(normed, approximate=spec.approximate, out=normed)  # (not kept: in place)
        out = _conv(act, out_weight, out_bias, spec.conv_out)
        ctx.spec = spec
        running = (None, None) if spec.batch_stats else (running_mean, running_var)  # (eval: what normalises)
        ctx.save_for_backward(x, in_weight, in_bias, norm_weight, norm_bias, out_weight, mean, invstd, *running)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, in_weight, in_bias, norm_weight, norm_bias, out_weight, mean, invstd, run_mean, run_var = ctx.saved_tensors
        spec, needs = ctx.spec, ctx.needs_input_grad
        c = x if spec.conv_in is None else _conv(x, in_weight, in_bias, spec.conv_in)
        normed = torch.ops.aten.native_batch_norm(c, norm_weight, norm_bias, run_mean, run_var, spec.batch_stats, 0.0,
                                                  spec.eps)[0]  # (batch statistics: recomputed, no update)
        act = F.gelu(normed, approximate=spec.approximate)
        grad_act, grad_out_w, grad_out_b = _conv_backward(grad, act, out_weight, spec.conv_out,
                                                          [True, needs[5], needs[6]])
        # (into the activation's memory: a fresh full-size buffer costs page faults)
        grad_normed = torch.ops.aten.gelu_backward.grad_input(grad_act, normed, approximate=spec.approximate,
                                                              grad_input=act)
        del normed, grad_act, act
        grad_c, grad_norm_w, grad_norm_b = torch.ops.aten.native_batch_norm_backward(
            grad_normed, c, norm_weight, run_mean, run_var, mean, invstd, spec.batch_stats, spec.eps,
            [needs[0] or spec.conv_in is not None, needs[3], needs[4]])
        grad_x, grad_in_w, grad_in_b = grad_c, None, None
        if spec.conv_in is not None:
            del grad_normed
            grad_x, grad_in_w, grad_in_b = _conv_backward(grad_c, x, in_weight, spec.conv_in, list(needs[:3]))
        return (grad_x, grad_in_w, grad_in_b, grad_norm_w, grad_norm_b, grad_out_w, grad_out_b,
                None, None, None, None)


def batch_norm_momentum(norm: nn.modules.batchnorm._BatchNorm) -> float:
    """In training mode, count one batch in ``num_batches_tracked``; return the running-average factor,
    as :meth:`torch.nn.modules.batchnorm._BatchNorm.forward` does."""
    if not norm.training:
        return 0.0  # (unused: eval mode updates nothing)
    if norm.num_batches_tracked is not None:
        norm.num_batches_tracked.add_(1)
        if norm.momentum is None:
            return 1.0 / float(norm.num_batches_tracked)
    return 0.0 if norm.momentum is None else norm.momentum


def norm_act_conv(x: torch.Tensor, conv_in: Optional[nn.Conv2d], norm: nn.BatchNorm2d, act: nn.GELU,
                  conv_out: nn.Conv2d) -> torch.Tensor:
    """``conv_out(act(norm(conv_in(x))))`` through :class:`NormActConvFunction` (``conv_in=None``: no
    first conv). The caller checks that the modules are plain (see :func:`plain_chain`)."""
    spec = ChainSpec(None if conv_in is None else ConvArgs.of(conv_in), ConvArgs.of(conv_out), norm.training,
                     norm.eps, act.approximate)
    in_weight, in_bias = (None, None) if conv_in is None else (conv_in.weight, conv_in.bias)
    momentum = batch_norm_momentum(norm)
    return NormActConvFunction.apply(x, in_weight, in_bias, norm.weight, norm.bias, conv_out.weight,
                                     conv_out.bias, norm.running_mean, norm.running_var, momentum, spec)


def eager_cpu_training(x: torch.Tensor) -> bool:
    """Autograd on, ``x`` on the CPU (where the norm kernel is ``native_batch_norm``), no autocast, and
    eager mode (not compiled, exported, traced or scripted)."""
    if not torch.is_grad_enabled() or x.device.type != 'cpu' or torch.is_autocast_enabled(x.device.type):
        return False
    return not (is_compiling() or torch_is_exporting() or torch.jit.is_tracing() or torch.jit.is_scripting())


def no_hooks(*modules: nn.Module) -> bool:
    """No forward (pre-)hook and no backward (pre-)hook on any of ``modules``."""
    return not any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
                   for m in modules)


def _plain_conv(conv: nn.Module) -> bool:
    return (type(conv) is nn.Conv2d and conv.padding_mode == 'zeros' and conv.groups == 1
            and isinstance(conv.padding, tuple) and conv.bias is not None)


def _plain_batch_norm(norm: nn.Module) -> bool:
    return (type(norm) is nn.BatchNorm2d and norm.affine and norm.track_running_stats
            and norm.running_mean is not None)


def plain_chain(conv_in: Optional[nn.Module], norm: nn.Module, act: nn.Module, conv_out: nn.Module) -> bool:
    """Whether :func:`norm_act_conv` computes exactly what the modules compute: a
    :class:`torch.nn.BatchNorm2d` with running statistics (not SyncBN), :class:`torch.nn.GELU`, plain
    convs with a bias, every parameter trainable and no hook on any of them."""
    modules = [m for m in (conv_in, norm, act, conv_out) if m is not None]
    convs_plain = all(_plain_conv(c) for c in (conv_in, conv_out) if c is not None)
    return (convs_plain and _plain_batch_norm(norm) and type(act) is nn.GELU and no_hooks(*modules)
            and all(p.requires_grad for m in modules for p in m.parameters()))
