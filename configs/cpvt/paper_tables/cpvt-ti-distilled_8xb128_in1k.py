# CPVT Table 4, CPVT-Ti⚗ "trained with hard distillation using RegNetY-160 as the teacher" (Sec. 4.5):
# 75.9 top-1 (82.5 ImageNet Real is CPVT-Ti-GAP's; ⚗ row: 83.0), 6M params (all reported).
# Model: ../cpvt-ti_8xb128_in1k.py (PEG "0-5") with DeiT's distillation token (mmposmlp.CPVT
# with_dist_token=True: tokens [cls, dist, patches], both passed through the PEGs) and two linear heads
# (mmposmlp.DeiTDistillationHead = mmpretrain DeiTClsHead keys); prediction = mean of the two heads' logits.
# Loss (DeiT Sec. 5, hard-label distillation; DeiT main.py --distillation-type hard, alpha 0.5, tau 1):
# 0.5 x the class head's label loss (Mixup/CutMix soft targets + label smoothing, as the baseline recipe)
# + 0.5 x CE(distillation head, argmax of the teacher's logits on the same mixed images).
# Teacher: timm regnety_160 (global average pooling, 1000 classes) with DeiT's teacher weights
# https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth (DeiT README, `--teacher-path`; a
# {'model': state_dict} file with timm's regnety_160 keys), at 224x224 like the student. Frozen, in eval
# mode, never saved in our checkpoints (mmposmlp/models/classifiers/distillation.py).
# Recipe: the CPVT paper trains "using the aforementioned training settings plus the hard distillation",
# i.e. ../cpvt-ti_8xb128_in1k.py (DeiT's 300 epochs; DeiT also distils at 300 epochs); the distillation
# token gets no weight decay, as DeiT's no_weight_decay() (pos_embed, cls_token, dist_token).
_base_ = ['../cpvt-ti_8xb128_in1k.py']

pretrained = 'https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth'  # noqa
model = dict(
    type='mmposmlp.DistillationClassifier',
    backbone=dict(with_dist_token=True),
    head=dict(
        _delete_=True,
        type='mmposmlp.DeiTDistillationHead',
        num_classes=1000,
        in_channels=192,
        distill_type='hard',
        alpha=0.5,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)),
    teacher=dict(
        type='TimmClassifier',
        model_name='regnety_160',
        num_classes=1000,
        global_pool='avg',
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.dist_token': dict(decay_mult=0.0)}))
