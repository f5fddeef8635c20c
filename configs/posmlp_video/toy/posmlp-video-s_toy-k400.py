# PosMLP-Video (PoTGU+PoSGU blocks, Mixup/CutMix, drop path) on the generated toy Kinetics-400
# (data/toy/kinetics400: 16-frame 64x64 clips, 4 classes = motion directions): the K400 recipe's
# recognizer, head, optimiser and batch augments with a 4-stage backbone of one block each, 8 frames.
_base_ = '../posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'

clip = 8
num_classes = 4
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PosMLPVideo',
        arch=dict(embed_dims=[16, 32, 48, 64], depths=[1, 1, 1, 1], mlp_ratio=2, groups=[2, 4, 4, 8],
                  window_sizes=[(clip, 4, 4), (clip, 4, 4), (clip, 2, 2), (clip, 2, 2)]),
        drop_path_rate=0.1,
        out_indices=(3, )),
    data_preprocessor=dict(blending=dict(augments=[
        dict(type='MixupBlending', alpha=0.8, num_classes=num_classes),
        dict(type='CutmixBlending', alpha=1, num_classes=num_classes)])),
    cls_head=dict(in_channels=64, num_classes=num_classes))

data_root = 'data/toy/kinetics400'
train_pipeline = [  # no flip: left/right are the labels here
    dict(type='DecordInit', io_backend='disk'),
    dict(type='SampleFrames', clip_len=clip, frame_interval=2, num_clips=1),
    dict(type='DecordDecode'),
    dict(type='RandomCrop', size=56),
    dict(type='Resize', scale=(64, 64), keep_ratio=False),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
val_pipeline = [
    dict(type='DecordInit', io_backend='disk'),
    dict(type='SampleFrames', clip_len=clip, frame_interval=2, num_clips=1, test_mode=True),
    dict(type='DecordDecode'),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
test_pipeline = val_pipeline
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
                        dataset=dict(ann_file=data_root + '/kinetics400_train_list_videos.txt',
                                     data_prefix=dict(video=data_root + '/videos_train'), pipeline=train_pipeline))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
                      dataset=dict(ann_file=data_root + '/kinetics400_val_list_videos.txt',
                                   data_prefix=dict(video=data_root + '/videos_val'), pipeline=val_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs=2, val_interval=2)
param_scheduler = [dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=8)]
default_hooks = dict(logger=dict(interval=4), checkpoint=dict(interval=2))
