# Mask R-CNN 3x + multi-scale training + PVT-large (PVT v1): the PVT-Large comparison row of Wave-MLP Table 9
# (AP box / mask 44.5 / 40.7, reported; PVT's own figures). Table 9 prints 71.1M / 345.7G, Table 3's RetinaNet
# PVT-Large figures; this Mask R-CNN measures 81.02M, as Table 3's Mask R-CNN PVT-Large (81.0M).
# The schedule and multi-scale pipeline of ./mask-rcnn_pvt-t_fpn_ms-3x_coco.py (= our Wave-MLP 3x rows, like for
# like) on the detector of ./mask-rcnn_pvt-l_fpn_1x_coco.py; only the PVT size and its checkpoint differ.
_base_ = './mask-rcnn_pvt-t_fpn_ms-3x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_large.pth'  # noqa
model = dict(backbone=dict(arch='large', init_cfg=dict(checkpoint=pretrained)))
