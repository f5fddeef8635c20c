# DeiT-B + IMLP* (n = 5): Table 1 (73.66M, 14.92G, 81.8, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 5x5 depthwise conv + BN + GELU).
_base_ = 'mmpretrain::deit/deit-base_16xb64_in1k.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.VisionTransformerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=5)))
