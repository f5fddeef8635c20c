# Mask R-CNN 1x + PVT-small (PVT v1): the PVT-Small comparison row of Wave-MLP Table 3
# and PosMLP Table 8 (44.1M / 245.1G, AP box / mask 40.4 / 37.8, reported, the same in both; PVT's own figures).
# Detector, recipe and dense backbone settings of ./mask-rcnn_pvt-t_fpn_1x_coco.py (PVT v1's Mask R-CNN 1x
# recipe: AdamW lr 1e-4, wd 1e-4); only the PVT size and its ImageNet checkpoint differ.
# Checkpoint: convert the official pvt_small.pth (github.com/whai362/PVT) with
# tools/model_converters/pcpvt2mmposmlp.py (or train the matching pvt-s_8xb128_in1k.py) to
# checkpoints/pvt-s_in1k_mmposmlp.pth.
_base_ = './mask-rcnn_pvt-t_fpn_1x_coco.py'

model = dict(backbone=dict(arch='small', init_cfg=dict(checkpoint='checkpoints/pvt-s_in1k_mmposmlp.pth')))
