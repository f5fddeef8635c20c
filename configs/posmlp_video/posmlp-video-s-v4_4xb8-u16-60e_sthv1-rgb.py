# Ablation: Table 8 / Fig. 6 V4: shared input, add.
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(parallel_version='v4', init_cfg=None))
