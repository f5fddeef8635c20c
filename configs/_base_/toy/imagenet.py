# Toy ImageNet (python tools/misc/make_toy_datasets.py --out data/toy): 64x64 images of 4 real ImageNet
# classes (indices 0..3). Keys prefixed `toy_in1k_` (see coco_instance.py). Toy variant of an mmpretrain config:
#
#   _base_ = ['mmpretrain::resnet/resnet18_8xb32_in1k.py', '../_base_/toy/imagenet.py']
#   train_dataloader = _base_.toy_in1k_train_dataloader
#   val_dataloader = _base_.toy_in1k_val_dataloader
#   test_dataloader = _base_.toy_in1k_val_dataloader
toy_in1k_root = 'data/toy/imagenet'
toy_in1k_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=56),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
toy_in1k_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=64, edge='short'),
    dict(type='CenterCrop', crop_size=56),
    dict(type='PackInputs'),
]
toy_in1k_train_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=toy_in1k_root, split='train', pipeline=toy_in1k_train_pipeline))
toy_in1k_val_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(data_root=toy_in1k_root, split='val', pipeline=toy_in1k_test_pipeline))
