# Swin-B + IMLP* (n = 5): Table 1 (75.45M, 13.34G, 83.4, reported).
# swin-t-imlp_16xb64_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, here a 5x5 depthwise conv + BN +
# GELU; the official Swin trainer's schedule and clipping, sources there) at the size of the upstream config
# mmpretrain::swin_transformer/swin-base_16xb64_in1k.py (arch 'base', drop path 0.5, 1024-wide head), from which
# it differs only in the FFNs and that recipe.
_base_ = './swin-t-imlp_16xb64_in1k.py'

model = dict(
    backbone=dict(arch='base', drop_path_rate=0.5, ffn_cfg=dict(kernel_size=5)),
    head=dict(in_channels=1024))
