# CPVT Table 1 / Table 7 / Table 3 (CLT) / Table 2: DeiT-tiny with its learnable absolute position encoding
# (LE), cls-token head: 72.2 top-1 (paper; 71.2 at 384 in Table 1). 6M params (Table 2).
# DeiT-tiny = our CPVT backbone with no PEG and DeiT's learnable absolute position table (LE, 197 x C,
# trunc-normal .02, no weight decay as DeiT's no_weight_decay); equal to mmpretrain's VisionTransformer
# 'deit-tiny' (tests/test_cpvt_baselines.py). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), pos_embed_type='learnable'))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
