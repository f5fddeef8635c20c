# RetinaNet Wave-MLP-T on the generated toy COCO (see ../../posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py):
# same model and optimiser, no ImageNet weights, plain BN (one process).
_base_ = '../retinanet_wavemlp-t_fpn_1x_coco.py'

data_root = 'data/toy/coco/'
img_scale = (416, 320)
# the toy annotations use 3 real COCO categories; the metric maps labels through them
metainfo = dict(classes=('person', 'bicycle', 'car'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

model = dict(backbone=dict(init_cfg=None, norm_cfg=dict(type='BN', requires_grad=True),
                           phase_norm_cfg=dict(type='BN', requires_grad=True)),
             bbox_head=dict(num_classes=3))
max_epochs = 2
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=8)]
default_hooks = dict(logger=dict(interval=4), checkpoint=dict(interval=max_epochs))
