# PosMLP Table 7 (bias b and APE; 77.3 top-1).
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(ape_size=(56, 56)))
# like Swin's absolute_pos_embed, the APE is not weight-decayed
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'absolute_pos_embed': dict(decay_mult=0.)}))
