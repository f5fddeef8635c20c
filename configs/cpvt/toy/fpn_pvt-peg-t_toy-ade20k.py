# Semantic FPN PVT-T+PEG on the generated toy ADE20K (data/toy/ade/ADEChallengeData2016):
# same model and optimiser, 128x128 crops, a few iterations, no ImageNet weights.
_base_ = '../fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py'

data_root = 'data/toy/ade/ADEChallengeData2016'
crop_size = (128, 128)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(256, 128), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 128), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
model = dict(data_preprocessor=dict(size=crop_size), backbone=dict(init_cfg=None))
param_scheduler = [dict(type='PolyLR', power=0.9, eta_min=1e-6, begin=0, end=8, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=8, val_interval=8)
default_hooks = dict(logger=dict(interval=4), checkpoint=dict(by_epoch=False, interval=8))
