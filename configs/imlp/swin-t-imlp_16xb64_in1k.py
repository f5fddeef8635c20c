# Swin-T + IMLP: Table 1 (24.29M, 3.88G, 81.5, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU).
#
# The recipe is the official Swin trainer's (the IMLP paper trains "exactly as the original
# methods"; microsoft/Swin-Transformer config.py + lr_scheduler.py + main.py), where mmpretrain's
# Swin schedule differs from it:
# - lr: timm's CosineLRScheduler stepped every iteration, warm-up 20 epochs from 5e-7 x 1024/512 =
#   1e-6 to 1e-3 (reached at iteration 20 L, L = iterations per epoch), then a cosine over the
#   remaining 280 epochs to 5e-6 x 1024/512 = 1e-5 (WARMUP_PREFIX); main.py updates the lr after each
#   step with that step's index, so step g runs with the value for g - 1 (lag=1). mmpretrain's schedule
#   steps its cosine once per epoch and its LinearLR reaches 1e-3 one iteration early.
# - gradient clipping at norm 5 (TRAIN.CLIP_GRAD), as mmpretrain's swin-tiny_16xb64_in1k.py also sets (restated here).
# Weight decay as the official set_weight_decay (no decay for 1-D parameters, biases and the
# relative position tables) is what mmpretrain's paramwise_cfg gives: unchanged.
# swin-s-imlp_16xb64_in1k.py and swin-b-imlp_16xb64_in1k.py inherit this model and recipe.
_base_ = ['mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.SwinTransformerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3)))

optim_wrapper = dict(clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=20, warmup_value=1e-6,
         warmup_prefix=True, lag=1, by_epoch=True, convert_to_iter_based=True)
]
