# Swin-B + IMLP* (n = 5): Table 1 (75.45M, 13.34G, 83.4, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 5x5 depthwise conv + BN + GELU).
_base_ = 'mmpretrain::swin_transformer/swin-base_16xb64_in1k.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.SwinTransformerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=5)))

# The official Swin trainer's schedule and clipping (see swin-t-imlp_16xb64_in1k.py for the sources).
optim_wrapper = dict(clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=20, warmup_value=1e-6,
         warmup_prefix=True, lag=1, by_epoch=True, convert_to_iter_based=True)
]
