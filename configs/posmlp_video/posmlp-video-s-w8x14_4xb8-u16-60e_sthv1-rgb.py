# Ablation: Table 5: windows 8x14^2 (S1-3), 8x7^2 (S4).
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(window_sizes=[(8, 14, 14)] * 3 + [(8, 7, 7)], init_cfg=None))
