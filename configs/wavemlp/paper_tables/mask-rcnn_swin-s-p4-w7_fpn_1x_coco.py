# Mask R-CNN 1x + Swin-S: the Swin-S comparison row of Wave-MLP Table 3 (69.1M / 353.8G, AP box 44.8, AP mask
# 40.9, reported; the figures PVT v2 printed for Swin-S).
# Model and recipe: mmdet's swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py (the config of the table's Swin-T row:
# AdamW lr 1e-4, wd 0.05, no decay on norms and position tables, 12 epochs, 1000-iteration warm-up) with Swin-S's
# depths 2/2/18/2 and its ImageNet-1k checkpoint, as mmdet's own
# swin/mask-rcnn_swin-s-p4-w7_fpn_amp-ms-crop-3x_coco.py sets them (drop path 0.2 kept, as there).
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', '../../_base_/runner.py']

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(backbone=dict(depths=[2, 2, 18, 2], init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
