# RetinaNet 1x with Wave-MLP-S; paper Table 3 (reported): 37.1M / 231.3G, 43.4 AP.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: official WaveMLP_S weights converted with
# tools/model_converters/wavemlp2mmposmlp.py to checkpoints/wavemlp-s_in1k_mmposmlp.pth.
# The detector and recipe of retinanet_wavemlp-t_fpn_1x_coco.py; only the backbone differs.
_base_ = './retinanet_wavemlp-t_fpn_1x_coco.py'

# S/M/B keep their arch's GroupNorm: the backbone is restated without T's SyncBN norm_cfg.
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.WaveMLP',
        arch='s',
        out_indices=(1, 2, 3),
        phase_norm_cfg=dict(type='SyncBN', requires_grad=True),
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/wavemlp-s_in1k_mmposmlp.pth')))
