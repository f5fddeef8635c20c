# Semantic FPN, the PVT protocol: 40k iterations, batch 16 (8 GPUs x 2), AdamW lr 2e-4,
# weight decay 1e-4, poly 0.9 to 0.
_base_ = './fpn_posmlp-t_4xb4-80k_ade20k-512x512.py'
optim_wrapper = dict(optimizer=dict(lr=2e-4))
param_scheduler = [dict(type='PolyLR', power=0.9, eta_min=0.0, begin=0, end=40001, by_epoch=False)]
train_cfg = dict(max_iters=40000, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=4000))
train_dataloader = dict(batch_size=2)
