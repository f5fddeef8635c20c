# RetinaNet 1x with Wave-MLP-M; paper Table 3 (reported): 49.4M / 291.3G, 44.8 AP.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: official WaveMLP_M weights converted with
# tools/model_converters/wavemlp2mmposmlp.py to checkpoints/wavemlp-m_in1k_mmposmlp.pth.
# The detector and recipe of retinanet_wavemlp-s_fpn_1x_coco.py; only the backbone differs.
_base_ = './retinanet_wavemlp-s_fpn_1x_coco.py'

model = dict(backbone=dict(arch='m', init_cfg=dict(checkpoint='checkpoints/wavemlp-m_in1k_mmposmlp.pth')))
