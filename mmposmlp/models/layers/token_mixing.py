"""Token mixing ``P X1 + b`` on window rows and the gated channel MLP as one autograd function.

Layout (see :mod:`.gating`): ``X1`` is ``(G, K, R, N)`` - groups, channels per group, windows, tokens
of a window - so all rows of a group are mixed by one batched matmul. Windows that need a masked
matrix (padding, shifted-window seams) are consecutive runs of windows with one mask in a
mask-ordered :class:`~.windows.WindowLayout`: :class:`GatedMLPFunction` either keeps the hidden tensor
of each run as its own contiguous block, so each run is mixed once by its own matrix, or keeps one
block and mixes each run once after copying its rows out (:func:`mix_each`). In a row-major layout
they are listed as ``[(pattern, window indices)]`` and recomputed with their pattern's matrix after
the unmasked one (:func:`mix_windows`).

:class:`GatedMLPFunction` is ``fc2((P X1 + b) * X2)`` with ``[X1 | X2] = act(fc1(LN(x)))`` (PosMLP
Eq. 9, Fig. 2d) for training: autograd would keep seven tensors per block (the LayerNorm's input and
output, ``fc1``'s output, the activation, the mixed ``X1``, the gated product), about ``2C + 3 C_hidden``
values per token; this function keeps the block input, ``fc1``'s output and the mixed ``X1``
(``C + 1.5 C_hidden``) and recomputes the LayerNorm, the activation and the product in backward - element-
wise work, cheap next to the GEMMs. Where the token mixing is cheap too (less than a quarter of the
FCs' multiply-adds: the later stages, where ``C`` is large and the windows small), the mixed ``X1`` is
recomputed as well and the function keeps ``C + C_hidden``. Its backward calls the same kernels as
autograd's formulas (``native_layer_norm_backward``, ``gelu_backward``, ``mm``, ``bmm``).
"""
from typing import List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F


