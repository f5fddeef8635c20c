# PosMLP Table 1 (PosMLP / PoSGU GLRPE, 77.41): one learned relative-position table per channel group.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='glrpe'))
