# Mask R-CNN 3x with multi-scale training, Swin-T: IMLP paper Table 6 host row (48M params, 267G FLOPs,
# 46.0 box AP, reported; Swin's own 3x multi-scale result). mask-rcnn_swin-t-imlp_fpn_ms-crop-3x_coco.py
# without IMLP: mmdet's SwinTransformer as in mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py (its
# checkpoints load unchanged) with exactly the +IMLP config's recipe, the official Swin 3x schedule
# (Swin-Transformer-Object-Detection, mmdet 2.x): a 500-iteration warm-up (mmdet 3.x's config: 1000).
# Form: inherits the upstream config and restates what the +IMLP config changes besides its backbone (the
# schedule below): here the recipe is one field where the upstream backbone is 16 keys and a checkpoint URL.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config (a drift between
# the two fails it) and the backbone equal to the upstream one. custom_imports as in the +IMLP config, so the
# configs stay equal (this model needs no mmposmlp type).
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py', '../../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

# mmengine's LinearLR reaches the full lr at end - 1, hence end=501.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=501),
    dict(type='MultiStepLR', begin=0, end=36, by_epoch=True, milestones=[27, 33], gamma=0.1)
]
