# CPVT Table 12 (PEG positions "0-1": one PEG after each encoder from the 0-th to the 0-th; CPVT-S,
# cls token): 22.0M params, 79.9 top-1 (paper). Recipe: ../cpvt-s_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-s_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, )))
