# CPVT-Ti⚗ (distillation token, DeiT hard distillation) on the generated toy ImageNet (data/toy/imagenet):
# same student, head, loss (Mixup/CutMix included) and optimiser as
# ../paper_tables/cpvt-ti-distilled_8xb128_in1k.py, the toy data fragment's 56x56 crops, a few iterations.
# The teacher is the toy generator's tiny CPVT classifier with seeded random weights
# (data/toy/imagenet/toy_teacher_cpvt.pth, mmposmlp.datasets.toy.TOY_TEACHER): it exercises the machinery
# (checked teacher loading, frozen teacher, two heads), it teaches nothing.
_base_ = ['../paper_tables/cpvt-ti-distilled_8xb128_in1k.py', '../../_base_/toy/imagenet.py']

model = dict(
    teacher=dict(
        _delete_=True,
        type='ImageClassifier',
        backbone=dict(type='mmposmlp.CPVT', arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                                                        feedforward_channels=64), peg_positions=(0, )),
        neck=None,
        head=dict(type='LinearClsHead', num_classes=1000, in_channels=32),
        init_cfg=dict(type='Pretrained', checkpoint='data/toy/imagenet/toy_teacher_cpvt.pth')))

train_dataloader = dict(_base_.toy_in1k_train_dataloader, sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = _base_.toy_in1k_val_dataloader
test_dataloader = _base_.toy_in1k_val_dataloader
train_cfg = dict(max_epochs=1)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True, begin=0, end=1)]
default_hooks = dict(logger=dict(interval=2))
