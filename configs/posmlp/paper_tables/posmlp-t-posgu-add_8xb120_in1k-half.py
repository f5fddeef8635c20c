# PosMLP Fig. 3(b) / Sec. 5.3 "PoSGU configurations", Element-wise Addition: the gating product of PoSGU
# replaced by an addition, Z = (P X1 + b) + X2 ("performances degrade"; the text gives no number).
# PosMLP-T (GGQPE) otherwise unchanged, ImageNet-1K^0.5 protocol of the other ablations.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(combine='add')))
