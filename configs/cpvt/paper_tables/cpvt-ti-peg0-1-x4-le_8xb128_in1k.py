# CPVT Table 7 "CPVT-Ti 0-1 4xPEG + LE": a 4-layer PEG (four depthwise 3x3 convs stacked inside one PEG,
# no norm or activation, "stacking them within one block", Sec. 5.3) after the first encoder plus DeiT's
# learnable absolute encoding: 72.9 top-1 (paper). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, ), pos_embed_type='learnable', peg_cfg=dict(num_layers=4)))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.abs_pos_embed.': dict(decay_mult=0.0)}))
