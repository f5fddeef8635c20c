# Ablation: Table 7: GQPE instead of LRPE (generalized quadratic form).
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(gate_type='ggqpe', init_cfg=None))
