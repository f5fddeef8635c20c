# RetinaNet 1x, PosMLP-S (Table 8).
_base_ = './retinanet_posmlp-t_1x_coco.py'
pretrained = 'checkpoints/posmlp-s_in1k_mmposmlp.pth'
model = dict(
    backbone=dict(arch='small', init_cfg=dict(checkpoint=pretrained)),
    neck=dict(in_channels=[256, 512, 1024]))
