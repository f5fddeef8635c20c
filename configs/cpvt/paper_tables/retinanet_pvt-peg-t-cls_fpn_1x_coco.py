# RetinaNet + PVT-tiny+PEG (PEGs; pretrained with PVT v1's class token), COCO 1x (CPVT Table 13: 38.0 mAP,
# reported).
# Recipe and dense backbone as the +PEG+GAP row (../retinanet_pvt-peg-t_fpn_1x_coco.py; CPVT B.6: "carefully
# controlled settings"); only the backbone options and its ImageNet checkpoint differ. Checkpoint: train
# pvt-peg-t-cls_8xb128_in1k.py and keep its weights as checkpoints/pvt-peg-t-cls_in1k_mmposmlp.pth.
_base_ = '../retinanet_pvt-peg-t_fpn_1x_coco.py'

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/pvt-peg-t-cls_in1k_mmposmlp.pth',
            # the classifier's final norm and its class token: a dense backbone has neither (as in the
            # official dense PVT v1 and mmdet)
            ignore_keys=['norm3.*', 'cls_token'])))
