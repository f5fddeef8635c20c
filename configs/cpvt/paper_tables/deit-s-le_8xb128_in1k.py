# CPVT Table 3 (CLT) / Table 2 / Table 15 "DeiT-small": DeiT-small with its learnable absolute position
# encoding, cls-token head: 22M params, 4.6G FLOPs (Table 15), 79.9 top-1 (paper).
# DeiT-small = our CPVT backbone with no PEG and DeiT's learnable absolute position table (LE, 197 x C,
# trunc-normal .02, no weight decay as DeiT's no_weight_decay); equal to mmpretrain's VisionTransformer
# 'deit-small' (tests/test_cpvt_baselines.py). Recipe: ../cpvt-s_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-s_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), pos_embed_type='learnable'))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
