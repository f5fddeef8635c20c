# Mask R-CNN 3x + multi-scale training + ResNet-18: the ResNet18 comparison row of Wave-MLP Table 9 (31.2M /
# 207.3G, AP box 36.9, AP mask 33.6, reported; PVT's ResNet-18 reference figures).
# Model and recipe: mmdet's mask_rcnn/mask-rcnn_r50_fpn_ms-poly-3x_coco.py (the config of the table's ResNet50
# row, unchanged: SGD lr 0.02, the training set repeated 3 times over 12 epochs with steps at 9 and 11, i.e.
# 36 epochs with steps at 27 and 33; shorter side sampled in [640, 800], longer side <= 1333; polygon masks)
# with the depth-18 backbone and FPN of ./mask-rcnn_r18_fpn_1x_coco.py. The ResNet rows are SGD-trained CNN
# references (as mmdet trains them); the PVT and Wave-MLP rows of the table share an AdamW 3x recipe instead.
_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_ms-poly-3x_coco.py'

model = dict(
    backbone=dict(depth=18, init_cfg=dict(type='Pretrained', checkpoint='torchvision://resnet18')),
    neck=dict(in_channels=[64, 128, 256, 512]))
