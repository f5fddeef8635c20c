"""Toy Kinetics end-to-end (issue 7): a small PosMLP-Video trains through mmaction2's
Recognizer3D/VideoDataset/decord pipeline (our K400 config, shrunk) on the generated
motion-direction clips (right/left/down/up) to clearly above chance, and the frame-shuffled
evaluation of Table 6 (``mmposmlp.ShuffleFrames``) drops it: direction lives in frame order."""
import copy
import os.path as osp
import warnings

import pytest

warnings.filterwarnings('ignore', message='Unnecessary conv bias')
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CFG = osp.join(ROOT, 'configs', 'posmlp_video', 'posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py')


@pytest.fixture(scope='module')
def kinetics_root(request, tmp_path_factory):
    """The shared ``toy_data`` fixture when conftest provides it, else a local toy copy."""
    try:
        return osp.join(str(request.getfixturevalue('toy_data')), 'kinetics400')
    except pytest.FixtureLookupError:
        from mmposmlp.datasets.toy import make_toy_datasets
        return make_toy_datasets(str(tmp_path_factory.mktemp('toy')), seed=0, which=('kinetics', ))['kinetics']


def toy_cfg(root, work_dir, epochs=40):
    from mmengine.config import Config
    cfg = Config.fromfile(CFG)
    clip = 8
    cfg.model.backbone = dict(
        type='mmposmlp.PosMLPVideo', arch=dict(embed_dims=[16, 32, 48, 64], depths=[1, 1, 1, 1], mlp_ratio=2,
                                              groups=[2, 4, 4, 8],
                                              window_sizes=[(clip, 4, 4), (clip, 4, 4), (clip, 2, 2), (clip, 2, 2)]),
        drop_path_rate=0.0)
    cfg.model.cls_head.update(in_channels=64, num_classes=4, label_smooth_eps=0.)
    cfg.model.data_preprocessor.pop('blending')
    decode = [dict(type='DecordInit', io_backend='disk'),
              dict(type='SampleFrames', clip_len=clip, frame_interval=2, num_clips=1, test_mode=True),
              dict(type='DecordDecode')]
    tail = [dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]
    # no flip: left/right are the labels here
    train = copy.deepcopy(decode)
    train[1]['test_mode'] = False
    train += [dict(type='RandomCrop', size=56), dict(type='Resize', scale=(64, 64), keep_ratio=False)] + tail
    test = decode + tail
    for loader, pipe, ann, videos in (('train_dataloader', train, 'train', 'videos_train'),
                                      ('val_dataloader', test, 'val', 'videos_val'),
                                      ('test_dataloader', test, 'val', 'videos_val')):
        dl = cfg[loader]
        dl.update(batch_size=4, num_workers=0, persistent_workers=False)
        dl.dataset.update(ann_file=osp.join(root, f'kinetics400_{ann}_list_videos.txt'),
                          data_prefix=dict(video=osp.join(root, videos)), pipeline=pipe)
    cfg.test_pipeline = test
    cfg.train_cfg.update(max_epochs=epochs, val_interval=1000)
    cfg.optim_wrapper.optimizer.update(lr=2e-3, weight_decay=0.0)
    cfg.param_scheduler = []
    cfg.default_hooks.checkpoint.update(interval=epochs, max_keep_ckpts=1)
    cfg.default_hooks.logger.update(interval=20)
    cfg.work_dir = work_dir
    cfg.randomness = dict(seed=0, deterministic=False)
    cfg.launcher = 'none'
    cfg.env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
                       dist_cfg=dict(backend='gloo'))
    cfg.visualizer = dict(type='ActionVisualizer', vis_backends=[])
    return cfg


@pytest.mark.slow
def test_toy_kinetics_train_and_frame_shuffle(kinetics_root, tmp_path):
    import mmaction.models  # noqa: F401
    from mmengine.runner import Runner, TestLoop
    cfg = toy_cfg(kinetics_root, str(tmp_path / 'work'))
    runner = Runner.from_cfg(cfg)
    runner.train()
    acc = runner.test()['acc/top1']
    shuffled = []
    for seed in (0, 1, 2):  # the trained model, evaluated on frame-shuffled test clips
        pipe = copy.deepcopy(cfg.test_pipeline)
        pipe.insert(3, dict(type='mmposmlp.ShuffleFrames', seed=seed))
        loader = copy.deepcopy(cfg.test_dataloader)
        loader.dataset.pipeline = pipe
        shuffled.append(TestLoop(runner, loader, cfg.test_evaluator).run()['acc/top1'])
    mean_shuffled = sum(shuffled) / len(shuffled)
    print(f'toy kinetics: top-1 {acc:.3f}, frame-shuffled {shuffled} (chance 0.25)')
    assert acc >= 0.75, acc
    assert mean_shuffled <= acc - 0.25, (acc, shuffled)
