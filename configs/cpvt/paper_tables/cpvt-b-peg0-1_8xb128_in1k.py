# CPVT Table 2 (224 column): CPVT-B with a single PEG ("0-1": one PEG after the 0-th encoder; the table's
# caption: "A simple PEG of a single layer of 3x3 depth-wise convolution is used here"; only its dagger row,
# CPVT-Ti 73.4, has five PEGs), cls token: 86M params, 81.9 top-1 (paper). Table 4's CPVT-B (82.3) is the
# 0-5 model of ../cpvt-b_8xb128_in1k.py. Recipe: ../cpvt-b_8xb128_in1k.py (Table 10).
_base_ = ['../cpvt-b_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, )))
