"""Upper bound of an AMLP module's Lipschitz constant (IMLP paper, Theorem 1).

The AMLP module (Eq. 5, the channel-wise part of IMLP) is

    f(x) = W1 concat(phi_1(W0 x + b0), phi_2(W0 x + b0)) + b1,   W1 = [W11 W12],

with phi_i element-wise and slope-restricted on [p_i, q_i]. Theorem 1: if rho_i > 0 and
a diagonal T_i >= 0 satisfy

    M(rho_i, T_i) = [[-2 p_i q_i W0' T_i W0 - rho_i I,  (p_i + q_i) W0' T_i],
                     [(p_i + q_i) T_i W0,               -2 T_i + W1i' W1i ]]  <= 0,

then ||f(x) - f(y)|| <= (sqrt(rho_1) + sqrt(rho_2)) ||x - y||. Minimising rho_i over
(rho_i, T_i) is a semi-definite program (solved here with cvxpy; the two programs are
independent, since the proof bounds g and h separately).

For an AGeLU ``beta * GELU(alpha * x + gamma) + theta`` the slope is
``alpha * beta * GELU'(.)`` with GELU' in [GELU'_min, GELU'_max] = [-0.1700, 1.1289], so
channel j is slope-restricted on ``alpha_j beta_j * [GELU'_min, GELU'_max]`` (ordered).
Theorem 1 uses one [p_i, q_i] per activation: the hull over channels (``--per-channel``
uses the per-channel version of Lemma 1 instead: diag(p), diag(q); also a valid bound and
never larger).

After the solver, the bound is certified in float64: for the returned T, the smallest
feasible rho is ``lambda_max(A - C B^-1 C')`` (Schur complement of the negative-definite
block B = -2T + W1i' W1i), so solver tolerance cannot make the reported bound too small.

Only the channel-wise part is covered: IMLP's DW block (spatial enhancement) is outside
the theorem; for a full IMLP the tool analyses its fc1 / activations / fc2 (= the AMLP of
Table 2 "w/ channel"). Small sizes only (the SDP has (C + r C) x (C + r C) matrices).

Examples::

    python tools/analysis/imlp_lipschitz.py --embed-dims 16 --seed 0 --pairs 2000
    python tools/analysis/imlp_lipschitz.py --checkpoint work_dirs/x/epoch_1.pth \\
        --module backbone.layers.0.ffn
"""
import argparse
import json
import math
import os.path as osp
import sys
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _gelu_slope_range() -> Tuple[float, float]:
    # GELU'(x) = Phi(x) + x phi(x); extrema at x = -sqrt(2) (min) and x = +sqrt(2) (max),
    # where GELU''(x) = phi(x) (2 - x^2) = 0.
    def d(x):
        return 0.5 * (1 + math.erf(x / math.sqrt(2))) + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    return d(-math.sqrt(2)), d(math.sqrt(2))


def _softplus_slope_range() -> Tuple[float, float]:
    return 0.0, 1.0


BASE_SLOPES = {'GELU': _gelu_slope_range, 'Softplus': _softplus_slope_range,
               'ReLU': lambda: (0.0, 1.0), 'Identity': lambda: (1.0, 1.0)}


def activation_slopes(act) -> Tuple[np.ndarray, np.ndarray]:
    """Per-channel slope bounds (p_j, q_j) of an AdaptiveActivation (or a plain GELU...)."""
    from mmposmlp.models.layers.imlp import AdaptiveActivation
    if isinstance(act, AdaptiveActivation):
        base = type(act.act).__name__
        if base not in BASE_SLOPES:
            raise ValueError(f'no slope range known for base activation {base}; known: {sorted(BASE_SLOPES)}')
        lo, hi = BASE_SLOPES[base]()
        ab = (act.alpha * act.beta).detach().double().cpu().numpy()
        a, b = ab * lo, ab * hi
        return np.minimum(a, b), np.maximum(a, b)
    base = type(act).__name__
    if base not in BASE_SLOPES:
        raise ValueError(f'no slope range known for activation {base}; known: {sorted(BASE_SLOPES)}')
    lo, hi = BASE_SLOPES[base]()
    return np.array([lo]), np.array([hi])


def _certify_rho(W0, W1i, p, q, t) -> float:
    """Smallest rho with M(rho, diag(t)) <= 0 (float64), or inf if none exists for this t."""
    T = np.diag(t)
    B = -2 * T + W1i.T @ W1i
    evB = np.linalg.eigvalsh((B + B.T) / 2)
    if evB.max() >= -1e-12:
        return math.inf
    P, Q = np.diag(p * np.ones(len(t))), np.diag(q * np.ones(len(t)))
    A = -W0.T @ (2 * P @ Q @ T) @ W0
    C = W0.T @ ((P + Q) @ T)
    S = A - C @ np.linalg.solve(B, C.T)
    return max(float(np.linalg.eigvalsh((S + S.T) / 2).max()), 0.0)


