# CPVT Table 6 right (PEG before the first encoder, position -1, with a 27x27 depthwise kernel; 5.8M params,
# 72.5 top-1, paper). Recipe: ../cpvt-ti_8xb128_in1k.py.
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(-1, ), peg_cfg=dict(kernel_size=27)))
