# CPVT Table 3 "DeiT-small GAP": DeiT-small (learnable absolute encoding without a cls token) with the
# GAP head: 22M params, 80.2 top-1 (paper). Recipe: ../cpvt-s-gap_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-s-gap_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), pos_embed_type='learnable'))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
