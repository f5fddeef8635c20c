# LVT-R4 + IMLP*: IMLP paper Table 1, "Portable ViT" (4.98M params, 0.92G FLOPs, 74.9 top-1, reported).
# lvt-r4_8xb128_in1k.py (same recipe) with every FFN replaced by IMLP (the paper: "we replace all the MLP
# modules"): the 8 backbone blocks' (LVT's fc1 + 3x3 depthwise conv + fc2, and stage 1's plain MLP) and the two
# class-attention blocks', each IMLP with r = 2, two AGeLUs and a 5x5 depthwise conv + BN + GELU ("*": n = 5).
# In the class blocks the IMLP sees the lone class token as a 1x1 grid (its depthwise conv's centre tap).
_base_ = './lvt-r4_8xb128_in1k.py'

model = dict(
    backbone=dict(ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=5)),
    head=dict(ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=5)))
