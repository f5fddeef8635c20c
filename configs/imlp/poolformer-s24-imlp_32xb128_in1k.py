# PoolFormer-S24 + IMLP: Table 1 (17.15M, 2.72G, 80.7, reported).
# poolformer-s12-imlp_32xb128_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, 3x3 depthwise conv + BN +
# GELU; PoolFormer's official recipe, sources there) at the size of the upstream config
# mmpretrain::poolformer/poolformer-s24_32xb128_in1k.py (arch 's24'), from which it differs only in the FFNs
# and that recipe. Drop path 0.1 (official README), as S12.
_base_ = './poolformer-s12-imlp_32xb128_in1k.py'

model = dict(backbone=dict(arch='s24'))
