# CPVT-B (cls token head) on ImageNet-1k, CPVT Table 4.
# DeiT-base with the absolute position embedding removed and one PEG (depthwise 3x3, zero
# padding, residual) after each of the first five encoders ("0-5", Table 12).
# Recipe = DeiT (Table 10): 300 epochs, batch 1024, lr 5e-4 x 1024/512, cosine, wd 0.05, 5 warm-up
# epochs, label smoothing 0.1, stochastic depth 0.1, RandAugment 9/0.5, Mixup 0.8, CutMix 1.0,
# random erasing 0.25, repeated augmentation; data pipeline from mmpretrain's DeiT config.
_base_ = ['mmpretrain::deit/deit-tiny_4xb256_in1k.py', '../_base_/runner.py']

custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.CPVT',
        arch='base',
        peg_positions=(0, 1, 2, 3, 4),
        with_cls_token=True,
        out_type='cls_token',
        final_norm=True,
        drop_path_rate=0.1),
    neck=None,
    head=dict(
        _delete_=True,
        type='LinearClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')))

# 8 GPUs x 128 = 1024 images per iteration; DeiT's repeated augmentation.
train_dataloader = dict(batch_size=128, sampler=dict(type='RepeatAugSampler', shuffle=True))

# Table 10: CPVT-B is trained with LAMB (AdamW is not always stable for the base model). The
# paper gives no separate LAMB learning rate; we keep the DeiT-scaled lr 5e-4 x 1024 / 512.
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='Lamb', lr=5e-4 * 1024 / 512, weight_decay=0.05),
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pegs.': dict(decay_mult=0.0)
        }),
    clip_grad=None)

# DeiT main.py: timm cosine (300 epochs, counted from epoch 0) with 5 warm-up epochs from 1e-6 to min_lr
# 1e-5, stepped once per epoch; main.py trains args.epochs = 300 epochs (no cool-down epochs)
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=5, warmup_value=1e-6,
         by_epoch=True)
]
train_cfg = dict(by_epoch=True, max_epochs=300)
auto_scale_lr = dict(base_batch_size=1024)