def solve_rho(W0: np.ndarray, W1i: np.ndarray, p, q, solver: Optional[str] = None,
              verbose: bool = False) -> Dict[str, float]:
    """min rho s.t. M(rho, T) <= 0, T = diag(t), t >= 0 (Eq. 9). p, q: scalars or vectors."""
    import cvxpy as cp
    n, n0 = W0.shape
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), (n,))
    q = np.broadcast_to(np.asarray(q, dtype=np.float64), (n,))
    t = cp.Variable(n, nonneg=True)
    rho = cp.Variable(nonneg=True)
    T = cp.diag(t)
    A = -W0.T @ cp.diag(cp.multiply(2 * p * q, t)) @ W0 - rho * np.eye(n0)
    C = W0.T @ cp.diag(cp.multiply(p + q, t))
    B = -2 * T + W1i.T @ W1i
    M = cp.bmat([[A, C], [C.T, B]])
    prob = cp.Problem(cp.Minimize(rho), [(M + M.T) / 2 << 0])
    kw = {'solver': solver} if solver else {}
    prob.solve(verbose=verbose, **kw)
    if t.value is None:
        raise RuntimeError(f'SDP not solved (status {prob.status}); try --solver SCS or CLARABEL')
    tv = np.maximum(np.asarray(t.value, dtype=np.float64), 0)
    certified = _certify_rho(W0, W1i, p, q, tv)
    if not math.isfinite(certified):
        # the solver's T sits on the boundary of B < 0: scale it up slightly and retry
        for s in (1 + 1e-6, 1 + 1e-4, 1 + 1e-2, 1.1, 2.0):
            certified = _certify_rho(W0, W1i, p, q, tv * s)
            if math.isfinite(certified):
                break
    return dict(rho_solver=float(rho.value), rho=certified, status=prob.status)


def amlp_weights(module) -> Dict[str, object]:
    """W0, b0, W1 split per branch, and per-branch slope bounds, from an IMLP/AMLP module."""
    if module.num_branches != 2:
        raise ValueError(f'Theorem 1 is stated for 2 concatenated activations, module has {module.num_branches}')
    W0 = module.fc1.weight.detach().double().cpu().numpy()            # (n, n0)
    W1 = module.fc2.weight.detach().double().cpu().numpy()            # (m, 2n)
    n = W0.shape[0]
    slopes = [activation_slopes(act) for act in module.acts]
    return dict(W0=W0, W1=[W1[:, :n], W1[:, n:]], slopes=slopes)


def lipschitz_bound(module, per_channel: bool = False, solver: Optional[str] = None) -> Dict[str, object]:
    """Theorem 1 bound sqrt(rho_1) + sqrt(rho_2) of the module's AMLP part."""
    w = amlp_weights(module)
    parts = []
    for W1i, (p, q) in zip(w['W1'], w['slopes']):
        if not per_channel:
            p, q = float(np.min(p)), float(np.max(q))
        parts.append(solve_rho(w['W0'], W1i, p, q, solver=solver))
    bound = sum(math.sqrt(r['rho']) for r in parts)
    naive = sum(np.linalg.norm(W1i, 2) * max(abs(np.min(p)), abs(np.max(q))) for W1i, (p, q)
                in zip(w['W1'], w['slopes'])) * np.linalg.norm(w['W0'], 2)
    return dict(bound=bound, rho=[r['rho'] for r in parts], status=[r['status'] for r in parts],
                naive_bound=float(naive), per_channel=per_channel)


@torch.no_grad()
def amlp_forward(module, x: torch.Tensor) -> torch.Tensor:
    """The AMLP part of ``module`` on (B, C) inputs (no DW block)."""
    return module.fc2(module.channel_enhance(x))


@torch.no_grad()
def empirical_ratio(module, num_pairs: int = 1000, seed: int = 0, scale: float = 1.0,
                    local: bool = False) -> float:
    """max ||f(x) - f(y)|| / ||x - y|| over random pairs (a lower bound of L(f))."""
    g = torch.Generator().manual_seed(seed)
    C = module.embed_dims
    x = torch.randn(num_pairs, C, generator=g, dtype=torch.float64) * scale
    if local:
        y = x + 1e-3 * torch.randn(num_pairs, C, generator=g, dtype=torch.float64)
    else:
        y = torch.randn(num_pairs, C, generator=g, dtype=torch.float64) * scale
    m = module.double()
    num = (amlp_forward(m, x) - amlp_forward(m, y)).norm(dim=1)
    return float((num / (x - y).norm(dim=1)).max())


