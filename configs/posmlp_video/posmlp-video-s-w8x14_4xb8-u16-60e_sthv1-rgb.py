# Ablation: Table 5: windows 8x14^2 (S1-3), 8x7^2 (S4).
# Trained without pre-training (as the paper's Tables 3/5/7/8).
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(window_sizes=[(8, 14, 14)] * 3 + [(8, 7, 7)], init_cfg=None))

# Test as the paper's ablation tables do: 16x1x1 (16 frames, 1 crop, 1 clip; PosMLP-Video Sec. 4.2
# "one clip with each having one or three crops", the tables' "16x1x1"). Single-crop SlowFast testing
# (TEST.NUM_SPATIAL_CROPS 1): the short side resized to the test crop size 224, the centre 224 crop.
test_pipeline = [
    dict(type='UniformSample', clip_len=16, test_mode=True),
    dict(type='RawFrameDecode', io_backend='disk'),
    dict(type='Resize', scale=(-1, 224)),
    dict(type='CenterCrop', crop_size=224),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
