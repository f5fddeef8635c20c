# UperNet 160k on ADE20K (beyond the paper): mmseg's Swin-T UperNet recipe (AdamW lr 6e-5,
# weight decay 0.01, 1500 warm-up iterations, poly 1.0, 8 GPUs x 2 images) with PosMLP-T.
_base_ = 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
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
