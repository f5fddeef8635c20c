# DeiT-S + IMLP: Table 1 (18.84M, 3.93G, 80.0, reported).
# deit-ti-imlp_4xb256_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU;
# DeiT's official recipe, sources there) at the size of the upstream config
# mmpretrain::deit/deit-small_4xb256_in1k.py (arch 'deit-small', 384-wide head), from which it differs only in
# the FFNs and that recipe.
_base_ = './deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(arch='deit-small'), head=dict(in_channels=384))
