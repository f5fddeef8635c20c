# DeiT-Ti + IMLP: Table 1 (5.00M params, 1.10G FLOPs, 72.6 top-1, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU).
# Recipe: the paper trains "exactly as the original methods" (IMLP Sec. 4, Implementation details),
# i.e. DeiT's main.py defaults (facebookresearch/deit main.py; DeiT paper Table 9): batch 1024 (4 x 256),
# AdamW lr 5e-4 x 1024/512, wd 0.05 without decay on 1-D parameters, biases, cls_token and pos_embed
# (timm create_optimizer + the model's no_weight_decay()), eps 1e-8, 300 epochs, 5 warm-up epochs from
# 1e-6, timm cosine to 1e-5 stepped once per epoch (mmposmlp.TimmCosineLR), no gradient clipping,
# drop path 0.1, label smoothing 0.1, Mixup 0.8 / CutMix 1.0 (switch prob 0.5), RandAugment
# rand-m9-mstd0.5-inc1, random erasing 0.25, repeated augmentation (3 repeats); test: bicubic (PIL) resize
# of the short side to int(224 / 0.875) = 256, centre crop 224.
# Restored against mmpretrain's DeiT config: drop path 0.1 (mmpretrain: 0), 5 warm-up epochs (20), no clipping (5.0),
# repeated augmentation (none), the per-epoch timm cosine (per-iteration LinearLR + CosineAnnealingLR).
# DeiT keeps an EMA of the weights (decay 0.99996) but evaluates and reports the raw model, so there is
# no EMAHook here (it would evaluate the EMA weights instead).
# deit-s-imlp_4xb256_in1k.py and deit-b-imlp_16xb64_in1k.py inherit this model and recipe.
_base_ = ['mmpretrain::deit/deit-tiny_4xb256_in1k.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.VisionTransformerIMLP',
        drop_path_rate=0.1,
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3)))

train_dataloader = dict(sampler=dict(type='RepeatAugSampler', num_repeats=3, shuffle=True))
optim_wrapper = dict(clip_grad=None)
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=5, warmup_value=1e-6,
         by_epoch=True)
]
train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
custom_hooks = []
