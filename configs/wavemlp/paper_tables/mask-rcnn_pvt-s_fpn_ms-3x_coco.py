# Mask R-CNN 3x + multi-scale training + PVT-small (PVT v1): the PVT-Small comparison row of Wave-MLP Table 9
# (AP box / mask 43.0 / 39.9, reported; PVT's own figures; params / FLOPs as Table 3's Mask R-CNN row).
# The schedule and multi-scale pipeline of ./mask-rcnn_pvt-t_fpn_ms-3x_coco.py (= our Wave-MLP 3x rows, like for
# like) on the detector of ./mask-rcnn_pvt-s_fpn_1x_coco.py; only the PVT size and its checkpoint differ.
_base_ = './mask-rcnn_pvt-t_fpn_ms-3x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_small.pth'  # noqa
model = dict(backbone=dict(arch='small', init_cfg=dict(checkpoint=pretrained)))
