# CPVT Table 2 "DeiT-base" at 224x224 (the training resolution of the Table 2 rows): DeiT-base with its
# learnable absolute position encoding and cls-token head, 86M params, 81.8 top-1 (paper; DeiT's own number).
# DeiT-base = our CPVT backbone with no PEG and DeiT's learnable absolute position table (LE, 197 x C,
# trunc-normal .02, no weight decay as DeiT's no_weight_decay); equal to mmpretrain's VisionTransformer
# 'deit-base' (the tiny/small equality is tests/test_cpvt_baselines.py). Recipe: DeiT's (Table 10's DeiT
# column): ../cpvt-b_8xb128_in1k.py with AdamW (lr 5e-4 x 1024/512, wd 0.05) where CPVT-B uses LAMB.
_base_ = ['../cpvt-b_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), pos_embed_type='learnable'))

optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=5e-4 * 1024 / 512, weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
