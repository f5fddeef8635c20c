# DeiT-Ti + IMLP ablation: Table 2 "w/ channel + KD" (4.89M, 1.08G, 72.0 top-1, reported): the AMLP model of
# ./deit-ti-imlp-channel_4xb256_in1k.py (Eq. 5, no DW block) trained with "the original vision transformer
# model as the teacher ... to distill the output of the AMLP module" (IMLP Sec. 4.3).
# Teacher: the original DeiT-Ti (72.2 top-1, the paper's baseline), timm deit_tiny_patch16_224 with the
# official DeiT weights https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth
# ({'model': state_dict}, timm keys); frozen, eval mode, run on the same (mixed) images as the student.
# Our choices where the paper is silent: every block's AMLP output (fc2, before DropPath and the residual)
# learns the teacher's MLP output in the same block (timm blocks.i.mlp, also before the residual), loss =
# 1.0 x the mean over the 12 blocks of the mean-squared error, added to the unchanged label loss (the paper
# gives neither a weight nor a distance; "KD (Hinton et al., 2015)" names no module-output form).
# Recipe: ../deit-ti-imlp_4xb256_in1k.py (DeiT's). Params/FLOPs: the student only (the teacher is not part
# of the model's parameters or saved checkpoints: mmposmlp/models/classifiers/distillation.py).
_base_ = './deit-ti-imlp-channel_4xb256_in1k.py'

pretrained = 'https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth'  # noqa
model = dict(
    type='mmposmlp.DistillationClassifier',
    teacher=dict(
        type='TimmClassifier',
        model_name='deit_tiny_patch16_224',
        num_classes=1000,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    feature_distill=dict(student='backbone.layers.*.ffn.fc2', teacher='model.blocks.*.mlp', loss_weight=1.0))