def apply_token_mixing(matrix: torch.Tensor, u: torch.Tensor, bias: Optional[torch.Tensor] = None,
                       out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``out[g, ..., m] = sum_n matrix[g, m, n] u[g, ..., n] (+ bias[m])`` for ``u`` (G, ..., N)
    (written into ``out``, contiguous like ``u``, when given).

    The token axis is innermost, so all windows, batch items and channels of a group form the
    rows of one matrix and the mixing is a single batched matmul over the groups (``P`` enters
    transposed, a free view); the per-position bias rides along as ``baddbmm``'s input.
    """
    G, N = u.shape[0], u.shape[-1]
    rows = u.reshape(G, -1, N)
    mat = matrix.to(u.dtype).transpose(1, 2)
    dest = None if out is None else out.view(rows.shape)
    if bias is None:
        result = torch.bmm(rows, mat, out=dest)
    elif torch.jit.is_tracing():
        # FLOP counters (fvcore, mmengine.analysis) trace the model and know bmm, not baddbmm
        result = torch.bmm(rows, mat) + bias.to(u.dtype).view(1, 1, N)
        result = result if dest is None else dest.copy_(result)
    else:
        result = torch.baddbmm(bias.to(u.dtype).view(1, 1, N), rows, mat, out=dest)
    return result.view(u.shape)


MaskedRows = List[Tuple[int, torch.Tensor]]


def mix_windows(u: torch.Tensor, base: torch.Tensor, masked: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                masked_rows: MaskedRows, into: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``P X1 + b`` for ``u`` (G, K, R, N): ``base`` (G, N, N) for every window, then the windows of
    ``masked_rows`` recomputed with ``masked[k]`` (interior windows, usually the majority, keep the
    unmasked result: no gather/scatter of the bulk). Written into ``into`` when given."""
    out = apply_token_mixing(base, u, bias, into)
    for k, idx in masked_rows if masked is not None else ():
        out.index_copy_(2, idx, apply_token_mixing(masked[k], u.index_select(2, idx), bias))
    return out


def _mix_backward(grad_out: torch.Tensor, u: torch.Tensor, base: torch.Tensor, masked: Optional[torch.Tensor],
                  masked_rows: MaskedRows, grad_u: torch.Tensor, need_base: bool, need_masked: bool):
    """Gradients of :func:`mix_windows` (bias aside): ``grad_u`` (written in place), ``d base`` and
    ``d masked``. ``grad_out`` is consumed (the masked windows are zeroed in it)."""
    G, K, R, N = u.shape
    rows = (G, K * R, N)
    fixes, grad_masked = [], None
    if masked is not None and masked_rows:
        grad_masked = torch.zeros_like(masked) if need_masked else None
        for k, idx in masked_rows:
            g_k = grad_out.index_select(2, idx).reshape(G, -1, N)
            if need_masked:
                grad_masked[k] = torch.bmm(g_k.transpose(1, 2), u.index_select(2, idx).reshape(G, -1, N))
            fixes.append((idx, torch.bmm(g_k, masked[k].to(u.dtype))))
        grad_out.index_fill_(2, torch.cat([idx for idx, _ in fixes]), 0)  # their base path was overwritten
    grad_base = torch.bmm(grad_out.view(rows).transpose(1, 2), u.reshape(rows)).to(base.dtype) if need_base else None
    torch.bmm(grad_out.view(rows), base.to(u.dtype), out=grad_u.view(rows))
    for idx, g in fixes:
        grad_u.index_copy_(2, idx, g.view(G, K, -1, N))
    return grad_base, grad_masked


#: ``((pattern, first, end), ...)``: consecutive windows sharing one matrix (``None``: the unmasked one)
WindowRuns = Tuple[Tuple[Optional[int], int, int], ...]


def mix_each(u: torch.Tensor, base: torch.Tensor, masked: Optional[torch.Tensor], bias: Optional[torch.Tensor],
             runs: WindowRuns, into: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``P X1 + b`` for ``u`` (G, K, R, N) whose windows are cut into ``runs`` (covering all of them): each
    run copied out, mixed once by its own matrix (``base`` or ``masked[pattern]``) and written back."""
    out = torch.empty_like(u) if into is None else into.view(u.shape)
    for k, first, end in runs:
        matrix = base if k is None else masked[k]
        out[:, :, first:end] = apply_token_mixing(matrix, u[:, :, first:end].contiguous(), bias)
    return out


def _mix_each_backward(grad_out: torch.Tensor, u: torch.Tensor, base: torch.Tensor, masked: Optional[torch.Tensor],
                       runs: WindowRuns, grad_u: torch.Tensor, need_base: bool, need_masked: bool):
    """Gradients of :func:`mix_each` (bias aside): ``grad_u`` (written in place), ``d base`` and ``d masked``."""
    G, N = u.shape[0], u.shape[-1]
    grad_base = torch.zeros_like(base) if need_base else None
    grad_masked = torch.zeros_like(masked) if need_masked and masked is not None else None
    for k, first, end in runs:
        g = grad_out[:, :, first:end].reshape(G, -1, N)
        matrix = base if k is None else masked[k]
        acc = grad_base if k is None else grad_masked[k] if grad_masked is not None else None
        if acc is not None:
            acc += torch.bmm(g.transpose(1, 2), u[:, :, first:end].reshape(G, -1, N)).to(acc.dtype)
        grad_u[:, :, first:end] = torch.bmm(g, matrix.to(u.dtype)).view(G, u.shape[1], -1, N)
    return grad_base, grad_masked


#: ``(pattern, first, end, masked_rows)``: windows ``first .. end`` mixed by ``masked[pattern]`` (``None``:
#: the unmasked matrix), then its ``masked_rows`` (local to the run) recomputed with their masks. Pattern
#: :data:`EACH`: ``masked_rows`` is instead the run's :data:`WindowRuns` (local), each mixed once by :func:`mix_each`
MixingRun = Tuple[Optional[int], int, int, MaskedRows]

#: the pattern of a :data:`MixingRun` whose windows are cut into runs of their own matrices
EACH = -1


def mix_run(u: torch.Tensor, run: MixingRun, base, masked, bias, into: Optional[torch.Tensor] = None):
    """The token mixing of one :data:`MixingRun` of windows ``u`` (G, K, R, N)."""
    k, _, _, rows = run
    if k == EACH:
        return mix_each(u, base, masked, bias, rows, into)
    return mix_windows(u, base if k is None else masked[k], masked, bias, rows, into)


class GatedMLPSpec(NamedTuple):
    """What :class:`GatedMLPFunction` needs besides tensors."""
    groups: int
    tokens: int  # N, tokens per window
    runs: Tuple[MixingRun, ...]  # consecutive, covering all windows
    approximate: str  # GELU's
    eps: Optional[float]  # the LayerNorm's; None: the input is already normed
    recompute_mixing: bool = False  # recompute P X1 + b in backward instead of keeping it
    #: ``(mixing, patterns)``: the positional matrices built one group at a time from ``mixing`` (a
    #: ``_PositionMixing``) for key masks ``patterns``, in forward and again in backward (``base`` and
    #: ``masked`` are then None and the mixing's parameters follow ``spec``)
    groupwise: Optional[tuple] = None


def _linear_t(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
              out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``(x W^T + b)^T`` = ``W x^T + b``: the output channel-major ``(out, rows)`` (into ``out``)."""
    if bias is not None:
        return torch.addmm(bias[:, None], weight, x.t(), out=out)
    return torch.mm(weight, x.t(), out=out)


def _blocks(flat: torch.Tensor, width: int, runs, tokens: int):
    """``(run, (width, run tokens) view)`` of a tensor stored run by run: each run's block is contiguous."""
    return [(run, flat[width * run[1] * tokens:width * run[2] * tokens].view(width, -1)) for run in runs]


def _accumulate_mm(acc: Optional[torch.Tensor], a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``acc + a b`` (``a b`` when ``acc`` is None), in place."""
    return torch.mm(a, b) if acc is None else acc.addmm_(a, b)


def _mix_all(a: torch.Tensor, spec: GatedMLPSpec, base, masked, token_bias) -> torch.Tensor:
    """``P X1 + b`` of the activation ``a`` = ``[X1 | X2]`` stored run by run: ``(half * T,)``, also run by run."""
    N, G = spec.tokens, spec.groups
    hidden = a.numel() // (spec.runs[-1][2] * N)
    half = hidden // 2
    out = a.new_empty(a.numel() // 2)
    for group, base_g, masked_g in _group_matrices(spec, base, masked):
        for (run, act), (_, mixed) in zip(_blocks(a, hidden, spec.runs, N), _blocks(out, half, spec.runs, N)):
            shape = (G, half // G, run[2] - run[1], N)
            u, into = act[:half].view(shape)[group], mixed.view(shape)[group]
            mix_run(u, run, base_g, masked_g, token_bias, into=into)
    return out


def _group_matrices(spec: GatedMLPSpec, base, masked, grad: bool = False):
    """``(groups, base, masked)`` to mix with: all groups at once (``slice(None)``), or, for
    ``spec.groupwise``, each group's matrices built in turn (``grad``: with autograd)."""
    if spec.groupwise is None:
        yield slice(None), base, masked
        return
    mixing, patterns = spec.groupwise
    for g in range(spec.groups):
        with torch.set_grad_enabled(grad):
            base_g, masked_g = mixing.group_matrices(g, patterns)
        yield slice(g, g + 1), base_g, masked_g


def _run_mixing_backward(run: MixingRun, grad_mixed, u, grad_u, base, masked, grad_base, grad_masked):
    """Backward of one run's token mixing: writes ``grad_u`` and adds the matrices' gradients into
    ``grad_base`` / ``grad_masked`` (None: not needed)."""
    k, _, _, rows = run
    if k == EACH:
        found = _mix_each_backward(grad_mixed, u, base, masked, rows, grad_u, grad_base is not None,
                                   grad_masked is not None)
        for acc, grad in zip((grad_base, grad_masked), found):
            if grad is not None:
                acc += grad
        return
    matrix = base if k is None else masked[k]
    need_matrix = (grad_base if k is None else grad_masked) is not None
    grad_matrix, grad_fixed = _mix_backward(grad_mixed, u, matrix, masked, rows, grad_u, need_matrix,
                                            grad_masked is not None)
    if grad_matrix is not None:
        (grad_base if k is None else grad_masked[k]).add_(grad_matrix)
    if grad_fixed is not None:
        grad_masked += grad_fixed


class GatedMLPFunction(torch.autograd.Function):
    """``fc2((P X1 + b) * X2)``, ``[X1 | X2] = GELU(fc1(LN(x)))``, on windows ``x`` (..., N, C).

    ``w1``/``b1``/``w2`` are in group-major channel order (see :mod:`.gating`); ``ln_weight``,
    ``ln_bias`` and ``spec.eps`` are the LayerNorm's (``eps=None``: no norm). Returns the output
    with ``x``'s leading shape and ``w2``'s rows as channels (a transposed view).

    The hidden tensor is stored run by run (``spec.runs``): each run's ``(C_hidden, tokens)`` block is
    contiguous, so the token mixing of a run is one batched matmul with its own matrix; ``fc1`` and
    ``fc2`` are one GEMM per run (``fc2`` writes the columns of one output).

    With ``spec.groupwise`` (joint spatio-temporal windows) the positional matrices are built one group
    at a time inside the function, in forward and again, with autograd, in backward (as
    :class:`GroupwiseMixingFunction`); the mixing's parameters follow ``spec`` and get their gradients.
    """

    @staticmethod
    def forward(ctx, x, ln_weight, ln_bias, w1, b1, w2, b2, base, masked, token_bias, spec: GatedMLPSpec,
                *mixing_params):
        C = x.shape[-1]
        rows = x.reshape(-1, C)
        mean = rstd = None
        if spec.eps is not None:
            xn, mean, rstd = torch.native_layer_norm(rows, (C, ), ln_weight, ln_bias, spec.eps)
        else:
            xn = rows
        N, hidden = spec.tokens, w1.shape[0]
        h = rows.new_empty(hidden * rows.shape[0])
        for (_, first, end, _), block in _blocks(h, hidden, spec.runs, N):
            _linear_t(xn[first * N:end * N], w1, b1, out=block)
        a = F.gelu(h, approximate=spec.approximate)
        out = _mix_all(a, spec, base, masked, token_bias)
        half = hidden // 2
        z_t = rows.new_empty(w2.shape[0], rows.shape[0])
        for (run, block), (_, mixed) in zip(_blocks(a, hidden, spec.runs, N), _blocks(out, half, spec.runs, N)):
            u, v = block.view(2, half, -1).unbind(0)
            y = torch.mul(mixed, v, out=u)  # X1's storage is free now
            _linear_t(y.t(), w2, b2, out=z_t[:, run[1] * N:run[2] * N])
        ctx.spec = spec
        kept = None if spec.recompute_mixing else out
        ctx.save_for_backward(x, ln_weight, ln_bias, mean, rstd, w1, w2, h, kept, base, masked, token_bias)
        return z_t.t().view(*x.shape[:-1], w2.shape[0])

    @staticmethod
    def backward(ctx, grad_z):
        x, ln_weight, ln_bias, mean, rstd, w1, w2, h, out, base, masked, token_bias = ctx.saved_tensors
        spec = ctx.spec
        need = ctx.needs_input_grad
        C, N, G = x.shape[-1], spec.tokens, spec.groups
        rows = x.reshape(-1, C)
        xn = torch.native_layer_norm(rows, (C, ), ln_weight, ln_bias, spec.eps)[0] if spec.eps is not None else rows
        a = F.gelu(h, approximate=spec.approximate)
        if out is None:
            out = _mix_all(a, spec, base, masked, token_bias)
        hidden = w1.shape[0]
        half = hidden // 2
        g = grad_z.reshape(-1, w2.shape[0])  # (T, C_out)
        grad_a = torch.empty_like(a)
        grad_w2 = None
        grad_bias = torch.zeros_like(token_bias) if need[9] else None
        grad_base = torch.zeros_like(base) if need[7] else None
        grad_masked = torch.zeros_like(masked) if need[8] else None
        # one group at a time: each run's gradient of the mixed half kept until every group is done
        kept = a.new_empty(a.numel() // 2) if spec.groupwise is not None else None
        kept_blocks = _blocks(kept, half, spec.runs, N) if kept is not None else [(run, None) for run in spec.runs]
        for (run, act), (_, grad_act), (_, mixed), (_, grad_kept) in zip(
                _blocks(a, hidden, spec.runs, N), _blocks(grad_a, hidden, spec.runs, N),
                _blocks(out, half, spec.runs, N), kept_blocks):
            first, end = run[1], run[2]
            quarter = (G, half // G, end - first, N)
            u, v = act.view(2, *quarter).unbind(0)
            mixed = mixed.view(quarter)
            g_run = g[first * N:end * N]
            if need[5]:
                grad_w2 = _accumulate_mm(grad_w2, g_run.t(), (mixed * v).view(half, -1).t())
            grad_y = torch.mm(w2.t(), g_run.t(), out=grad_kept).view(quarter)  # (half, T_run) as (G, K, R_run, N)
            grad_u, grad_v = grad_act.view(2, *quarter).unbind(0)
            torch.mul(grad_y, mixed, out=grad_v)
            grad_mixed = grad_y.mul_(v)
            if grad_bias is not None:
                grad_bias += grad_mixed.sum((0, 1, 2))
            if kept is None:
                _run_mixing_backward(run, grad_mixed, u, grad_u, base, masked, grad_base, grad_masked)
        grad_params = _groupwise_mixing_backward(spec, a, grad_a, kept, need[11:]) if kept is not None else ()
        # free the activation and its gradient (the loop's views too) before the hidden-sized gradients below
        del a, out, act, u, v, mixed, grad_y, grad_mixed, kept
        grad_h = torch.ops.aten.gelu_backward(grad_a, h, approximate=spec.approximate)
        del grad_a, grad_act, grad_u, grad_v
        grad_w1 = None
        grad_xn = rows.new_empty(rows.shape) if need[0] or need[1] or need[2] else None
        for (_, first, end, _), block in _blocks(grad_h, hidden, spec.runs, N):
            if need[3]:
                grad_w1 = _accumulate_mm(grad_w1, block, xn[first * N:end * N])
            if grad_xn is not None:
                torch.mm(block.t(), w1, out=grad_xn[first * N:end * N])
        grad_b1 = sum(block.sum(1) for _, block in _blocks(grad_h, hidden, spec.runs, N)) if need[4] else None
        grad_b2 = g.sum(0) if need[6] else None
        grad_x = grad_lnw = grad_lnb = None
        if grad_xn is not None:
            if spec.eps is None:
                grad_x = grad_xn
            else:
                grad_x, grad_lnw, grad_lnb = torch.ops.aten.native_layer_norm_backward(
                    grad_xn, rows, (C, ), mean, rstd, ln_weight, ln_bias, [need[0], need[1], need[2]])
            grad_x = grad_x.view(x.shape) if grad_x is not None else None
        return (grad_x, grad_lnw, grad_lnb, grad_w1, grad_b1, grad_w2, grad_b2, grad_base, grad_masked, grad_bias, None,
                *grad_params)


def _groupwise_mixing_backward(spec: GatedMLPSpec, a, grad_a, grad_mixed, need):
    """Backward of the token mixing with each group's matrices built again, with autograd, one group at a
    time: writes the ``X1`` half of ``grad_a`` (run by run) and returns the gradients of the mixing's
    parameters (``need``: which)."""
    N, G = spec.tokens, spec.groups
    hidden = a.numel() // (spec.runs[-1][2] * N)
    half = hidden // 2
    params = [p for p, n in zip(spec.groupwise[0].parameters(), need) if n]
    grads = [torch.zeros_like(p) for p in params]
    for group, base_g, masked_g in _group_matrices(spec, None, None, grad=bool(params)):
        grad_base = torch.zeros_like(base_g) if params else None
        grad_masked = torch.zeros_like(masked_g) if params and masked_g is not None else None
        detached = None if masked_g is None else masked_g.detach()
        for (run, act), (_, grad_act), (_, grad_kept) in zip(_blocks(a, hidden, spec.runs, N),
                                                             _blocks(grad_a, hidden, spec.runs, N),
                                                             _blocks(grad_mixed, half, spec.runs, N)):
            quarter = (G, half // G, run[2] - run[1], N)
            _run_mixing_backward(run, grad_kept.view(quarter)[group], act[:half].view(quarter)[group],
                                 grad_act[:half].view(quarter)[group], base_g.detach(), detached, grad_base,
                                 grad_masked)
        _add_param_grads(grads, params, (base_g, grad_base), (masked_g, grad_masked))
    it = iter(grads)
    return tuple(next(it) if n else None for n in need)


class GroupwiseMixingFunction(torch.autograd.Function):
    """:func:`mix_run` with the positional matrices of ``mixing`` (a ``_PositionMixing``) built one
    group at a time, in forward and again in backward: the ``(G, N, N)`` matrices of all groups never
    exist at once (a joint spatio-temporal window of 16x14x14 tokens would need ``G x 39 MB`` per block,
    kept for backward). ``params`` are ``mixing``'s parameters (their gradients are returned)."""

    @staticmethod
    def forward(ctx, mixing, patterns, run: MixingRun, u, token_bias, *params):
        out = torch.empty_like(u)
        for g in range(u.shape[0]):
            base, masked = mixing.group_matrices(g, patterns)
            mix_run(u[g:g + 1], run, base, masked, token_bias, into=out[g:g + 1])
        ctx.mixing, ctx.patterns, ctx.run = mixing, patterns, run
        ctx.save_for_backward(u)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        u, = ctx.saved_tensors
        need = ctx.needs_input_grad
        params = [p for p, n in zip(ctx.mixing.parameters(), need[5:]) if n]
        grads = [torch.zeros_like(p) for p in params]
        grad_u = torch.empty_like(u)
        for g in range(u.shape[0]):
            with torch.enable_grad():
                base, masked = ctx.mixing.group_matrices(g, ctx.patterns)
            grad_base = torch.zeros_like(base) if params else None
            grad_masked = torch.zeros_like(masked) if params and masked is not None else None
            grad_g = grad_out[g:g + 1].clone(memory_format=torch.contiguous_format)  # (the gate's is permuted)
            _run_mixing_backward(ctx.run, grad_g, u[g:g + 1], grad_u[g:g + 1], base.detach(),
                                 None if masked is None else masked.detach(), grad_base, grad_masked)
            _add_param_grads(grads, params, (base, grad_base), (masked, grad_masked))
        grad_bias = grad_out.sum((0, 1, 2)) if need[4] else None
        it = iter(grads)
        return (None, None, None, grad_u if need[3] else None, grad_bias,
                *[next(it) if n else None for n in need[5:]])


def _add_param_grads(grads, params, *pairs) -> None:
    """Adds the gradients of ``params`` reached from ``(matrix, its gradient)`` ``pairs`` into ``grads``
    (pairs with a None gradient skipped)."""
    pairs = [(m, g) for m, g in pairs if g is not None]
    if not params or not pairs:
        return
    found = torch.autograd.grad([m for m, _ in pairs], params, [g for _, g in pairs], allow_unused=True)
    for acc, f in zip(grads, found):
        if f is not None:
            acc += f
