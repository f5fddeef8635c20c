# Toy Kinetics-400 (python tools/misc/make_toy_datasets.py --out data/toy): 16-frame 64x64 mp4 clips whose
# class (0 right, 1 left, 2 down, 3 up) is the direction a blob moves in. Keys prefixed `toy_k400_`
# (see coco_instance.py). Toy variant of an mmaction2 recognizer:
#
#   _base_ = ['mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py',
#             '../_base_/toy/kinetics400.py']
#   train_dataloader = _base_.toy_k400_train_dataloader
#   val_dataloader = _base_.toy_k400_val_dataloader
#   test_dataloader = _base_.toy_k400_val_dataloader
# (use num_clips >= 2 in SampleFrames, or a 3D/temporal model: the class lives in the frame order).
toy_k400_root = 'data/toy/kinetics400'
toy_k400_train_pipeline = [
    dict(type='DecordInit'),
    dict(type='SampleFrames', clip_len=1, frame_interval=1, num_clips=8),
    dict(type='DecordDecode'),
    dict(type='Resize', scale=(64, 64), keep_ratio=False),
    dict(type='FormatShape', input_format='NCHW'),
    dict(type='PackActionInputs'),
]
toy_k400_val_pipeline = [
    dict(type='DecordInit'),
    dict(type='SampleFrames', clip_len=1, frame_interval=1, num_clips=8, test_mode=True),
    dict(type='DecordDecode'),
    dict(type='Resize', scale=(64, 64), keep_ratio=False),
    dict(type='FormatShape', input_format='NCHW'),
    dict(type='PackActionInputs'),
]
toy_k400_train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(ann_file=toy_k400_root + '/kinetics400_train_list_videos.txt',
                 data_prefix=dict(video=toy_k400_root + '/videos_train'), pipeline=toy_k400_train_pipeline))
toy_k400_val_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(ann_file=toy_k400_root + '/kinetics400_val_list_videos.txt',
                 data_prefix=dict(video=toy_k400_root + '/videos_val'), pipeline=toy_k400_val_pipeline))
