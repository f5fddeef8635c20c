# UperNet 160k on ADE20K (beyond the paper): Swin's official UperNet recipe (AdamW lr 6e-5,
# weight decay 0.01, 1500 warm-up iterations, poly 1.0, 8 GPUs x 2 images) with PosMLP-T.
# Deviation from the reference recipe (deliberate): norms and the gating units' positional parameters
# ('.gate.': GQPE centres/spreads, token biases, LRPE tables) get no weight decay, as Swin's recipes
# exempt their position tables.
_base_ = ['mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py', '../_base_/runner.py']
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
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    decode_head=dict(in_channels=[96, 192, 384, 768]),
    auxiliary_head=dict(in_channels=384))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={
    'norm': dict(decay_mult=0.),
    '.gate.': dict(decay_mult=0.),
}))

# The official Swin UperNet schedule (Swin-Transformer-Semantic-Segmentation, mmseg 0.x / mmcv 1.x):
# poly (power 1) over all 160k iterations to 0, multiplied during the first 1500 iterations by a
# linear warm-up from 1e-6. mmseg 1.x's Swin config starts its poly after the warm-up instead; mmengine's
# LinearLR and PolyLR divide by end - begin - 1, hence 1501 and 160001.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1501),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=0, end=160001, by_epoch=False)
]
