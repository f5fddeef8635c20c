# PVT-tiny+PEG on ImageNet-1k (CPVT Table 13, 77.3 top-1, reported): PVT v1's position tables removed,
# a PEG after block 0 of every stage (Sec. 4.6 "position 0 of each stage"), PVT v1's class token kept
# (prepended to stage 4's tokens, passed through that stage's PEG unchanged) and classified from it after
# the final LayerNorm. Recipe: as the +PEG+GAP row (../pvt-peg-t-gap_8xb128_in1k.py; CPVT B.6 "the same
# training settings"); no weight decay on the PEGs (Twins) and the class token (PVT v1).
_base_ = '../pvt-peg-t-gap_8xb128_in1k.py'

model = dict(backbone=dict(with_cls_token=True, out_type='cls_token'), neck=None)

optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={'.pegs.': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0)}))
