# Mask R-CNN 3x with multi-scale + crop augmentation (beyond the paper, for users who want the
# stronger schedule): mmdet's Swin-T 3x recipe (36 epochs, DETR-style multi-scale/crop) with
# the PosMLP-T backbone and the paper's AdamW lr 1e-4 / weight decay 0.067.
_base_ = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

pretrained = 'checkpoints/posmlp-t_in1k_mmposmlp.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PosMLP',
        arch='tiny',
        shift=True,
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.2,
        norm_eval=True,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[96, 192, 384, 768]))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.067),
    paramwise_cfg=dict(custom_keys={
        'norm': dict(decay_mult=0.),
        '.gate.': dict(decay_mult=0.),
    }))
