# PVT-tiny+GAP on ImageNet-1k (CPVT Table 13, 75.9 top-1, reported): PVT v1's per-stage learnable
# position tables kept, no PEG, no class token, global average pooling after the final LayerNorm.
# Recipe: as the +PEG+GAP row (../pvt-peg-t-gap_8xb128_in1k.py; CPVT B.6 "the same training settings");
# the position tables are decayed (PVT v1's no_weight_decay exempts only its class token).
_base_ = '../pvt-peg-t-gap_8xb128_in1k.py'

model = dict(backbone=dict(pos_embed_type='learnable', peg_after_block=None))

optim_wrapper = dict(paramwise_cfg=dict(_delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0))
