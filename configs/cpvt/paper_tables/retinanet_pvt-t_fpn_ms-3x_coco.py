# RetinaNet + PVT-tiny (PVT v1: per-stage position tables, no PEG), COCO 3x + multi-scale (CPVT Table 13:
# 39.4 mAP, reported).
# Recipe and dense backbone as the +PEG+GAP row (../retinanet_pvt-peg-t_fpn_ms-3x_coco.py; CPVT B.6:
# "carefully controlled settings"); only the backbone options and its ImageNet checkpoint differ.
# Checkpoint: the official pvt_tiny.pth (github.com/whai362/PVT), downloaded by URL
# and converted on load.
_base_ = '../retinanet_pvt-peg-t_fpn_ms-3x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_tiny.pth'  # noqa
model = dict(
    backbone=dict(
        pos_embed_type='learnable',
        peg_after_block=None,
        init_cfg=dict(
            checkpoint=pretrained,
            prefix=None,  # the official file: PVT v1 keys at the top level
            # the classifier's final norm and its class token: a dense backbone has neither (as in the
            # official dense PVT v1 and mmdet); the class-token slot of the stage-4 position table is
            # dropped with it (logged), as mmdet's pvt_convert does
            ignore_keys=['norm3.*', 'cls_token'])))

# no PEG: the norms alone keep weight decay 0 (PVT v1 decays its position tables)
optim_wrapper = dict(paramwise_cfg=dict(custom_keys=dict(_delete_=True, norm=dict(decay_mult=0.))))
