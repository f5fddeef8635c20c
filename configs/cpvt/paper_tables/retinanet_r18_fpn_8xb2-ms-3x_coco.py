# RetinaNet + ResNet-18, COCO 3x schedule with multi-scale training: the CNN reference row of CPVT Table 13
# (21M params, 35.4 mAP "3x, +MS", reported; the PVT paper's ResNet-18 reference figure).
# Recipe: the 1x config's model and SGD optimizer (./retinanet_r18_fpn_8xb2-1x_coco.py: mmdet's
# ResNet-18 RetinaNet), with the schedule and augmentation of the table's PVT rows
# (../retinanet_pvt-peg-t_fpn_ms-3x_coco.py, the authors' Twins retinanet_pcpvt_s_fpn_3x_ms_coco.py):
# 36 epochs, steps at 27 and 33, 500-iter warm-up; flip, then either a resize of the short side to one of
# 480..800 (step 32, long side <= 1333) or a resize to 400/500/600, an absolute-range crop of 384..600 and
# a resize to 480..800. CPVT does not say how its ResNet-18 baseline was trained at 3x; mmdet's own
# multi-scale 3x ResNet recipe (retinanet_r50_fpn_ms-640-800-3x_coco.py: short side 640..800) is the
# other candidate.
_base_ = './retinanet_r18_fpn_8xb2-1x_coco.py'

_scales = [(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333), (672, 1333),
           (704, 1333), (736, 1333), (768, 1333), (800, 1333)]
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomChoice', transforms=[
        [dict(type='RandomChoiceResize', scales=_scales, keep_ratio=True)],
        [dict(type='RandomChoiceResize', scales=[(400, 1333), (500, 1333), (600, 1333)], keep_ratio=True),
         dict(type='RandomCrop', crop_type='absolute_range', crop_size=(384, 600), allow_negative_crop=True),
         dict(type='RandomChoiceResize', scales=_scales, keep_ratio=True)],
    ]),
    dict(type='PackDetInputs')
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    # end=501: mmcv 1.x's 500-iteration warm-up (see the 1x config)
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[27, 33], gamma=0.1)
]
