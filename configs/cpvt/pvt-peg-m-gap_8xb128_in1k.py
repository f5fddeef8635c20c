# PVT-medium + PEG + GAP on ImageNet-1k (CPVT Table 13; = Twins PCPVT for small/medium/large).
# Recipe: DeiT/Twins (AdamW lr 5e-4 x 1024/512, wd 0.05, 300 epochs, cosine, 5 warmup epochs,
# RandAugment, Mixup 0.8 / CutMix 1.0, label smoothing 0.1, random erasing 0.25, grad clip 5),
# inherited from mmpretrain's Twins-PCPVT config; only the backbone is swapped.
_base_ = ['mmpretrain::twins/twins-pcpvt-small_8xb128_in1k.py', '../_base_/runner.py']

custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PVTPEG',
        arch='medium',
        out_indices=(3, ),
        # the official final LayerNorm (eps 1e-6) before global average pooling
        norm_after_stage=[False, False, False, True],
        drop_path_rate=0.3),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(in_channels=512))

# Twins excludes the PEG weights (pos_block) from weight decay (no_weight_decay).
optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={'.pegs.': dict(decay_mult=0.0)}))

# Twins main.py (the DeiT trainer): timm cosine (300 epochs, counted from epoch 0) with 5 warm-up
# epochs from 1e-6 to min_lr 1e-5, stepped once per epoch; it trains args.epochs = 300 epochs
param_scheduler = [
    dict(type='mmposmlp.TimmCosineLR', T_max=300, eta_min=1e-5, warmup_steps=5, warmup_value=1e-6,
         by_epoch=True)
]
train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
