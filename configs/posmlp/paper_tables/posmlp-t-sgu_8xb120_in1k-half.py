# PosMLP Table 1 (PosMLP / SGU, 76.33) = Table 3 "gMLP+ConvLHS" (21.8M, 5.10G, 76.33) = Table 10
# Conv PE + Conv PM: PosMLP-T with gMLP's spatial gating unit (dense token FC W + LayerNorm on X1).
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='sgu'))
