# CPVT Table 11 "w/o zero paddings": CPVT-Ti (Table 11 names CPVT-Ti and its 72.4 baseline is the tiny 0-1
# model; the text of B.3 says CPVT-S) with the zero padding of its PEG removed: 70.5 top-1 (paper).
# Read literally: a valid 3x3 depthwise conv (no padding at all); its 12x12 encoding is added to the
# centre tokens and the border tokens get none. PEG(padding_mode='circular') is the size-keeping
# alternative without zeros. Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, ), peg_cfg=dict(padding_mode='none')))
