# PosMLP Fig. 3(d) / Sec. 5.3 "PoSGU configurations", LayerNorm: "additionally adding a LayerNorm before
# the GGQPE" (77.40 -> 76.95 top-1): a LayerNorm (eps 1e-6) on X1 before its positional mixing, as gMLP's
# SGU normalises X1. PosMLP-T otherwise unchanged, ImageNet-1K^0.5 protocol of the other ablations.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(norm=True)))
