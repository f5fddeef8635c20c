# PosMLP-Video-B on sthv1, 16 frames.
# Same recipe as posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py except the arch, drop path (0.3) and the
# image-pretrained checkpoint.
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(
    backbone=dict(
        arch='b',  # depths [4, 6, 15, 4], r_e 2, channels 72-576
        drop_path_rate=0.3,
        init_cfg=dict(checkpoint='checkpoints/posmlp-video-b_8xb120_in1k.pth')))
