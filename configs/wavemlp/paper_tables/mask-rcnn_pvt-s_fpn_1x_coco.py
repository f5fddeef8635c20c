# Mask R-CNN 1x + PVT-small (PVT v1): the PVT-Small comparison row of Wave-MLP Table 3
# and PosMLP Table 8 (44.1M / 245.1G, AP box / mask 40.4 / 37.8, reported, the same in both; PVT's own figures).
# Detector, recipe and dense backbone settings of ./mask-rcnn_pvt-t_fpn_1x_coco.py (PVT v1's Mask R-CNN 1x
# recipe: AdamW lr 1e-4, wd 1e-4); only the PVT size and its ImageNet checkpoint differ.
# Checkpoint: the official pvt_small.pth (github.com/whai362/PVT), downloaded by URL
# and converted on load.
_base_ = './mask-rcnn_pvt-t_fpn_1x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_small.pth'  # noqa
model = dict(backbone=dict(arch='small', init_cfg=dict(checkpoint=pretrained)))
