# RetinaNet + ResNet-18, COCO 1x: the CNN reference row of CPVT Table 13 (21M params, 31.8 mAP, reported; the
# PVT paper's ResNet-18 reference figure).
# Recipe: mmdet's retinanet/retinanet_r18_fpn_1x_coco.py (torchvision://resnet18 weights, stem and
# stage 1 frozen, BN in eval mode; SGD lr 0.01, momentum 0.9, wd 1e-4, 12 epochs, steps at 8 and 11,
# 1333x800, batch 8 GPUs x 2), with the 500-iteration warm-up of mmdet 2.x (the PVT paper's mmdet) as the
# PVT rows' configs have it.
_base_ = ['mmdet::retinanet/retinanet_r18_fpn_1x_coco.py', '../../_base_/runner.py']

# mmcv 1.x warms up linearly to the full lr at iteration 500 (lr x (0.001 + 0.999 i / 500)); mmengine's
# LinearLR reaches it at end - 1, hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
