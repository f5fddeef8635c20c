# PosMLP Table 1 (PosMLP / PoSGU LRPE-M, 76.95): one LRPE table plus a dense token FC W, Eq. (10).
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='lrpe-m'))
