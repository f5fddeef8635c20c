# CPVT Table 7 "CPVT-Ti 0-1 PEG + LE": one depthwise 3x3 PEG after the first encoder and DeiT's learnable
# absolute encoding at the input: 72.9 top-1 (paper). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, ), pos_embed_type='learnable'))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
