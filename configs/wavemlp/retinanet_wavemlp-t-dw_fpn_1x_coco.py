# RetinaNet 1x with Wave-MLP-T; paper Table 3 (reported): 25.3M / 196.3G, 40.4 AP.
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: the official WaveMLP_T_dw (T*) weights, downloaded by URL and converted on load.
# The detector and recipe of retinanet_wavemlp-t_fpn_1x_coco.py; only the backbone differs.
_base_ = './retinanet_wavemlp-t_fpn_1x_coco.py'

pretrained = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/WaveMLP_T_dw.pth.tar'  # noqa
model = dict(backbone=dict(arch='t-dw', init_cfg=dict(checkpoint=pretrained)))
