# CPVT Table 3 "DeiT-tiny GAP": DeiT-tiny (learnable absolute encoding, 196 x C without a cls token)
# with the global-average-pooling head of CPVT-GAP (mean of the patch tokens, then LayerNorm): 6M params,
# 72.6 top-1 (paper). Recipe: ../cpvt-ti-gap_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti-gap_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), pos_embed_type='learnable'))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
