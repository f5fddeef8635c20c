# PosMLP-Video-B on kinetics400, 16 frames.
# Same recipe as posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py except the arch, drop path (0.1) and the
# image-pretrained checkpoint.
_base_ = './posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'

model = dict(
    backbone=dict(
        arch='b',  # depths [4, 6, 15, 4], r_e 2, channels 72-576
        drop_path_rate=0.1,
        init_cfg=dict(checkpoint='checkpoints/posmlp-video-b_8xb120_in1k.pth')))
