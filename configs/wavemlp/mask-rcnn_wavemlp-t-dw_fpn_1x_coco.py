# Mask R-CNN 1x with Wave-MLP-T; paper Table 3 (reported): 35.2M / 214.6G, 41.5 APb / 38.2 APm.
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: the official WaveMLP_T_dw (T*) weights, downloaded by URL and converted on load.
# The detector and recipe of mask-rcnn_wavemlp-t_fpn_1x_coco.py; only the backbone differs.
_base_ = './mask-rcnn_wavemlp-t_fpn_1x_coco.py'

pretrained = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/WaveMLP_T_dw.pth.tar'  # noqa
model = dict(backbone=dict(arch='t-dw', init_cfg=dict(checkpoint=pretrained)))
