# CPVT Table 6 left (PEG position on CPVT-Ti / DeiT-tiny, cls token): one PEG before the first encoder (-1); 70.6 top-1 (paper).
# Position 0 is cpvt-ti-peg0-1_8xb128_in1k.py (72.4). Recipe: ../cpvt-ti_8xb128_in1k.py.
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(-1, )))
