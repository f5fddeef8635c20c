# Semantic FPN + PVT-small+PEG (GAP-pretrained), ADE20K 512x512 (CPVT Table 13).
# Official Twins Semantic FPN recipe: AdamW lr 1e-4, wd 1e-4, poly (power 0.9, min lr 1e-6),
# 80k iterations, batch 16; FPN 256 channels, 4 outputs.
_base_ = [
    'mmseg::_base_/models/fpn_r50.py', 'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py', 'mmseg::_base_/schedules/schedule_80k.py',
    '../_base_/runner.py',
]
crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)

custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    data_preprocessor=data_preprocessor,
    decode_head=dict(num_classes=150),
    # mmseg pushes a segmentor-level pretrained into the backbone: keep it None
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PVTPEG',
        arch='small',
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.2,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/pvt-peg-s-gap_in1k_mmposmlp.pth',
            prefix='backbone.',
            # the classifier's final norm: the dense backbone has no norm3 (official Twins dense
            # CPVTV2 never applies its final norm either)
            ignore_keys=['norm3.*'])),
    neck=dict(in_channels=[64, 128, 320, 512], out_channels=256, num_outs=4))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.0001, weight_decay=0.0001),
    clip_grad=None)
param_scheduler = [
    dict(
        type='PolyLR',
        power=0.9,
        eta_min=1e-6,
        begin=0,
        # mmcv 1.x poly: (1 - i / 80000) ** 0.9; mmengine's PolyLR divides by end - begin - 1
        end=80001,
        by_epoch=False)
]
