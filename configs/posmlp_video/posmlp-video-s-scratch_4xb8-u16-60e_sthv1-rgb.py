# Table 3 / 4 / 5 reference row: the default PoTGU+PoSGU (V1) block trained without pre-training.
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(init_cfg=None))
