# PosMLP Table 1 (gMLP / PoSGU LRPE-M, 73.96): gMLP-S with SGU's token FC W plus one learned relative
# position table (Eq. 10), no LayerNorm on X1. ImageNet-1K^0.5, recipe of ./gmlp-s_8xb120_in1k-half.py.
_base_ = ['./gmlp-s_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='lrpe-m'))
