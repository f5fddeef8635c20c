# PosMLP-Video Table 5, row "8x14^2 (S1-3), 8x7^2 (S4)" (13.50M, 20.38 GFLOPs, 42.33 top-1, paper): 8-frame
# windows on 8-frame clips. The paper's 20.38 GFLOPs are half of the 16-frame model's, which only an
# 8-frame input gives (../posmlp-video-s-w8x14_4xb8-u16-60e_sthv1-rgb.py runs the 8-frame windows over
# 16 frames: 40.27G). The caption says all ablations use 16x1x1 frames; the FLOPs say 8 for this row,
# and we follow the FLOPs. Recipe otherwise as ../posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py
# (no pre-training, Sec. 4.4).
_base_ = ['../posmlp-video-s-w8x14_4xb8-u16-60e_sthv1-rgb.py']

clip_len = 8
file_client_args = dict(io_backend='disk')
train_pipeline = [
    dict(type='UniformSample', clip_len=clip_len),
    dict(type='RawFrameDecode', **file_client_args),
    dict(type='RandomRescale', scale_range=(256, 320)),
    dict(type='RandomCrop', size=224),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand'),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
val_pipeline = [
    dict(type='UniformSample', clip_len=clip_len, test_mode=True),
    dict(type='RawFrameDecode', **file_client_args),
    dict(type='Resize', scale=(-1, 256)),
    dict(type='CenterCrop', crop_size=224),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
test_pipeline = [
    dict(type='UniformSample', clip_len=clip_len, test_mode=True),
    dict(type='RawFrameDecode', **file_client_args),
    dict(type='Resize', scale=(-1, 224)),
    dict(type='ThreeCrop', crop_size=224),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs')
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=val_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
