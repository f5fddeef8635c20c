# Ablation: Table 8 / Fig. 6 V2: channel split, concat.
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(parallel_version='v2', init_cfg=None))
