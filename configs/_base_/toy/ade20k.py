# Toy ADE20K (python tools/misc/make_toy_datasets.py --out data/toy): 160x128 images, labels in 1..150
# (0 = ignore, reduce_zero_label). Keys prefixed `toy_ade_` (see coco_instance.py for why). Toy variant:
#
#   _base_ = ['mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py', '../_base_/toy/ade20k.py']
#   crop_size = _base_.toy_ade_crop_size
#   model = dict(data_preprocessor=dict(size=crop_size))
#   train_dataloader = _base_.toy_ade_train_dataloader
#   val_dataloader = _base_.toy_ade_val_dataloader
#   test_dataloader = _base_.toy_ade_val_dataloader
toy_ade_root = 'data/toy/ade/ADEChallengeData2016'
toy_ade_crop_size = (128, 128)
toy_ade_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomCrop', crop_size=toy_ade_crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
toy_ade_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
toy_ade_train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=toy_ade_root, pipeline=toy_ade_train_pipeline,
                 data_prefix=dict(img_path='images/training', seg_map_path='annotations/training')))
toy_ade_val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=toy_ade_root, pipeline=toy_ade_test_pipeline,
                 data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation')))
