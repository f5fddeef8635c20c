# LVT-R2 + IMLP* (its class-attention head, MixToken and the token-labelling loss included) on the generated
# toy ImageNet (data/toy/imagenet): same model and optimiser, 128x128 crops (a 4x4 last grid, so MixToken
# boxes are not all empty), the recipe's RandAugment and random erasing, a few iterations.
_base_ = '../lvt-r2-imlp_8xb128_in1k.py'

data_root = 'data/toy/imagenet'
bgr_mean = [103.53, 116.28, 123.675]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=128, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9,
         magnitude_std=0.5, hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=bgr_mean, fill_std=[57.375, 57.12, 58.395]),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=133, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=128),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
                        sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True),
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs=1)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True, begin=0, end=1)]
default_hooks = dict(logger=dict(interval=2))
