# PosMLP Fig. 3(e) / Sec. 5.3 "PoSGU configurations", NonSplit: no channel split, the whole hidden tensor is
# mixed by GGQPE and gates itself, Z = (P X + b) * X (75.49 vs 77.40 top-1); the official chunks=1. The
# block's second FC reads all gamma*C hidden channels. PosMLP-T otherwise unchanged, ImageNet-1K^0.5.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(split=False)))
