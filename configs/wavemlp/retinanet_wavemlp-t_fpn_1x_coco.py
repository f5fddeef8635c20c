# RetinaNet 1x with Wave-MLP-T; paper Table 3 (reported): 25.3M / 196.3G, 40.4 AP.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: official WaveMLP_T weights converted with
# tools/model_converters/wavemlp2mmposmlp.py to checkpoints/wavemlp-t_in1k_mmposmlp.pth.
# The other sizes and the depthwise (-dw) variants inherit this detector and recipe.
# As for Swin in mmdet, the stride-8/16/32 stages feed the FPN (start_level 0 over them): RetinaNet's FPN skips
# the stride-4 stage, whose output norm would get no gradient (DDP without find_unused_parameters stops).
_base_ = ['mmdet::retinanet/retinanet_r50_fpn_1x_coco.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.WaveMLP',
        arch='t',
        out_indices=(1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        phase_norm_cfg=dict(type='SyncBN', requires_grad=True),
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/wavemlp-t_in1k_mmposmlp.pth')),
    neck=dict(in_channels=[128, 320, 512], start_level=0))

# PVT recipe (paper Sec. 4.2): AdamW lr 1e-4, wd 1e-4, 12 epochs (1x), 8 GPUs x 2 images
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=0.0001, weight_decay=0.0001))
# mmdet 2.x schedule_1x, as the PVT recipe ran it (mmcv 1.x hooks): linear warm-up over 500 iterations
# from 0.001 x lr, multiplied into the step schedule; mmengine's LinearLR reaches the full lr at end - 1,
# hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
