# CPVT Table 5 "3 fixed (random init)": CPVT-Ti with one depthwise 3x3 PEG at position 0 whose weights
# keep their random initialisation (PyTorch's conv init) and are never trained: 5.68M params, 71.3 top-1
# (paper). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, ), peg_cfg=dict(frozen=True)))
