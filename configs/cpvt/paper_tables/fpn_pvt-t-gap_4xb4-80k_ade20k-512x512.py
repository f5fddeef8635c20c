# Semantic FPN + PVT-tiny+GAP (per-stage position tables, no PEG; GAP-pretrained), ADE20K 512x512, 80k
# iterations (CPVT Table 13: 36.0 mIoU, reported).
# Recipe and dense backbone as the +PEG+GAP row (../fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py; CPVT B.6:
# "carefully controlled settings"); only the backbone options and its ImageNet checkpoint differ.
# Checkpoint: train pvt-t-gap_8xb128_in1k.py and keep its weights as
# checkpoints/pvt-t-gap_in1k_mmposmlp.pth.
_base_ = '../fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(
        pos_embed_type='learnable',
        peg_after_block=None,
        init_cfg=dict(
            checkpoint='checkpoints/pvt-t-gap_in1k_mmposmlp.pth',
            # the classifier's final norm: the dense backbone has none
            ignore_keys=['norm3.*'])))
