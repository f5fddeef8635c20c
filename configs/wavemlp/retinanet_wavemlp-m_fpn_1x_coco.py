# RetinaNet 1x with Wave-MLP-M; paper Table 3 (reported): 49.4M / 291.3G, 44.8 AP.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: the official WaveMLP_M weights, downloaded by URL (once, into torch's hub cache) and converted on load.
# The detector and recipe of retinanet_wavemlp-s_fpn_1x_coco.py; only the backbone differs.
_base_ = './retinanet_wavemlp-s_fpn_1x_coco.py'

pretrained = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/WaveMLP_M.pth.tar'  # noqa
model = dict(backbone=dict(arch='m', init_cfg=dict(checkpoint=pretrained)))
