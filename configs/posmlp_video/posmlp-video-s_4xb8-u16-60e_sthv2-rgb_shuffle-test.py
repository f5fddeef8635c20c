# Table 6: evaluate with the frames of every test clip randomly permuted (training unchanged).
# python tools/test.py configs/posmlp_video/posmlp-video-s_4xb8-u16-60e_sthv2-rgb_shuffle-test.py CKPT
_base_ = './posmlp-video-s_4xb8-u16-60e_sthv2-rgb.py'

# the base config's official (datasets/sth.py) 1 x 3 test views, the clip's frames shuffled after decoding
test_pipeline = [  # 1 clip x 3 crops, the clip's 16 frames shuffled
    dict(type='UniformSample', clip_len=16, test_mode=True),
    dict(type='RawFrameDecode', io_backend='disk'),
    dict(type='mmposmlp.ShuffleFrames', seed=0),
    dict(type='mmposmlp.SlowFastShortSideResize', scale=224),
    dict(type='mmposmlp.SlowFastUniformCrop', crop_size=224, spatial_indices=(0, 1, 2)),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
