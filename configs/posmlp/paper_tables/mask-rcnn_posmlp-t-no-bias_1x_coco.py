# PosMLP appendix Table 9 (Mask R-CNN 1x; bias b removed, no APE): AP box 41.6, AP mask 38.3 (paper). The APE
# (56 x 56 x 96, as in ImageNet pre-training) is resized bicubically to each input's stem map.
# Recipe: ../mask-rcnn_posmlp-t_1x_coco.py (the paper's Table 8 protocol). The backbone starts from
# the ImageNet model of the same variant (paper Table 7 row, paper_tables/posmlp-t-no-bias_8xb120_in1k-half.py
# trained on the full ImageNet-1k, converted to checkpoints/posmlp-t-no-bias_in1k_mmposmlp.pth).
_base_ = ['../mask-rcnn_posmlp-t_1x_coco.py']
model = dict(backbone=dict(
    init_cfg=dict(type='Pretrained', checkpoint='checkpoints/posmlp-t-no-bias_in1k_mmposmlp.pth', prefix='backbone.'),
    gate_cfg=dict(token_bias=False)))