def random_module(embed_dims: int = 8, expansion_ratio: float = 2., seed: int = 0, act: str = 'AGeLU',
                  randomize_act: bool = True):
    from mmposmlp.models.layers.imlp import IMLP
    torch.manual_seed(seed)
    m = IMLP(embed_dims, expansion_ratio=expansion_ratio, variant='channel', act_cfg=dict(type=act))
    with torch.no_grad():
        torch.nn.init.normal_(m.fc1.weight, std=1 / math.sqrt(embed_dims))
        torch.nn.init.normal_(m.fc2.weight, std=1 / math.sqrt(m.out_hidden_channels))
        torch.nn.init.normal_(m.fc1.bias, std=0.5)
        if randomize_act:
            for a in m.acts:
                a.alpha.copy_(1 + 0.5 * torch.randn_like(a.alpha))
                a.beta.copy_(1 + 0.5 * torch.randn_like(a.beta))
                a.gamma.normal_(std=0.5)
                a.theta.normal_(std=0.5)
    return m.eval()


def module_from_checkpoint(path: str, module_prefix: str, act: str = 'AGeLU'):
    """Rebuild the IMLP at ``module_prefix`` (e.g. 'backbone.layers.0.ffn') from a checkpoint.

    ``act``: the adaptive activation of its branches (a state dict cannot tell AGeLU from
    ASoftPlus); branches without alpha/beta/gamma/theta are plain GELUs.
    """
    from mmposmlp.models.checkpoints import load_checkpoint_file
    from mmposmlp.models.layers.imlp import IMLP
    state = load_checkpoint_file(path)
    pre = module_prefix.rstrip('.') + '.'
    sub = {k[len(pre):]: v for k, v in state.items() if k.startswith(pre)}
    if 'fc1.weight' not in sub:
        cands = sorted({k.rsplit('.fc1.weight', 1)[0] for k in state if k.endswith('.fc1.weight')})
        raise KeyError(f'no {pre}fc1.weight in {path}; IMLP modules there: {cands[:20]}')
    hidden, C = sub['fc1.weight'].shape
    k = sub['fc2.weight'].shape[1] // hidden
    adaptive = any(key.startswith('acts.0.alpha') for key in sub)
    m = IMLP(C, expansion_ratio=hidden / C, num_branches=k,
             act_cfg=dict(type=act) if adaptive else dict(type='GELU'),
             spatial='dw_conv.weight' in sub,
             kernel_size=sub['dw_conv.weight'].shape[-1] if 'dw_conv.weight' in sub else 3)
    m.load_state_dict(sub, strict=True)
    return m.eval()


def parse_args(argv: Optional[Sequence[str]] = None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--checkpoint', help='checkpoint holding an IMLP module')
    p.add_argument('--module', help="key prefix of the IMLP in the checkpoint, e.g. 'backbone.layers.0.ffn'")
    p.add_argument('--act', default='AGeLU', choices=['AGeLU', 'ASoftPlus'],
                   help='adaptive activation of the checkpoint module (default AGeLU)')
    p.add_argument('--embed-dims', type=int, default=8, help='random module: C')
    p.add_argument('--expansion-ratio', type=float, default=2., help='random module: r')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--per-channel', action='store_true', help='per-channel slope bounds (tighter)')
    p.add_argument('--solver', default=None, help='cvxpy solver (default: cvxpy picks; e.g. SCS, CLARABEL)')
    p.add_argument('--pairs', type=int, default=2000, help='random pairs for the empirical ratio')
    p.add_argument('--max-size', type=int, default=1024, help='refuse SDPs with C + rC above this')
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.checkpoint:
        if not args.module:
            raise SystemExit('--checkpoint needs --module (key prefix of the IMLP, e.g. backbone.layers.0.ffn)')
        m = module_from_checkpoint(args.checkpoint, args.module, act=args.act)
    else:
        m = random_module(args.embed_dims, args.expansion_ratio, args.seed)
    size = m.embed_dims + m.hidden_channels
    if size > args.max_size:
        raise SystemExit(f'SDP of size {size} > --max-size {args.max_size}: this tool is for small modules')
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        raise SystemExit('cvxpy is not installed: pip install cvxpy (needed for the SDP of Theorem 1)')
    res = lipschitz_bound(m, per_channel=args.per_channel, solver=args.solver)
    res['empirical_ratio'] = max(empirical_ratio(m, args.pairs, args.seed),
                                 empirical_ratio(m, args.pairs, args.seed, local=True))
    res['embed_dims'], res['hidden'] = m.embed_dims, m.hidden_channels
    print(json.dumps(res, indent=2))
    return res


if __name__ == '__main__':
    main()
