# Mask R-CNN 1x, Swin-T + IMLP backbone (not a paper row: the IMLP paper's Table 6 figures,
# Swin-T 46.0 / 50.3 box AP / AP75, are Swin's 3x multi-scale results, so its row is
# mask-rcnn_swin-t-imlp_fpn_ms-crop-3x_coco.py; Swin reports 43.7 box AP for Swin-T 1x).
# The upstream config of the same detector without IMLP; only the backbone's FFNs differ
# (mmdet's SwinTransformer with every block's FFN an IMLP, r = 2, n = 3).
#
# Pretrained weights: as upstream, the official Swin-T ImageNet checkpoint; everything but
# the FFNs loads (the IMLP weights are reported as newly initialised). The paper starts
# from its ImageNet Swin-T + IMLP; to do so, train configs/imlp/swin-t-imlp_16xb64_in1k.py
# and set
#   model.backbone.convert_weights=False,
#   model.backbone.init_cfg=dict(type='Pretrained', checkpoint='<that .pth>')
# (mmpretrain and mmdet Swin share the key layout; the 'backbone.' prefix is stripped).
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.DetSwinTransformerIMLP',
        # SyncBN for the DW block's norm: 2 images per GPU (mmengine reverts it to BN
        # when training is not distributed).
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3,
                     dw_norm_cfg=dict(type='SyncBN'))))

# The official Swin 1x schedule (Swin-Transformer-Object-Detection, mmdet 2.x schedule_1x, mmcv 1.x
# hooks): linear warm-up over 500 iterations from 0.001 x lr, multiplied into the step schedule;
# mmdet 3.x's Swin config warms up over 1000. mmengine's LinearLR reaches the full lr at end - 1,
# hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
