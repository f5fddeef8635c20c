# PoolFormer-S36 + IMLP: Table 1 (24.50M, 3.97G, 81.5, reported).
# poolformer-s12-imlp_32xb128_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, 3x3 depthwise conv + BN +
# GELU; PoolFormer's official recipe, sources there) at the size of the upstream config
# mmpretrain::poolformer/poolformer-s36_32xb128_in1k.py (arch 's36'), from which it differs only in the FFNs
# and that recipe. Drop path 0.2 (official README).
_base_ = './poolformer-s12-imlp_32xb128_in1k.py'

model = dict(backbone=dict(arch='s36', drop_path_rate=0.2))
