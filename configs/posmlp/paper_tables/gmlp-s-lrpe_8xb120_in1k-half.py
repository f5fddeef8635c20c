# PosMLP Table 1 (gMLP / PoSGU LRPE, 72.44): gMLP-S whose token mixing is one learned relative position
# table (Eq. 11, no token FC W). ImageNet-1K^0.5, recipe of ./gmlp-s_8xb120_in1k-half.py.
_base_ = ['./gmlp-s_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='lrpe'))
