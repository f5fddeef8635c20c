# Table 6: evaluate with the frames of every test clip randomly permuted (training unchanged).
# python tools/test.py configs/posmlp_video/posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb_shuffle-test.py CKPT
_base_ = './posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'

# the base config's official (PySlowFast) 4 x 3 test views, each clip's frames shuffled after decoding
test_pipeline = [  # 4 clips x 3 crops, each clip's 16 frames shuffled
    dict(type='PyAVInit', io_backend='disk'),
    dict(type='mmposmlp.SlowFastSampleFrames', clip_len=16, frame_interval=4, num_clips=4, target_fps=30,
         use_offset=True),
    dict(type='PyAVDecode'),
    dict(type='mmposmlp.ShuffleFrames', seed=0),
    dict(type='mmposmlp.SlowFastShortSideResize', scale=224),
    dict(type='mmposmlp.SlowFastUniformCrop', crop_size=224, spatial_indices=(0, 1, 2)),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
