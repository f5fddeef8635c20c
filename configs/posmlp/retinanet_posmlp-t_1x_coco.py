# RetinaNet 1x with a PosMLP-T backbone (paper Table 8): same protocol as Mask R-CNN 1x.
# As for Swin in mmdet, the stride-8/16/32 stages feed the FPN (start_level 0 over them),
# P6/P7 come from the last input (add_extra_convs='on_input').
# Deviation from the reference recipe (deliberate): norms and the gating units' positional parameters
# ('.gate.': GQPE centres/spreads, token biases, LRPE tables) get no weight decay, as Swin's recipes
# exempt their position tables.
_base_ = ['mmdet::retinanet/retinanet_r50_fpn_1x_coco.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

pretrained = 'checkpoints/posmlp-t_in1k_mmposmlp.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PosMLP',
        arch='tiny',
        shift=True,
        out_indices=(1, 2, 3),
        drop_path_rate=0.1,
        norm_eval=True,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[192, 384, 768], start_level=0, num_outs=5))

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
