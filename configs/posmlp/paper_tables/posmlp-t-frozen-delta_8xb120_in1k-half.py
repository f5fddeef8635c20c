# PosMLP Table 6 (Sigma = Gamma Gamma^T, Delta frozen at (0, 0); 77.20 top-1).
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(learn_centers=False)))
