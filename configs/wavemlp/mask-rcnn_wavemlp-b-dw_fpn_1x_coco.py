# Mask R-CNN 1x with Wave-MLP-B; paper Table 3 (reported): 75.1M / 353.2G, 45.7 APb / 27.8 APm (sic).
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: no official weights; pretrain wavemlp-b-dw_8xb128_in1k.py and save the
# classifier checkpoint as checkpoints/wavemlp-b-dw_in1k_mmposmlp.pth.
# The detector and recipe of mask-rcnn_wavemlp-b_fpn_1x_coco.py; only the backbone differs.
_base_ = './mask-rcnn_wavemlp-b_fpn_1x_coco.py'

model = dict(backbone=dict(
    phase_mode='depthwise', init_cfg=dict(checkpoint='checkpoints/wavemlp-b-dw_in1k_mmposmlp.pth')))
