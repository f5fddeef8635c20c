# RetinaNet 1x + Swin-S: the Swin-S comparison row of Wave-MLP Table 3 (59.8M / 334.8G, AP 44.5, reported; the
# figures PVT v2 printed for Swin-S).
# Model and recipe: mmdet's swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py (the config of the table's Swin-T row)
# with Swin-S's depths 2/2/18/2 and its ImageNet-1k checkpoint, as mmdet's own
# swin/mask-rcnn_swin-s-p4-w7_fpn_amp-ms-crop-3x_coco.py sets them; everything else (drop path 0.2, FPN on
# stages 2-4, mmdet's Swin-T RetinaNet optimiser) is the Swin-T config's. Assumed: the reported figures may come
# from another optimiser (PVT v2 trained its rows with AdamW).
_base_ = ['mmdet::swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py', '../../_base_/runner.py']

pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(backbone=dict(depths=[2, 2, 18, 2], init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
