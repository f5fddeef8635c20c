# Table 6: evaluate with the frames of every test clip randomly permuted (training unchanged).
# python tools/test.py configs/posmlp_video/posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb_shuffle-test.py CKPT
_base_ = './posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'

test_pipeline = [  # 4 clips x 3 crops, each clip's 16 frames shuffled
    dict(type='DecordInit', io_backend='disk'),
    dict(type='SampleFrames', clip_len=16, frame_interval=4, num_clips=4, test_mode=True),
    dict(type='DecordDecode'),
    dict(type='mmposmlp.ShuffleFrames', seed=0),
    dict(type='Resize', scale=(-1, 224)),
    dict(type='ThreeCrop', crop_size=224),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
