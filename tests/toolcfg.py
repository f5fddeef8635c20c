"""Small wrapper configs around UNMODIFIED upstream configs, pointed at the toy data (shared by tool tests)."""
import os.path as osp
import textwrap

ITER2 = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={iters}, val_interval=100000)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False, begin=0, end={iters})]
default_hooks = dict(checkpoint=dict(by_epoch=False, interval={ckpt}), logger=dict(interval=1))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0, deterministic=True)
"""
NOVAL = "val_cfg = None\nval_dataloader = None\nval_evaluator = None\n"

# two iterations, no validation, a checkpoint at the end: a toy config trains and saves in seconds
TWO_ITERATIONS = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=2, val_interval=1000)
val_cfg = None
val_dataloader = None
val_evaluator = None
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2),
                     logger=dict(type='LoggerHook', interval=1))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
"""

MASK_RCNN = """
_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'
data_root = '{root}/coco/'
model = dict(backbone=dict(depth=18, init_cfg=None), neck=dict(in_channels=[64, 128, 256, 512]))
pipe = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
        dict(type='Resize', scale=(208, 160), keep_ratio=True), dict(type='PackDetInputs')]
train_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=pipe))
"""

RETINANET = """
_base_ = 'mmdet::retinanet/retinanet_r18_fpn_1x_coco.py'
data_root = '{root}/coco/'
model = dict(backbone=dict(init_cfg=None, base_channels=8), neck=dict(in_channels=[8, 16, 32, 64], out_channels=32),
             bbox_head=dict(in_channels=32, feat_channels=32, stacked_convs=1),
             test_cfg=dict(nms_pre=100, max_per_img=20, score_thr=0.0))
train_pipe = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
              dict(type='Resize', scale=(208, 160), keep_ratio=True), dict(type='PackDetInputs')]
test_pipe = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(208, 160), keep_ratio=True),
             dict(type='LoadAnnotations', with_bbox=True),
             dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor'))]
train_dataloader = dict(batch_size={batch}, num_workers=0, persistent_workers=False,
                        sampler=dict(type='DefaultSampler', shuffle=False),
                        dataset=dict(data_root=data_root, pipeline=train_pipe))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipe, indices=4))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
"""

RETINANET_WAVEMLP = RETINANET.replace(
    "model = dict(backbone=dict(init_cfg=None, base_channels=8), neck=dict(in_channels=[8, 16, 32, 64], out_channels=32),",
    "model = dict(backbone=dict(_delete_=True, type='mmposmlp.WaveMLP', out_indices=(1, 2, 3),\n"
    "                           arch=dict(depths=[1, 1, 1, 1], embed_dims=[16, 32, 48, 64], mlp_ratios=[2, 2, 2, 2])),\n"
    "             neck=dict(in_channels=[32, 48, 64], start_level=0, out_channels=32),")
assert RETINANET_WAVEMLP != RETINANET

SEM_FPN = """
_base_ = 'mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py'
data_root = '{root}/ade/ADEChallengeData2016'
crop_size = (96, 96)
model = dict(pretrained=None, data_preprocessor=dict(size=crop_size),
             backbone=dict(depth=18, init_cfg=None), neck=dict(in_channels=[64, 128, 256, 512]))
pipe = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True),
        dict(type='RandomCrop', crop_size=crop_size), dict(type='PackSegInputs')]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=pipe))
"""

TSN = """
_base_ = 'mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py'
model = dict(backbone=dict(depth=18, pretrained=None), cls_head=dict(in_channels=512))
pipe = [dict(type='DecordInit'), dict(type='SampleFrames', clip_len=1, frame_interval=1, num_clips=3),
        dict(type='DecordDecode'), dict(type='Resize', scale=(64, 64), keep_ratio=False),
        dict(type='FormatShape', input_format='NCHW'), dict(type='PackActionInputs')]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(ann_file='{root}/kinetics400/kinetics400_train_list_videos.txt',
                                     data_prefix=dict(video='{root}/kinetics400/videos_train'), pipeline=pipe))
"""

RESNET18_CLS = """
_base_ = 'mmpretrain::resnet/resnet18_8xb32_in1k.py'
data_root = '{root}/imagenet'
model = dict(backbone=dict(base_channels=8, stem_channels=8), head=dict(in_channels=64, num_classes={classes}))
train_pipe = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=32), dict(type='PackInputs')]
test_pipe = train_pipe
train_dataloader = dict(batch_size={batch}, num_workers=0, persistent_workers=False,
                        sampler=dict(type='DefaultSampler', shuffle=True),
                        dataset=dict(data_root=data_root, pipeline=train_pipe))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipe))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator
"""


def write_cfg(path, template, root, iters=2, ckpt=None, val=False, extra='', **fmt):
    """Write ``template`` + the 2-iteration schedule to ``path``; returns the path."""
    fmt.setdefault('batch', 2)
    fmt.setdefault('classes', 1000)
    text = textwrap.dedent(template).format(root=root, **fmt)
    text += ITER2.format(iters=iters, ckpt=ckpt or iters)
    if not val:
        text += NOVAL
    text += textwrap.dedent(extra)
    with open(path, 'w') as f:
        f.write(text)
    return str(path)


def run_tool(args, cwd, env=None, timeout=600):
    import os
    import subprocess
    import sys
    e = dict(os.environ)
    e.setdefault('OMP_NUM_THREADS', '1')
    e.update(env or {})
    return subprocess.run([sys.executable] + list(args), cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout)


def repo_path(*p):
    return osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), *p)


def load_tool(*rel):
    """A script under ``tools/`` or ``.dev_scripts/`` (not a package) imported by its path, freshly: ``load_tool('tools',
    'model_converters', 'lvt2mmposmlp.py')``; the module is named after the file."""
    import importlib.util
    path = repo_path(*rel)
    spec = importlib.util.spec_from_file_location(osp.splitext(osp.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
