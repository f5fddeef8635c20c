# PosMLP-Video Table 3, last row "PoTGU+PoSGU (IN-1K)" (52.24 top-1, reported): the ImageNet-1K pre-trained
# PosMLP-Video-S of ../posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py, tested as the ablation tables are (Sec. 4.3:
# 16x1x1). The training is that config's; only the test differs: one clip, one crop (the scratch row's test,
# ../posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py), where the main config tests 1 clip x 3 crops (Table 9).
_base_ = '../posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py'

model = dict(
    backbone=dict(
        init_cfg=dict(_delete_=True, type='Pretrained', checkpoint='checkpoints/posmlp-video-s_8xb120_in1k.pth',
                      prefix='backbone.', inflate=True)))
