# Ablation: Table 3: joint PoSTGU block.
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(block_type='PoSTGU', init_cfg=None))
