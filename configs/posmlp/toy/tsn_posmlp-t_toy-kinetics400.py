# TSN PosMLP-T on the generated toy Kinetics-400 clips (python tools/misc/make_toy_datasets.py --out data/toy):
# 8 segments of 64x64 frames per clip (the toy fragment's sampling), random initialisation, one epoch.
_base_ = ['../tsn_posmlp-t_8xb32-1x1x3-100e_kinetics400-rgb.py', '../../_base_/toy/kinetics400.py']

model = dict(backbone=dict(backbone=dict(init_cfg=None)), cls_head=dict(num_classes=4))
train_dataloader = _base_.toy_k400_train_dataloader
val_dataloader = _base_.toy_k400_val_dataloader
test_dataloader = _base_.toy_k400_val_dataloader
train_cfg = dict(max_epochs=1, val_interval=1)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True, begin=0, end=1)]
default_hooks = dict(logger=dict(interval=2))
