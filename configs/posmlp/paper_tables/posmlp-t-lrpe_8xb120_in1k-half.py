# PosMLP Table 1 (PosMLP / PoSGU LRPE, 76.93): one learned relative-position table per window.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='lrpe'))
