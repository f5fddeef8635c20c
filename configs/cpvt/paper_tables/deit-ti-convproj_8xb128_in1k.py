# CPVT Table 16: "DeiT + Convolutional Projection", 5,685,352 params, 70.6 top-1 (paper): DeiT-tiny without
# positional encoding and with CvT's convolutional projection (Wu et al. 2021, Sec. 3.2) in one attention,
# inserted "in the position 0 as in our method", trained from scratch with the CPVT-Ti recipe
# (../cpvt-ti_8xb128_in1k.py). What the paper leaves open, and our choice:
# * where: position 0 is CPVT's PEG slot after encoder 0, so the projection sits in encoder 1's attention, which
#   reads exactly the tokens a position-0 PEG would (conv_proj_blocks=(1, ));
# * stride and norm: its count is DeiT-tiny without the position table (5,679,592) + 3 x 1,920, i.e. three biased
#   depthwise 3x3 convolutions and no BatchNorm; stride 1 for q, k and v (the count does not fix it);
# * the class token passes the convolutions unchanged (CvT's handling).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), conv_proj_blocks=(1, )))
