# Swin-S + IMLP: Table 1 (42.40M, 7.49G, 83.2, reported).
# swin-t-imlp_16xb64_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU;
# the official Swin trainer's schedule and clipping, sources there) at the size of the upstream config
# mmpretrain::swin_transformer/swin-small_16xb64_in1k.py (arch 'small', drop path 0.3), from which it differs
# only in the FFNs and that recipe.
_base_ = './swin-t-imlp_16xb64_in1k.py'

model = dict(backbone=dict(arch='small', drop_path_rate=0.3))
