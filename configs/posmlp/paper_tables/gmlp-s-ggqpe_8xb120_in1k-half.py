# PosMLP Table 1 (gMLP / PoSGU GGQPE, 74.02) = Table 3 "gMLP+GGQPE" (18.2M, 4.45G, 74.02 / 92.00): gMLP-S
# whose token FC is PosMLP's group-wise generalized quadratic positional encoding, "s = 8 for all layers"
# (Sec. 5.3), no LayerNorm on X1. ImageNet-1K^0.5, recipe of ./gmlp-s_8xb120_in1k-half.py.
_base_ = ['./gmlp-s_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='ggqpe', groups=8))
