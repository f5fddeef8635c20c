# CPVT Table 12 (PEG positions "0-1": one PEG after each encoder from the 0-th to the 0-th; CPVT-Ti,
# cls token): 5.7M params, 72.4 top-1 (paper). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, )))
