"""Non-locality of the Gaussian gating units per layer: PosMLP appendix Eq. (16) and Fig. 8.

``g(Sigma^l) = 1/s sum_i sqrt(prod_j lambda_ij)`` over the ``s`` groups of layer ``l``, where ``lambda_ij``
are the eigenvalues of group ``i``'s matrix ``Sigma~`` in the logits ``-1/2 (d - Delta)^T Sigma~ (d - Delta)``
(``Gamma Gamma^T``, or ``Gamma`` itself for ``symmetric=False``): small eigenvalues spread a query's weights
over far tokens, so a smaller ``g`` means a more non-local layer. As the paper does (after Cordonnier et al.),
groups whose ``Sigma~`` is (close to) singular are left out: here, those with an eigenvalue of modulus below
``min_eigenvalue`` (the paper states no threshold).
"""
from typing import Dict

import torch
import torch.nn as nn

from mmposmlp.models.layers.gating import PositionalGatingUnit
from mmposmlp.models.layers.relative_position import GaussianPositionMixing


def gaussian_sigma(mixing: GaussianPositionMixing) -> torch.Tensor:
    """``Sigma~`` (G, D, D) of a generalized Gaussian mixing, as its logits use it."""
    if not mixing.generalized:
        raise ValueError("Eq. (16) needs a learned Sigma~ per group; this unit is the isotropic 'gqpe' "
                         '(Sigma~ = I, official generalized=False): use a generalized (ggqpe) model.')
    gamma = mixing.spreads.detach()
    return gamma @ gamma.transpose(-1, -2) if mixing.symmetric else gamma


def non_locality(model: nn.Module, min_eigenvalue: float = 1e-4) -> Dict[str, float]:
    """``{gating unit name: g(Sigma^l)}`` (Eq. 16) for every generalized Gaussian gating unit of ``model``,
    in module order; ``nan`` for a layer all of whose groups are (near-)singular."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, PositionalGatingUnit) and isinstance(m.mixing, GaussianPositionMixing):
            lam = torch.linalg.eigvals(gaussian_sigma(m.mixing).double())  # (G, D), complex for a non-symmetric Gamma
            keep = lam.abs().min(dim=-1).values >= min_eigenvalue
            vals = lam.prod(dim=-1).abs().sqrt()[keep]
            out[name] = vals.mean().item() if keep.any() else float('nan')
    if not out:
        raise ValueError('the model has no Gaussian (gqpe / ggqpe) gating unit: Eq. (16) measures those only.')
    return out
