# DeiT-Ti with IMLP feed-forward blocks on the generated toy ImageNet (data/toy/imagenet): same model and
# optimiser, 64x64 crops (the position table is built for 4x4 patches of 16), a few iterations.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(img_size=64))

data_root = 'data/toy/imagenet'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=72, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=64),
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
