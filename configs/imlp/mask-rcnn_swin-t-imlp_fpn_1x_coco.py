# Mask R-CNN 1x, Swin-T + IMLP backbone: IMLP paper Table 6 (44M params, 251G FLOPs,
# 46.0 box AP, reported; Swin-T without IMLP: 48M, 267G, 46.0).
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
_base_ = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmposmlp.DetSwinTransformerIMLP',
        # SyncBN for the DW block's norm: 2 images per GPU (mmengine reverts it to BN
        # when training is not distributed).
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3,
                     dw_norm_cfg=dict(type='SyncBN'))))
