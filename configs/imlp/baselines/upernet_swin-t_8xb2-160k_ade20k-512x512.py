# UperNet 160k on ADE20K 512x512, Swin-T: IMLP paper Table 7 host row (60M params, 945G FLOPs, 44.5 mIoU,
# reported). upernet_swin-t-imlp_8xb2-160k_ade20k-512x512.py without IMLP: mmseg's SwinTransformer as in
# mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py (its checkpoints load
# unchanged) with exactly the +IMLP config's recipe, the official Swin UperNet schedule
# (Swin-Transformer-Semantic-Segmentation, mmseg 0.x): poly over all 160k iterations multiplied by a
# 1500-iteration warm-up (mmseg 1.x starts its poly after the warm-up).
# Form: inherits the upstream config and restates what the +IMLP config changes besides its backbone (the
# schedule below): here the recipe is one field where the upstream backbone is 20 keys and a checkpoint URL.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config (a drift between
# the two fails it) and the backbone equal to the upstream one. custom_imports as in the +IMLP config, so the
# configs stay equal (this model needs no mmposmlp type).
_base_ = ['mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py', '../../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

# mmengine's LinearLR and PolyLR divide by end - begin - 1, hence 1501 and 160001.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1501),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=0, end=160001, by_epoch=False)
]
