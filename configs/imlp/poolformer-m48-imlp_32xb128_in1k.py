# PoolFormer-M48 + IMLP* (n = 5): Table 1 (58.62M, 9.46G, 82.3, reported).
# poolformer-m36-imlp_32xb128_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, here a 5x5 depthwise conv +
# BN + GELU; PoolFormer's official recipe and the medium models' test resize, sources there) at the size of the
# upstream config mmpretrain::poolformer/poolformer-m48_32xb128_in1k.py (arch 'm48'), from which it differs only
# in the FFNs and that recipe. Drop path 0.4 (official README).
_base_ = './poolformer-m36-imlp_32xb128_in1k.py'

model = dict(backbone=dict(arch='m48', drop_path_rate=0.4, ffn_cfg=dict(kernel_size=5)))
