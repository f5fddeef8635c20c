# PoolFormer-M48 + IMLP* (n = 5): Table 1 (58.62M, 9.46G, 82.3, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 5x5 depthwise conv + BN + GELU).
_base_ = 'mmpretrain::poolformer/poolformer-m48_32xb128_in1k.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.PoolFormerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=5)))
