# RetinaNet + PVT-tiny+GAP (per-stage position tables, no PEG; GAP-pretrained), COCO 3x + multi-scale (CPVT
# Table 13: 39.7 mAP, reported).
# Recipe and dense backbone as the +PEG+GAP row (../retinanet_pvt-peg-t_fpn_ms-3x_coco.py; CPVT B.6:
# "carefully controlled settings"); only the backbone options and its ImageNet checkpoint differ.
# Checkpoint: train pvt-t-gap_8xb128_in1k.py and keep its weights as
# checkpoints/pvt-t-gap_in1k_mmposmlp.pth.
_base_ = '../retinanet_pvt-peg-t_fpn_ms-3x_coco.py'

model = dict(
    backbone=dict(
        pos_embed_type='learnable',
        peg_after_block=None,
        init_cfg=dict(
            checkpoint='checkpoints/pvt-t-gap_in1k_mmposmlp.pth',
            # the classifier's final norm: the dense backbone has none
            ignore_keys=['norm3.*'])))

# no PEG: the norms alone keep weight decay 0 (PVT v1 decays its position tables)
optim_wrapper = dict(paramwise_cfg=dict(custom_keys=dict(_delete_=True, norm=dict(decay_mult=0.))))
