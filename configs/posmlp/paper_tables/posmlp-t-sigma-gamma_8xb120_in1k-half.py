# PosMLP Table 6 (Sigma = Gamma, Delta freed; 77.61 top-1): a free (not positive semi-definite)
# 2x2 matrix per group, the official ``symmetric=False``.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(symmetric=False)))
