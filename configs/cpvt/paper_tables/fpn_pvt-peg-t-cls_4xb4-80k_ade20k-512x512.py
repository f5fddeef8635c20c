# Semantic FPN + PVT-tiny+PEG (PEGs; pretrained with PVT v1's class token), ADE20K 512x512, 80k iterations
# (CPVT Table 13: 38.0 mIoU, reported).
# Recipe and dense backbone as the +PEG+GAP row (../fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py; CPVT B.6:
# "carefully controlled settings"); only the backbone options and its ImageNet checkpoint differ.
# Checkpoint: train pvt-peg-t-cls_8xb128_in1k.py and keep its weights as
# checkpoints/pvt-peg-t-cls_in1k_mmposmlp.pth.
_base_ = '../fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/pvt-peg-t-cls_in1k_mmposmlp.pth',
            # the classifier's final norm and its class token: a dense backbone has neither (as in the
            # official dense PVT v1 and mmdet)
            ignore_keys=['norm3.*', 'cls_token'])))
