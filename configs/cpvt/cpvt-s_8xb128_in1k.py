# CPVT-S (cls token head) on ImageNet-1k, CPVT Table 4.
# DeiT-small with the absolute position embedding removed and one PEG (depthwise 3x3, zero
# padding, residual) after each of the first five encoders ("0-5", Table 12).
# Recipe = DeiT (Table 10): 300 epochs, batch 1024, lr 5e-4 x 1024/512, cosine, wd 0.05, 5 warm-up
# epochs, label smoothing 0.1, stochastic depth 0.1, RandAugment 9/0.5, Mixup 0.8, CutMix 1.0,
# random erasing 0.25, repeated augmentation; data pipeline from mmpretrain's DeiT config.
_base_ = 'mmpretrain::deit/deit-tiny_4xb256_in1k.py'

custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.CPVT',
        arch='small',
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
        in_channels=384,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')))

# 8 GPUs x 128 = 1024 images per iteration; DeiT's repeated augmentation.
train_dataloader = dict(batch_size=128, sampler=dict(type='RepeatAugSampler', shuffle=True))

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=5e-4 * 1024 / 512, weight_decay=0.05),
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pegs.': dict(decay_mult=0.0)
        }),
    clip_grad=None)

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=295, eta_min=1e-5, by_epoch=True, begin=5, end=300)
]
train_cfg = dict(by_epoch=True, max_epochs=300)
auto_scale_lr = dict(base_batch_size=1024)
