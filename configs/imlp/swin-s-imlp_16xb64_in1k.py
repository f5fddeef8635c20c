# Swin-S + IMLP: Table 1 (42.40M, 7.49G, 83.2, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU).
_base_ = 'mmpretrain::swin_transformer/swin-small_16xb64_in1k.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.SwinTransformerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3)))

# The official Swin trainer's schedule and clipping (see swin-t-imlp_16xb64_in1k.py for the sources).
optim_wrapper = dict(clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=20, warmup_value=1e-6,
         warmup_prefix=True, lag=1, by_epoch=True, convert_to_iter_based=True)
]
