# PosMLP Table 7 (bias b removed from Eq. (15), no APE; 76.8 top-1): the official ``absolute_bias=False``.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(token_bias=False)))
