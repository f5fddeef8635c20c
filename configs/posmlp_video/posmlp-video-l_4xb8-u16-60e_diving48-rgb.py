# PosMLP-Video-L on diving48, 16 frames.
# Same recipe as posmlp-video-s_4xb8-u16-60e_diving48-rgb.py except the arch, drop path (0.5) and the
# image-pretrained checkpoint.
_base_ = './posmlp-video-s_4xb8-u16-60e_diving48-rgb.py'

model = dict(
    backbone=dict(
        arch='l',  # depths [4, 6, 15, 4], r_e 4, channels 72-576
        drop_path_rate=0.5,
        init_cfg=dict(checkpoint='checkpoints/posmlp-video-l_8xb120_in1k.pth')))
