# RetinaNet + PVT-tiny+GAP (per-stage position tables, no PEG; GAP-pretrained), COCO 1x (CPVT Table 13: 36.9
# mAP, reported).
# Recipe and dense backbone as the +PEG+GAP row (../retinanet_pvt-peg-t_fpn_1x_coco.py; CPVT B.6: "carefully
# controlled settings"); only the backbone options and its ImageNet checkpoint differ. Checkpoint: train
# pvt-t-gap_8xb128_in1k.py and keep its weights as checkpoints/pvt-t-gap_in1k_mmposmlp.pth.
_base_ = '../retinanet_pvt-peg-t_fpn_1x_coco.py'

model = dict(
    backbone=dict(
        pos_embed_type='learnable',
        peg_after_block=None,
        init_cfg=dict(
            checkpoint='checkpoints/pvt-t-gap_in1k_mmposmlp.pth',
            # the classifier's final norm: the dense backbone has none
            ignore_keys=['norm3.*'])))
