# PosMLP appendix Table 9 (Mask R-CNN 1x; no bias b, with APE): AP box 41.6, AP mask 38.4 (paper). The APE
# (56 x 56 x 96, as in ImageNet pre-training) is resized bicubically to each input's stem map.
# Recipe: ../mask-rcnn_posmlp-t_1x_coco.py (the paper's Table 8 protocol). The backbone starts from
# the ImageNet model of the same variant (paper Table 7 row, paper_tables/posmlp-t-no-bias-ape_8xb120_in1k-half.py
# trained on the full ImageNet-1k, converted to checkpoints/posmlp-t-no-bias-ape_in1k_mmposmlp.pth).
_base_ = ['../mask-rcnn_posmlp-t_1x_coco.py']
model = dict(backbone=dict(
    init_cfg=dict(type='Pretrained', checkpoint='checkpoints/posmlp-t-no-bias-ape_in1k_mmposmlp.pth', prefix='backbone.'),
    gate_cfg=dict(token_bias=False), ape_size=(56, 56)))
# like Swin's absolute_pos_embed, the APE is not weight-decayed
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'absolute_pos_embed': dict(decay_mult=0.)}))
