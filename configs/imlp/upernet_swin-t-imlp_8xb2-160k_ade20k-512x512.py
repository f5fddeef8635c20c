# UperNet 160k on ADE20K 512x512, Swin-T + IMLP backbone: IMLP paper Table 7 (56M params,
# 928G FLOPs, 45.0 mIoU, reported; Swin-T without IMLP: 60M, 945G, 44.5).
# The upstream config of the same segmentor without IMLP; only the backbone's FFNs differ
# (mmseg's SwinTransformer with every block's FFN an IMLP, r = 2, n = 3).
#
# Pretrained weights: as upstream, mmseg's converted Swin-T ImageNet checkpoint; everything
# but the FFNs loads (IMLP weights reported as newly initialised). To start from an ImageNet
# Swin-T + IMLP as the paper does, train configs/imlp/swin-t-imlp_16xb64_in1k.py and set
#   model.backbone.init_cfg=dict(type='Pretrained', checkpoint='<that .pth>')
_base_ = ['mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    pretrained=None,
    backbone=dict(
        type='mmposmlp.SegSwinTransformerIMLP',
        ffn_cfg=dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=3,
                     dw_norm_cfg=dict(type='SyncBN'))))

# The official Swin UperNet schedule (Swin-Transformer-Semantic-Segmentation, mmseg 0.x / mmcv 1.x):
# poly (power 1) over all 160k iterations to 0, multiplied during the first 1500 iterations by a
# linear warm-up from 1e-6. mmseg 1.x's Swin config starts its poly after the warm-up instead; mmengine's
# LinearLR and PolyLR divide by end - begin - 1, hence 1501 and 160001.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1501),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=0, end=160001, by_epoch=False)
]
