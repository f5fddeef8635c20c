# Swin-T + IMLP: Table 1 (24.29M, 3.88G, 81.5, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU).
_base_ = 'mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.SwinTransformerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3)))
