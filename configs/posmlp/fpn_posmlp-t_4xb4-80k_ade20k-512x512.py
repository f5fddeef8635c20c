# Semantic FPN on ADE20K (beyond the paper: the PosMLP paper has no segmentation results).
# The Twins/CPVT protocol: 80k iterations, 4 GPUs x 4 images, 512x512 crops, AdamW lr 1e-4,
# weight decay 1e-4, poly decay (power 0.9) to 1e-6. Shifted windows on.
# Deviation from the reference recipe (deliberate): norms and the gating units' positional parameters
# ('.gate.': GQPE centres/spreads, token biases, LRPE tables) get no weight decay, as Swin's recipes
# exempt their position tables.
_base_ = ['mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py', '../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

pretrained = 'checkpoints/posmlp-t_in1k_mmposmlp.pth'
model = dict(
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PosMLP',
        arch='tiny',
        shift=True,
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[96, 192, 384, 768]))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-4),
    paramwise_cfg=dict(custom_keys={
        'norm': dict(decay_mult=0.),
        '.gate.': dict(decay_mult=0.),
    }))
# mmcv 1.x poly (Twins): (1 - i / 80000) ** 0.9; mmengine's PolyLR divides by end - begin - 1.
param_scheduler = [dict(type='PolyLR', power=0.9, eta_min=1e-6, begin=0, end=80001, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=80000, val_interval=8000)
default_hooks = dict(checkpoint=dict(by_epoch=False, interval=8000))
