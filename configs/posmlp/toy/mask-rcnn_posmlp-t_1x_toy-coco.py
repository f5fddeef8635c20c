# The headline Mask R-CNN PosMLP-T config on the generated toy COCO (data/toy/coco, written by
# `python tools/misc/make_toy_datasets.py --out data/toy`): same model and optimiser, small
# images, a short schedule, no ImageNet weights. Used by `make demo` and the tests.
_base_ = '../mask-rcnn_posmlp-t_1x_coco.py'

data_root = 'data/toy/coco/'
img_scale = (416, 320)
# the toy annotations use 3 real COCO categories; the metric maps labels through them
metainfo = dict(classes=('person', 'bicycle', 'car'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

model = dict(backbone=dict(init_cfg=None, norm_eval=False),
             roi_head=dict(bbox_head=dict(num_classes=3), mask_head=dict(num_classes=3)))
optim_wrapper = dict(optimizer=dict(lr=4e-4))
max_epochs = 6
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=8),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[5], gamma=0.1),
]
default_hooks = dict(logger=dict(interval=4), checkpoint=dict(interval=max_epochs))
