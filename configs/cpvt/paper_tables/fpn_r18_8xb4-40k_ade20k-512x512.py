# Semantic FPN + ResNet-18, ADE20K 512x512: the CNN reference row of CPVT Table 13 (16M params, 32.9 mIoU,
# reported; the PVT paper's ResNet-18 reference figure).
# Recipe: the one that figure was trained with, PVT's segmentation/configs/sem_fpn/fpn_r18_512x512_40k_ade20k.py
# (github.com/whai362/PVT, mmseg 0.x): mmseg's Semantic FPN with ResNetV1c-18 (deep stem, SyncBN) from
# open-mmlab://resnet18_v1c, neck in_channels [64, 128, 256, 512]; SGD lr 0.02, momentum 0.9, wd 5e-4, poly
# (power 0.9, min lr 0), 40k iterations at batch 32 (8 GPUs x 4; PVT halves mmseg's 80k at batch 16). Not the
# Twins 80k AdamW recipe of the PVT rows: the paper reuses PVT's ResNet-18 figure.
# mmseg 1.x has no ResNet-18 Semantic FPN config; this is mmseg's fpn_r50 with depth 18.
_base_ = [
    'mmseg::_base_/models/fpn_r50.py', 'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py', 'mmseg::_base_/schedules/schedule_40k.py',
    '../../_base_/runner.py',
]
crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)

model = dict(
    data_preprocessor=data_preprocessor,
    pretrained='open-mmlab://resnet18_v1c',
    backbone=dict(depth=18),
    neck=dict(in_channels=[64, 128, 256, 512]),
    decode_head=dict(num_classes=150))

optim_wrapper = dict(optimizer=dict(lr=0.02, momentum=0.9, weight_decay=0.0005), clip_grad=None)
param_scheduler = [
    dict(
        type='PolyLR',
        power=0.9,
        eta_min=0.0,
        begin=0,
        # mmcv 1.x poly: (1 - i / 40000) ** 0.9; mmengine's PolyLR divides by end - begin - 1
        end=40001,
        by_epoch=False)
]
