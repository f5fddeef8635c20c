# PoolFormer-S12 + IMLP: Table 1 (9.80M, 1.48G, 77.2, reported).
# The upstream config of the same model without IMLP; only the backbone's FFNs differ:
# every block's MLP becomes an IMLP (r = 2, two AGeLUs, 3x3 depthwise conv + BN + GELU).
# Recipe: the paper trains "exactly as the original methods" (IMLP Sec. 4, Implementation details),
# i.e. PoolFormer's official train.py (sail-sg/poolformer, timm's train.py) with its README command and
# the paper's batch: 32 x 128 = 4096 images, AdamW lr 4e-3 (README rule lr = batch / 1024 x 1e-3), wd 0.05
# without decay on 1-D parameters and biases (timm create_optimizer), eps 1e-8, 300 cosine epochs + 10
# cool-down epochs at the minimum lr (timm create_scheduler: 310 epochs in all), 5 warm-up epochs from
# 1e-6, min lr 1e-5, stepped once per epoch (mmposmlp.TimmCosineLR), no gradient clipping, no EMA,
# drop path 0.1 (README: 0.1 / 0.1 / 0.2 / 0.3 / 0.4 for S12 / S24 / S36 / M36 / M48), label smoothing
# 0.1, Mixup 0.8 / CutMix 1.0, RandAugment rand-m9-mstd0.5-inc1, random erasing 0.25.
# Test: crop_pct 0.9 (official default_cfgs) -> bicubic (PIL) resize of the short side to
# floor(224 / 0.9) = 248, centre crop 224.
# Restored against mmpretrain's PoolFormer config: Mixup/CutMix and label smoothing (none), drop path
# (0.1 for every size), 5 warm-up epochs (20), no clipping (5.0), 310 epochs (300), a trained stem
# (mmpretrain's PoolFormer freezes the patch embedding: frozen_stages=0).
# Kept deviation: the official --train-interpolation random (a random PIL filter per image) is bicubic here.
# The other sizes inherit this model and recipe (poolformer-m48 through poolformer-m36).
_base_ = ['mmpretrain::poolformer/poolformer-s12_32xb128_in1k.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.PoolFormerIMLP',
        frozen_stages=-1,  # mmpretrain's default 0 freezes the stem conv; the official code trains it
        drop_path_rate=0.1,
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3)),
    head=dict(loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]),
)

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=248, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
optim_wrapper = dict(clip_grad=None)
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=5, warmup_value=1e-6,
         by_epoch=True)
]
train_cfg = dict(by_epoch=True, max_epochs=310, val_interval=1)
