# Ablation: Table 5: windows 16x28^2 (S1), 16x14^2 (S2-3), 16x7^2 (S4).
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(window_sizes=[(16, 28, 28)] + [(16, 14, 14)] * 2 + [(16, 7, 7)], init_cfg=None))
