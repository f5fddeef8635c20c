# PoolFormer-M36 + IMLP: Table 1 (44.19M, 6.93G, 82.1, reported).
# poolformer-s12-imlp_32xb128_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, 3x3 depthwise conv + BN +
# GELU; PoolFormer's official recipe, sources there) at the size of the upstream config
# mmpretrain::poolformer/poolformer-m36_32xb128_in1k.py (arch 'm36', 768-wide head), from which it differs only
# in the FFNs and that recipe. Drop path 0.3 (official README).
# Test: crop_pct 0.95 (official default_cfgs) -> bicubic (PIL) resize of the short side to
# floor(224 / 0.95) = 235, centre crop 224 (mmpretrain's medium PoolFormer configs resize to 236).
_base_ = './poolformer-s12-imlp_32xb128_in1k.py'

model = dict(backbone=dict(arch='m36', drop_path_rate=0.3), head=dict(in_channels=768))

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=235, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
