# RetinaNet + PVT-medium+PEG (GAP-pretrained), COCO 1x (CPVT Table 13, "RetinaNet on COCO").
# Same recipe as mmdet's RetinaNet PVT-M (the PVT setting): AdamW lr 1e-4, wd 1e-4, 12 epochs,
# step at 8 and 11, 500-iter linear warm-up, 1333x800, batch 8 GPUs x 2.
_base_ = ['mmdet::pvt/retinanet_pvt-t_fpn_1x_coco.py', '../_base_/runner.py']

custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PVTPEG',
        arch='medium',
        out_indices=(0, 1, 2, 3),
        # official Twins detection wrapper: drop_path 0.2, no extra output norms
        drop_path_rate=0.2,
        init_cfg=dict(
            type='Pretrained',
            # ImageNet PVT-medium+PEG+GAP weights: pvt-peg-m-gap_8xb128_in1k.py, or
            # tools/model_converters/pcpvt2mmposmlp.py on the official Twins PCPVT weights
            checkpoint='checkpoints/pvt-peg-m-gap_in1k_mmposmlp.pth',
            prefix='backbone.',
            # the classifier's final norm: the dense backbone has no norm3 (official Twins dense
            # CPVTV2 never applies its final norm either)
            ignore_keys=['norm3.*'])),
    neck=dict(in_channels=[64, 128, 320, 512]))

# mmcv 1.x (the official mmdet 2.x configs) warms up linearly to the full lr at iteration 500
# (lr x (0.001 + 0.999 i / 500)); mmengine's LinearLR reaches it at end - 1, hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
