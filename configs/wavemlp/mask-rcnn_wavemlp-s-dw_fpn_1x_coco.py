# Mask R-CNN 1x with Wave-MLP-S; paper Table 3 (reported): 47.0M / 250.3G, 44.0 APb / 40.0 APm.
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: no official weights; pretrain wavemlp-s-dw_8xb128_in1k.py and save the
# classifier checkpoint as checkpoints/wavemlp-s-dw_in1k_mmposmlp.pth.
# The detector and recipe of mask-rcnn_wavemlp-s_fpn_1x_coco.py; only the backbone differs.
_base_ = './mask-rcnn_wavemlp-s_fpn_1x_coco.py'

model = dict(backbone=dict(
    phase_mode='depthwise', init_cfg=dict(checkpoint='checkpoints/wavemlp-s-dw_in1k_mmposmlp.pth')))
