# CPVT-B (cls token head) on ImageNet-1k, CPVT Table 4 / Table 10.
# DeiT-base with the absolute position embedding removed and one PEG (depthwise 3x3,
# zero padding, residual) after each of the first five encoders ("0-5", Table 12).
# Recipe (Table 10 = DeiT): 300 epochs, batch 1024, lr 5e-4 x 1024/512, cosine, wd 0.05,
# 5 warmup epochs, label smoothing 0.1, stochastic depth 0.1, RandAugment 9/0.5, Mixup 0.8,
# CutMix 1.0, random erasing 0.25, repeated augmentation; inherited from mmpretrain's DeiT config.
_base_ = 'mmpretrain::deit/deit-base_16xb64_in1k.py'

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
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0, use_soft=True),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)))

# 8 GPUs x 128 = 1024 images per iteration.
train_dataloader = dict(batch_size=128)
auto_scale_lr = dict(base_batch_size=1024)
