# Ablation: Table 3: cascade PoTGU->PoSGU.
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(block_type='PoTGU->PoSGU', init_cfg=None))
