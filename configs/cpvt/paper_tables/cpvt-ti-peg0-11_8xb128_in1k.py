# CPVT Table 12 (PEG positions "0-11": one PEG after each encoder from the 0-th to the 10-th; CPVT-Ti,
# cls token): 6.1M params, 73.4 top-1 (paper). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=tuple(range(11))))
