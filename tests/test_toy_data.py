"""The toy datasets are deterministic and read by the real dataset classes of each library (issue 2, item 5)."""
import hashlib
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest

from toolcfg import repo_path


def _digest(root, sub):
    h = hashlib.sha256()
    base = osp.join(root, sub)
    for d, _, files in sorted(os.walk(base)):
        for f in sorted(files):
            p = osp.join(d, f)
            h.update(osp.relpath(p, base).encode())
            with open(p, 'rb') as fh:
                h.update(fh.read())
    return h.hexdigest()


def test_generator_cli_deterministic_and_seeded(toy_data, tmp_path):
    res = subprocess.run([sys.executable, repo_path('tools', 'misc', 'make_toy_datasets.py'), '--out',
                          str(tmp_path / 'a'), '--seed', '0', '--which', 'coco,ade20k,imagenet'],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for sub in ('coco', 'ade', 'imagenet'):
        assert _digest(str(tmp_path / 'a'), sub) == _digest(toy_data, sub), sub
    from mmposmlp.datasets.toy import make_toy_datasets
    make_toy_datasets(str(tmp_path / 'b'), seed=1, which=('coco', ))
    assert _digest(str(tmp_path / 'b'), 'coco') != _digest(toy_data, 'coco')
    with pytest.raises(ValueError, match='unknown toy dataset'):
        make_toy_datasets(str(tmp_path / 'c'), which=('cocoa', ))


def test_coco_read_by_mmdet(toy_data):
    from mmdet.datasets import CocoDataset
    from mmdet.utils import register_all_modules
    register_all_modules()
    root = osp.join(toy_data, 'coco') + '/'
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True, with_mask=True)]
    sizes = {}
    for split, n in (('train2017', 16), ('val2017', 8)):
        ds = CocoDataset(data_root=root, ann_file=f'annotations/instances_{split}.json',
                         data_prefix=dict(img=f'{split}/'), pipeline=pipeline, test_mode=(split == 'val2017'))
        assert len(ds) == n
        labels = set()
        for i in range(len(ds)):
            item = ds[i]
            assert item['img'].shape == (320, 416, 3)
            assert len(item['gt_bboxes']) >= 2
            masks = item['gt_masks'].to_ndarray()
            boxes = item['gt_bboxes'].numpy()
            for m, b in zip(masks, boxes):  # polygon masks fill their boxes
                ys, xs = np.nonzero(m)
                assert abs(xs.min() - b[0]) <= 2 and abs(ys.max() + 1 - b[3]) <= 2
                assert m.sum() > 1000  # large, easy shapes
            labels |= set(item['gt_bboxes_labels'].tolist())
        assert labels == {0, 1, 2}  # person, bicycle, car in mmdet's 80-class order
        sizes[split] = len(ds)
    assert ds.metainfo['classes'][:3] == ('person', 'bicycle', 'car')


def test_ade20k_read_by_mmseg(toy_data):
    from mmseg.datasets import ADE20KDataset
    from mmseg.utils import register_all_modules
    register_all_modules()
    root = osp.join(toy_data, 'ade', 'ADEChallengeData2016')
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True)]
    ds = ADE20KDataset(data_root=root, data_prefix=dict(img_path='images/training',
                                                        seg_map_path='annotations/training'), pipeline=pipeline)
    assert len(ds) == 8
    seen = set()
    for i in range(len(ds)):
        item = ds[i]
        seg = item['gt_seg_map']
        assert seg.shape == item['img'].shape[:2]
        seen |= set(np.unique(seg).tolist())
    # 0 -> 255 (ignored) under reduce_zero_label; wall/sky/person/car -> 0/2/12/20
    assert seen <= {255, 0, 2, 12, 20} and {255, 0, 2} <= seen and seen & {12, 20}
    val = ADE20KDataset(data_root=root, data_prefix=dict(img_path='images/validation',
                                                         seg_map_path='annotations/validation'), pipeline=pipeline)
    assert len(val) == 4


