# Mask R-CNN 1x with Wave-MLP-B; paper Table 3 (reported): 75.1M / 353.2G, 45.7 APb / 27.8 APm (sic).
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: no official weights; pretrain wavemlp-b-dw_8xb128_in1k.py and save the
# classifier checkpoint as checkpoints/wavemlp-b-dw_in1k_mmposmlp.pth.
_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.WaveMLP',
        arch='b',
        phase_mode='depthwise',
        out_indices=(0, 1, 2, 3),
        phase_norm_cfg=dict(type='SyncBN', requires_grad=True),
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/wavemlp-b-dw_in1k_mmposmlp.pth')),
    neck=dict(in_channels=[96, 192, 384, 768]))

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
