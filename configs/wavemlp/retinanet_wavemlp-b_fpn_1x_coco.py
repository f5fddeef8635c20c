# RetinaNet 1x with Wave-MLP-B; paper Table 3 (reported): 66.1M / 333.9G, 44.2 AP.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: no official B weights; pretrain wavemlp-b_8xb128_in1k.py -> checkpoints/wavemlp-b_in1k_mmposmlp.pth.
# The detector and recipe of retinanet_wavemlp-s_fpn_1x_coco.py; only the backbone and the FPN's input widths differ.
_base_ = './retinanet_wavemlp-s_fpn_1x_coco.py'

model = dict(
    backbone=dict(arch='b', init_cfg=dict(checkpoint='checkpoints/wavemlp-b_in1k_mmposmlp.pth')),
    neck=dict(in_channels=[192, 384, 768]))
