# Ablation: Table 3: gMLP SGU+TGU baseline (dense token FC units in the parallel block).
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(gate_type='sgu', init_cfg=None))
