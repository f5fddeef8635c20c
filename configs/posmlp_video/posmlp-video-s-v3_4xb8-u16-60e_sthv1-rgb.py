# Ablation: Table 8 / Fig. 6 V3: shared input, concat.
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(parallel_version='v3', init_cfg=None))
