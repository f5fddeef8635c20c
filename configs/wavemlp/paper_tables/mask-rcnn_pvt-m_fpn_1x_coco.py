# Mask R-CNN 1x + PVT-medium (PVT v1): the PVT-Medium comparison row of Wave-MLP Table 3
# and PosMLP Table 8 (63.9M / 301.7G, AP box / mask 42.0 / 39.0, reported, the same in both; PVT's own figures).
# Detector, recipe and dense backbone settings of ./mask-rcnn_pvt-t_fpn_1x_coco.py (PVT v1's Mask R-CNN 1x
# recipe: AdamW lr 1e-4, wd 1e-4); only the PVT size and its ImageNet checkpoint differ.
# Checkpoint: the official pvt_medium.pth (github.com/whai362/PVT), downloaded by URL
# and converted on load.
_base_ = './mask-rcnn_pvt-t_fpn_1x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_medium.pth'  # noqa
model = dict(backbone=dict(arch='medium', init_cfg=dict(checkpoint=pretrained)))
