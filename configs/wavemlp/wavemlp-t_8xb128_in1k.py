# Wave-MLP-T, paper Table 1/2: 17M params, 2.4G FLOPs, 80.6 top-1 (reported; official README 80.9).
# Official recipe (paper Sec. 4.1 = DeiT recipe; official README train command, timm train.py):
# 8 GPUs x 128 images, AdamW lr 1e-3 (batch 1024), wd 0.05, eps 1e-8, 300 epochs cosine to 1e-5
# with 5 warmup epochs from 1e-6, Mixup 0.8 / CutMix 1.0, RandAugment rand-m9-mstd0.5-inc1,
# random erasing 0.25 (pixel mode), repeated augmentation, label smoothing 0.1, EMA 0.99996,
# drop path 0.1, AMP (run tools/train.py with --amp).
# Official weights: tools/model_converters/wavemlp2mmposmlp.py WaveMLP_T.pth.tar
#   checkpoints/wavemlp-t_in1k_mmposmlp.pth, then `tools/test.py <this config> <that file>`.
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
    '../_base_/runner.py',
]
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(type='mmposmlp.WaveMLP', arch='t', out_indices=(3, ), drop_path_rate=0.1),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=512,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=None),
    # official cls_init_weights: Linear trunc-normal std .02, bias 0 (convs keep torch defaults)
    init_cfg=[dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)],
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]),
)

# 8 GPUs x 128 = 1024; timm repeated augmentation (3 repeats)
train_dataloader = dict(batch_size=128, sampler=dict(type='RepeatAugSampler', shuffle=True))
# official evaluation: crop_pct 0.9 (T*/T/S/M) -> bicubic resize of the short side to 248, crop 224
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=248, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(batch_size=128, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)))
# timm: warmup 5 epochs from 1e-6, cosine to min_lr 1e-5 (per-epoch steps)
# timm create_scheduler (official train.py): 5 warm-up epochs from 1e-6, then the cosine of 300 epochs
# counted from epoch 0 to min_lr 1e-5, stepped once per epoch, and 10 cool-down epochs at 1e-5 (310 in all)
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=5, warmup_value=1e-6,
         by_epoch=True)
]
train_cfg = dict(by_epoch=True, max_epochs=310, val_interval=1)
custom_hooks = [dict(type='mmposmlp.TimmEMAHook', momentum=4e-5, priority='ABOVE_NORMAL')]  # 1 - 0.99996
auto_scale_lr = dict(base_batch_size=1024)
