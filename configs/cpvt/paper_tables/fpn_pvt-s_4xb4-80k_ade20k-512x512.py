# Semantic FPN + PVT-small (PVT v1: per-stage position tables, no PEG), ADE20K 512x512, 80k iterations (CPVT
# Table 13: 39.8 mIoU, reported).
# Recipe and dense backbone as the PVT-small+PEG+GAP row (../fpn_pvt-peg-s_4xb4-80k_ade20k-512x512.py; CPVT
# B.6: "carefully controlled settings"); only the backbone options and its ImageNet checkpoint differ.
# Checkpoint: train pvt-s_8xb128_in1k.py, or convert the official pvt_small.pth (github.com/whai362/PVT)
# with tools/model_converters/pcpvt2mmposmlp.py, and keep its weights as
# checkpoints/pvt-s_in1k_mmposmlp.pth.
_base_ = '../fpn_pvt-peg-s_4xb4-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(
        pos_embed_type='learnable',
        peg_after_block=None,
        init_cfg=dict(
            checkpoint='checkpoints/pvt-s_in1k_mmposmlp.pth',
            # the classifier's final norm and its class token: a dense backbone has neither (as in the
            # official dense PVT v1 and mmdet); the class-token slot of the stage-4 position table is
            # dropped with it (logged), as mmdet's pvt_convert does
            ignore_keys=['norm3.*', 'cls_token'])))
