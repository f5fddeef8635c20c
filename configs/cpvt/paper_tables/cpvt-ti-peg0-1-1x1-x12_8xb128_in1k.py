# CPVT Table 5 "1 (12 x) learnable": the PEG at position 0 replaced by 12 stacked dense 1x1 convolutions
# (no local relationship) with the residual kept: 6.13M params, 68.6 top-1 (paper). The paper does not say
# whether the 12 layers are stacked at one position or spread over the encoders; both give
# 12 x (192^2 + 192) = 444,672 params. Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, ), peg_cfg=dict(kernel_size=1, num_layers=12, conv_type='dense')))
