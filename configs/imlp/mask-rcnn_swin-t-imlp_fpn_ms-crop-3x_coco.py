# Mask R-CNN 3x with multi-scale training, Swin-T + IMLP backbone: IMLP paper Table 6 (44M params,
# 251G FLOPs, 46.0 box AP, reported; Swin-T without IMLP: 48M, 267G, 46.0). "Other training
# settings are the same as Swin-Ti" (Appendix A.2): the Swin-T baseline's 46.0 / 50.3 box AP / AP75
# are Swin's 3x multi-scale results (Swin reports 43.7 box AP for 1x), so this is Swin's 3x recipe.
# The upstream config of the same detector without IMLP; only the backbone's FFNs differ
# (mmdet's SwinTransformer with every block's FFN an IMLP, r = 2, n = 3).
#
# Pretrained weights: as in mask-rcnn_swin-t-imlp_fpn_1x_coco.py (see its header).
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.DetSwinTransformerIMLP',
        # SyncBN for the DW block's norm: 2 images per GPU (mmengine reverts it to BN
        # when training is not distributed).
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3,
                     dw_norm_cfg=dict(type='SyncBN'))))

# The official Swin 3x schedule (Swin-Transformer-Object-Detection, mmdet 2.x: schedule_1x's 500-iteration
# warm-up from 0.001 x lr, steps at 27 and 33 of 36 epochs); mmdet 3.x's Swin config warms up over 1000
# iterations instead. mmengine's LinearLR reaches the full lr at end - 1, hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=36, by_epoch=True, milestones=[27, 33], gamma=0.1)
]
