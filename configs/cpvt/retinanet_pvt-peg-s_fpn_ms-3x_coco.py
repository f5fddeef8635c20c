# RetinaNet + PVT-small+PEG, COCO 3x schedule with multi-scale training (CPVT Table 13,
# "mAP 3x, +MS"): PVT's 3x setting, shorter side sampled in [640, 800] (longer <= 1333),
# 36 epochs, step at 27 and 33, AdamW lr 1e-4, wd 1e-4.
_base_ = './retinanet_pvt-peg-s_fpn_1x_coco.py'

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='RandomResize', scale=[(1333, 640), (1333, 800)], keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[27, 33],
        gamma=0.1)
]
