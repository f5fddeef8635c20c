# Mask R-CNN 1x + ResNet-18: the ResNet18 comparison row of Wave-MLP Table 3 (31.2M / 207.3G, AP box 34.0,
# AP mask 31.2, reported; PVT's ResNet-18 reference figures).
# Model and recipe: mmdet's mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py with depth 18 (torchvision://resnet18
# weights, stem and stage 1 frozen, BN in eval mode; FPN on 64/128/256/512 channels; SGD lr 0.02, momentum 0.9,
# wd 1e-4, 12 epochs, steps at 8 and 11, 1333x800, 8 GPUs x 2 images), with the 500-iteration warm-up of
# mmdet 2.x (the PVT paper's mmdet), as our ResNet-18 RetinaNet row (../../cpvt/paper_tables/
# retinanet_r18_fpn_8xb2-1x_coco.py: mmdet's own retinanet_r18_fpn_1x_coco.py) does.
_base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', '../../_base_/runner.py']

model = dict(
    backbone=dict(depth=18, init_cfg=dict(type='Pretrained', checkpoint='torchvision://resnet18')),
    neck=dict(in_channels=[64, 128, 256, 512]))

# mmcv 1.x warms up linearly to the full lr at iteration 500 (lr x (0.001 + 0.999 i / 500)); mmengine's
# LinearLR reaches it at end - 1, hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