@pytest.mark.parametrize('decoder', ['Decord', 'PyAV'])
def test_kinetics_read_by_mmaction(toy_data, decoder):
    from mmaction.datasets import VideoDataset
    from mmaction.utils import register_all_modules
    register_all_modules()
    root = osp.join(toy_data, 'kinetics400')
    pipeline = [dict(type=f'{decoder}Init'),
                dict(type='SampleFrames', clip_len=16, frame_interval=1, num_clips=1, test_mode=True),
                dict(type=f'{decoder}Decode')]
    ds = VideoDataset(ann_file=osp.join(root, 'kinetics400_train_list_videos.txt'),
                      data_prefix=dict(video=osp.join(root, 'videos_train')), pipeline=pipeline, test_mode=True)
    assert len(ds) == 16
    for i in range(4):  # one clip per direction: right, left, down, up
        item = ds[i]
        frames = np.stack(item['imgs']).astype(np.float32)  # T, H, W, 3
        assert frames.shape == (16, 64, 64, 3)
        # track the bright blob: it moves in the labelled direction, so the frame order carries the class
        bright = frames.mean(-1) > 150
        ys, xs = [], []
        for f in bright:
            yy, xx = np.nonzero(f)
            ys.append(yy.mean())
            xs.append(xx.mean())
        dx, dy = xs[-1] - xs[0], ys[-1] - ys[0]
        expected = {0: (dx > 20 and abs(dy) < 5), 1: (dx < -20 and abs(dy) < 5), 2: (dy > 20 and abs(dx) < 5),
                    3: (dy < -20 and abs(dx) < 5)}
        assert expected[item['label']], (item['label'], dx, dy)


def test_imagenet_read_by_mmpretrain(toy_data):
    from mmpretrain.datasets import CustomDataset, ImageNet
    from mmpretrain.utils import register_all_modules
    register_all_modules()
    root = osp.join(toy_data, 'imagenet')
    train = ImageNet(data_root=root, split='train', pipeline=[dict(type='LoadImageFromFile')])
    val = ImageNet(data_root=root, split='val', pipeline=[dict(type='LoadImageFromFile')])
    assert len(train) == 24 and len(val) == 12
    assert sorted({train.get_data_info(i)['gt_label'] for i in range(len(train))}) == [0, 1, 2, 3]
    assert train[0]['img'].shape == (64, 64, 3)
    assert train.CLASSES[0].startswith('tench')
    folders = CustomDataset(data_root=root, data_prefix='train', with_label=True)
    assert len(folders) == 24


FRAGMENT_VARIANTS = {
    'coco_instance': ('mmdet', 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', 'toy_coco', 16, 8),
    'ade20k': ('mmseg', 'mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py', 'toy_ade', 8, 4),
    'kinetics400': ('mmaction', 'mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_'
                    'kinetics400-rgb.py', 'toy_k400', 16, 8),
    'imagenet': ('mmpretrain', 'mmpretrain::resnet/resnet18_8xb32_in1k.py', 'toy_in1k', 24, 12),
}


@pytest.mark.parametrize('fragment', sorted(FRAGMENT_VARIANTS))
def test_toy_config_fragments(fragment, toy_data, tmp_path, monkeypatch):
    """configs/_base_/toy/* listed next to an unmodified upstream config give loadable toy datasets."""
    import importlib

    from mmengine.config import Config
    from mmengine.registry import DATASETS, DefaultScope
    scope, upstream, prefix, n_train, n_val = FRAGMENT_VARIANTS[fragment]
    (tmp_path / 'data').mkdir()
    os.symlink(toy_data, tmp_path / 'data' / 'toy')
    frag = repo_path('configs', '_base_', 'toy', f'{fragment}.py')
    variant = tmp_path / 'variant.py'
    variant.write_text(f"_base_ = ['{upstream}', '{frag}']\n"
                       f'train_dataloader = _base_.{prefix}_train_dataloader\n'
                       f'val_dataloader = _base_.{prefix}_val_dataloader\n')
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(str(variant))
    importlib.import_module(f'{scope}.utils').register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope(scope):
        for loader, n in (('train_dataloader', n_train), ('val_dataloader', n_val)):
            ds = DATASETS.build(cfg[loader].dataset)
            assert len(ds) == n
            item = ds[0]
            assert 'inputs' in item and 'data_samples' in item
