# Mask R-CNN 3x + multi-scale training + ResNet-18: the ResNet18 comparison row of Wave-MLP Table 9 (31.2M /
# 207.3G, AP box 36.9, AP mask 33.6, reported; PVT's ResNet-18 reference figures).
# Model and SGD optimiser of ./mask-rcnn_r18_fpn_1x_coco.py (mmdet's ResNet Mask R-CNN with depth 18) with the
# 3x multi-scale schedule of the table's other rows (./mask-rcnn_pvt-t_fpn_ms-3x_coco.py,
# ../mask-rcnn_wavemlp-t_fpn_ms-3x_coco.py): 36 epochs, steps at 27 and 33, 500-iteration warm-up, the shorter
# side sampled in [640, 800] (longer side <= 1333). This is also mmdet's own ResNet recipe of the table's
# ResNet50 row (mask_rcnn/mask-rcnn_r50_fpn_ms-poly-3x_coco.py, which repeats the data 3 times over 12 epochs
# with steps at 9 and 11) written as 36 plain epochs. The ResNet rows are SGD-trained CNN references (as mmdet
# trains them); the PVT and Wave-MLP rows share an AdamW recipe instead.
_base_ = './mask-rcnn_r18_fpn_1x_coco.py'

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True, poly2mask=False),
    dict(type='RandomResize', scale=[(1333, 640), (1333, 800)], keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
# end=501: mmcv 1.x's 500-iteration warm-up (mmengine's LinearLR reaches the full lr at end - 1)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[27, 33], gamma=0.1),
]
