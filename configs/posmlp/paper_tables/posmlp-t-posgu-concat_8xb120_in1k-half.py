# PosMLP Fig. 3(c) / Sec. 5.3 "PoSGU configurations", Concat: the gating product replaced by a channel
# concatenation, Z = Concat(P X1 + b, X2) ("performances degrade"; the text gives no number). The block's
# second FC then reads all gamma*C hidden channels (twice the default's input). PosMLP-T (GGQPE) otherwise
# unchanged, ImageNet-1K^0.5 protocol of the other ablations.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_cfg=dict(combine='concat')))
