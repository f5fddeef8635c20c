# Table 3 / 4 / 5 reference row: the default PoTGU+PoSGU (V1) block trained without pre-training.
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'

model = dict(backbone=dict(init_cfg=None))

# Test as the paper's ablation tables do: 16x1x1 (16 frames, 1 crop, 1 clip; PosMLP-Video Sec. 4.2
# "one clip with each having one or three crops", the tables' "16x1x1"), with the official
# Something-Something loader (datasets/sth.py, TEST.NUM_SPATIAL_CROPS 1): UniformSample's test mode is its
# get_seq_frames; the short side goes to 224 (long side floored, torch bilinear) and the crop is spatial
# index 0 % 1 = 0, i.e. the FIRST (left / top) 224 crop, not the centre (sth.py, unlike kinetics.py, does
# not switch to the centre for one crop).
test_pipeline = [
    dict(type='UniformSample', clip_len=16, test_mode=True),
    dict(type='RawFrameDecode', io_backend='disk'),
    dict(type='mmposmlp.SlowFastShortSideResize', scale=224),
    dict(type='mmposmlp.SlowFastUniformCrop', crop_size=224, spatial_indices=(0, )),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
