# PosMLP-Video-L on kinetics400, 24 frames.
# Same recipe as posmlp-video-s_4xb8-24x4x1-60e_kinetics400-rgb.py except the arch, drop path (0.2) and the
# image-pretrained checkpoint.
_base_ = './posmlp-video-s_4xb8-24x4x1-60e_kinetics400-rgb.py'

model = dict(
    backbone=dict(
        arch='l',  # depths [4, 6, 15, 4], r_e 4, channels 72-576
        drop_path_rate=0.2,
        init_cfg=dict(checkpoint='checkpoints/posmlp-video-l_8xb120_in1k.pth')))
