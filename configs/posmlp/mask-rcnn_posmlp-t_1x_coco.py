# Mask R-CNN 1x with a PosMLP-T backbone: the paper's COCO protocol (Sec. 5.5, Table 8):
# 12 epochs, 2 images/GPU x 8 GPUs, short side 800 / long side <= 1333, AdamW lr 1e-4,
# weight decay 0.067, shifted windows on (Swin-style, "for the large resolution").
# Norms and the positional parameters of the gating units (GQPE centres/spreads, token
# biases, LRPE tables) get no weight decay, as Swin's detection recipe does for its
# position tables. The backbone starts from the converted ImageNet checkpoint:
#   python tools/model_converters/posmlp2mmposmlp.py PosMLP_T.pth checkpoints/posmlp-t_in1k_mmposmlp.pth
_base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

pretrained = 'checkpoints/posmlp-t_in1k_mmposmlp.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PosMLP',
        arch='tiny',
        shift=True,
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.1,
        norm_eval=True,  # the stem BatchNorm keeps its ImageNet statistics (2 images/GPU)
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
auto_scale_lr = dict(enable=False, base_batch_size=16)

# mmdet 2.x schedule_1x (the mmdetection the paper used; mmcv 1.x hooks): linear warm-up over 500
# iterations from 0.001 x lr, multiplied into the step schedule; mmengine's LinearLR reaches the full
# lr at end - 1, hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
