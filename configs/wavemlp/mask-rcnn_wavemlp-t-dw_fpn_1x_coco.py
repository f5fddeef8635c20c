# Mask R-CNN 1x with Wave-MLP-T; paper Table 3 (reported): 35.2M / 214.6G, 41.5 APb / 38.2 APm.
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: official WaveMLP_T_dw (T*) weights converted to checkpoints/wavemlp-t-dw_in1k_mmposmlp.pth.
# The detector and recipe of mask-rcnn_wavemlp-t_fpn_1x_coco.py; only the backbone differs.
_base_ = './mask-rcnn_wavemlp-t_fpn_1x_coco.py'

model = dict(backbone=dict(arch='t-dw', init_cfg=dict(checkpoint='checkpoints/wavemlp-t-dw_in1k_mmposmlp.pth')))
