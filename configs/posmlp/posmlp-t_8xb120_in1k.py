# PosMLP-T on ImageNet-1k: the paper's recipe (Sec. 5.2) - 300 epochs, AdamW lr 1e-3 with cosine
# decay to 1e-5, weight decay 0.067, batch 120/GPU x 8, DeiT augmentations (RandAugment, Mixup,
# CutMix, random erasing), stochastic depth, EMA. Where the paper is silent the official PosMLP-T
# recipe (config/PosMLP_T.yaml) fills in: 10 warm-up epochs from 1e-5, gradient clipping 1.0,
# mixup alpha 0.5 / cutmix 1.0, label smoothing 0.1, RandAugment m6-n3-mstd1.0 (increasing),
# dropout 0.02333, EMA decay 0.99992, test crop ratio 0.9, AdamW eps 1e-5.
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/default_runtime.py',
    '../_base_/runner.py',
]
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(type='mmposmlp.PosMLP', arch='tiny', drop_path_rate=0.1, drop_rate=0.02333,
                  out_indices=(3, )),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        topk=(1, 5)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.5), dict(type='CutMix', alpha=1.0)]),
)

bgr_mean = [103.53, 116.28, 123.675]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=3, total_level=10,
         magnitude_level=6, magnitude_std=1.0, hparams=dict(pad_val=[round(x) for x in bgr_mean],
                                                             interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=bgr_mean, fill_std=[58.395, 57.12, 57.375]),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=248, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=120, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=120, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.067, eps=1e-5, betas=(0.9, 0.999)),
    # timm (the official trainer) exempts 1-D parameters and biases from weight decay
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
                       custom_keys={'.token_bias': dict(decay_mult=1.0)}),
    clip_grad=dict(max_norm=1.0))
# timm create_scheduler (official trainer): 10 warm-up epochs from 1e-5, then the cosine of 300 epochs
# counted from epoch 0, stepped once per epoch, and 10 cool-down epochs at the minimum lr (310 in all)
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=10, warmup_value=1e-5,
         by_epoch=True)
]
train_cfg = dict(by_epoch=True, max_epochs=310, val_interval=1)
val_cfg = dict()
test_cfg = dict()
custom_hooks = [dict(type='mmposmlp.TimmEMAHook', momentum=8e-5, priority='ABOVE_NORMAL')]  # decay 0.99992
auto_scale_lr = dict(base_batch_size=960)
