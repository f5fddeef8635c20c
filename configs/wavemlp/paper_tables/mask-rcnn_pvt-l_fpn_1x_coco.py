# Mask R-CNN 1x + PVT-large (PVT v1): the PVT-Large comparison row of Wave-MLP Table 3
# (81.0M / 364.3G, AP box / mask 42.9 / 39.5, reported; PVT's own figures).
# Detector, recipe and dense backbone settings of ./mask-rcnn_pvt-t_fpn_1x_coco.py (PVT v1's Mask R-CNN 1x
# recipe: AdamW lr 1e-4, wd 1e-4); only the PVT size and its ImageNet checkpoint differ.
# Checkpoint: the official pvt_large.pth (github.com/whai362/PVT), downloaded by URL
# and converted on load.
_base_ = './mask-rcnn_pvt-t_fpn_1x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_large.pth'  # noqa
model = dict(backbone=dict(arch='large', init_cfg=dict(checkpoint=pretrained)))
