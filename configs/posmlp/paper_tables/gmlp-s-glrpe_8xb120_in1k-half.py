# PosMLP Table 1 (gMLP / PoSGU GLRPE, 74.56): gMLP-S with group-wise learned relative position tables,
# s = 8 groups in every block (the paper gives s = 8 for its gMLP+GGQPE row, Table 3; Table 1 states no
# other). ImageNet-1K^0.5, recipe of ./gmlp-s_8xb120_in1k-half.py.
_base_ = ['./gmlp-s_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='glrpe', groups=8))
