# RetinaNet + PVT-tiny+PEG, COCO 3x schedule with multi-scale training (CPVT Table 13,
# "mAP 3x, +MS"; the same numbers as the Twins paper's PCPVT RetinaNet 3x). Recipe of the authors'
# official config (Meituan-AutoML/Twins detection/configs/retinanet_pcpvt_s_fpn_3x_ms_coco.py, mmdet 2.x):
# 36 epochs, steps at 27 and 33, 500-iter linear warm-up, AdamW lr 1e-4, betas (0.9, 0.999), wd 0.05 with
# no decay on the PEGs (official pos_block) and on every parameter whose name contains "norm"
# (mmcv custom_keys are substring matches, as mmengine's), no clipping; DETR/Sparse-RCNN multi-scale
# augmentation: flip, then either a resize of the short side to one of 480..800 (step 32, long side
# <= 1333) or a resize to 400/500/600, an absolute-range crop of 384..600, and a resize to 480..800.
_base_ = './retinanet_pvt-peg-t_fpn_1x_coco.py'

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
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[27, 33],
        gamma=0.1)
]
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={'pegs': dict(decay_mult=0.), 'norm': dict(decay_mult=0.)}),
    clip_grad=None)
