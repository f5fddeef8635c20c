# Toy COCO instances (python tools/misc/make_toy_datasets.py --out data/toy): 3 real COCO classes
# (person/bicycle/car) in ~416x320 images. Every key is prefixed `toy_coco_`, because two files listed in
# one `_base_` may not define the same key. A toy variant of any mmdet config:
#
#   _base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', '../_base_/toy/coco_instance.py']
#   train_dataloader = _base_.toy_coco_train_dataloader
#   val_dataloader = _base_.toy_coco_val_dataloader
#   test_dataloader = _base_.toy_coco_val_dataloader
#   val_evaluator = _base_.toy_coco_val_evaluator
#   test_evaluator = _base_.toy_coco_val_evaluator
toy_coco_root = 'data/toy/coco/'
toy_coco_scale = (416, 320)
toy_coco_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=toy_coco_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
toy_coco_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=toy_coco_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
toy_coco_train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=toy_coco_root, ann_file='annotations/instances_train2017.json',
                 data_prefix=dict(img='train2017/'), pipeline=toy_coco_train_pipeline))
toy_coco_val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=toy_coco_root, ann_file='annotations/instances_val2017.json',
                 data_prefix=dict(img='val2017/'), pipeline=toy_coco_test_pipeline))
toy_coco_val_evaluator = dict(ann_file=toy_coco_root + 'annotations/instances_val2017.json')
