# Semantic FPN with Wave-MLP-T on ADE20K; paper Table 4 (reported): 19.3M / 131G, 41.2 mIoU
# (FLOPs at 2048x512). Recipe (paper Sec. 4.3, PVT): 40k iterations, batch 32 (4 GPUs x 8),
# AdamW lr 1e-4 wd 1e-4, poly decay power 0.9, 512x512 random crops, test shorter side 512.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: official WaveMLP_T weights converted with
# tools/model_converters/wavemlp2mmposmlp.py to checkpoints/wavemlp-t_in1k_mmposmlp.pth.
# The other sizes and the depthwise (-dw) variants inherit this segmentor and recipe.
_base_ = [
    'mmseg::_base_/models/fpn_r50.py', 'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py', 'mmseg::_base_/schedules/schedule_40k.py',
    '../_base_/runner.py',
]
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmposmlp.WaveMLP',
        arch='t',
        out_indices=(0, 1, 2, 3),
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        phase_norm_cfg=dict(type='SyncBN', requires_grad=True),
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/wavemlp-t_in1k_mmposmlp.pth')),
    neck=dict(in_channels=[64, 128, 320, 512]),
    decode_head=dict(num_classes=150))

train_dataloader = dict(batch_size=8)
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.0001, weight_decay=0.0001))
# mmcv 1.x poly (the PVT recipe): (1 - i / 40000) ** 0.9; mmengine's PolyLR divides by
# end - begin - 1, hence end=40001.
param_scheduler = [
    dict(type='PolyLR', power=0.9, eta_min=0.0, begin=0, end=40001, by_epoch=False)
]
