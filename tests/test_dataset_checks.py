"""Pre-flight dataset checks of tools/train.py and tools/test.py (mmposmlp/engine/dataset_checks.py).

Each check is run on generated datasets with their own classes (mmposmlp/datasets/custom.py), first on data
that fits the config (no error), then on data/configs broken in one way: the error must be one sentence that
names the file, what it found and the fix.
"""
import json
import os
import os.path as osp
import shutil

import numpy as np
import pytest

from toolcfg import load_tool, repo_path

DET = repo_path('configs', 'posmlp', 'mask-rcnn_posmlp-t_1x_coco.py')
SEG = repo_path('configs', 'posmlp', 'fpn_posmlp-t_4xb4-80k_ade20k-512x512.py')
VIDEO = repo_path('configs', 'posmlp_video', 'posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py')
CLS = repo_path('configs', 'posmlp', 'posmlp-t_8xb120_in1k.py')


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    from mmposmlp.datasets import custom
    root = tmp_path_factory.mktemp('custom_data')
    return dict(
        coco=custom.make_custom_coco(str(root / 'fruit'), ('kiwi', 'lemon', 'plum')),
        ade=custom.make_custom_ade(str(root / 'garden'), ('meadow', 'pond', 'rock', 'shrub')),
        video=custom.make_custom_video(str(root / 'gestures'), ('swipe_right', 'swipe_left', 'swipe_down')),
        imagenet=custom.make_custom_imagenet(str(root / 'shapes'), ('kiwi', 'lemon', 'plum', 'fig', 'lime'),
                                             ann_files=True))


def copy_data(src, tmp_path):
    dst = str(tmp_path / osp.basename(src))
    shutil.copytree(src, dst)
    return dst


def det_options(root, classes=('kiwi', 'lemon', 'plum'), heads=3, ann='annotations/{}.json'):
    opts = {}
    for loader, split in (('train_dataloader', 'train'), ('val_dataloader', 'val'), ('test_dataloader', 'val')):
        opts[f'{loader}.dataset.data_root'] = root + '/'
        opts[f'{loader}.dataset.ann_file'] = ann.format(split)
        opts[f'{loader}.dataset.data_prefix.img'] = f'images/{split}/'
        if classes is not None:
            opts[f'{loader}.dataset.metainfo'] = dict(classes=tuple(classes))
    for ev in ('val_evaluator', 'test_evaluator'):
        opts[f'{ev}.ann_file'] = osp.join(root, ann.format('val'))
    if heads is not None:
        opts['model.roi_head.bbox_head.num_classes'] = heads
        opts['model.roi_head.mask_head.num_classes'] = heads
    return opts


def seg_options(root, classes=('meadow', 'pond', 'rock', 'shrub'), heads=4, rzl=True, pipeline_rzl=None):
    from mmengine.config import Config
    base = Config.fromfile(SEG)
    opts = {}
    for loader, split in (('train_dataloader', 'training'), ('val_dataloader', 'validation'),
                          ('test_dataloader', 'validation')):
        pipe = [dict(t) for t in base[loader].dataset.pipeline]
        for t in pipe:
            if t['type'] == 'LoadAnnotations':
                t['reduce_zero_label'] = rzl if pipeline_rzl is None else pipeline_rzl
        opts[f'{loader}.dataset'] = dict(type='BaseSegDataset', data_root=root, reduce_zero_label=rzl,
                                         img_suffix='.jpg', seg_map_suffix='.png', pipeline=pipe,
                                         data_prefix=dict(img_path=f'images/{split}',
                                                          seg_map_path=f'annotations/{split}'),
                                         metainfo=dict(classes=tuple(classes)))
    opts['model.decode_head.num_classes'] = heads
    return opts


def video_options(root, heads=3, ann='{}_list.txt'):
    opts = {}
    for loader, split in (('train_dataloader', 'train'), ('val_dataloader', 'val'), ('test_dataloader', 'val')):
        opts[f'{loader}.dataset.ann_file'] = osp.join(root, ann.format(split))
        opts[f'{loader}.dataset.data_prefix.video'] = osp.join(root, 'videos', split)
    opts['model.cls_head.num_classes'] = heads
    opts['model.data_preprocessor.blending.augments'] = [dict(type='MixupBlending', alpha=0.8, num_classes=heads),
                                                         dict(type='CutmixBlending', alpha=1, num_classes=heads)]
    return opts


def cls_options(root, heads=5, ann=True, classes=None):
    opts = {}
    for loader, split in (('train_dataloader', 'train'), ('val_dataloader', 'val'), ('test_dataloader', 'val')):
        ds = dict(_delete_=True, type='CustomDataset', data_root=root, data_prefix=split, with_label=True,
                  ann_file=f'meta/{split}.txt' if ann else '', pipeline=[dict(type='LoadImageFromFile')])
        if classes is not None:
            ds['metainfo'] = dict(classes=tuple(classes))
        opts[f'{loader}.dataset'] = ds
    opts['model.head.num_classes'] = heads
    opts['data_preprocessor.num_classes'] = heads  # Mixup/CutMix one-hot size
    return opts


def check(config, options, loaders=('train_dataloader', 'val_dataloader')):
    from mmposmlp.engine.dataset_checks import check_datasets
    from mmposmlp.engine.entry import load_config
    cfg, scope = load_config(config, options)
    check_datasets(cfg, list(loaders), scope)
    return cfg


def error(config, options, *phrases, loaders=('train_dataloader', 'val_dataloader')):
    """The check's message: one sentence (one line, one final full stop) holding every phrase."""
    from mmposmlp.engine.entry import UserError
    with pytest.raises(UserError) as info:
        check(config, options, loaders)
    msg = str(info.value)
    assert '\n' not in msg and msg.endswith('.'), msg
    for p in phrases:
        assert p in msg, f'{p!r} not in: {msg}'
    return msg


# ------------------------------------------------------------------ detection (COCO)
def test_coco_fitting_config_passes_and_the_issue_case_is_named(data, tmp_path):
    root = data['coco']
    check(DET, det_options(root))
    # the issue's case: the headline config pointed at a 3-category file, classes and heads left at COCO's 80
    opts = det_options(root, classes=None, heads=None)
    msg = error(DET, opts, osp.join(root, 'annotations/train.json'), '80 class names', '80 of them',
                "'kiwi', 'lemon', 'plum'", 'num_classes=3', 'model.roi_head.bbox_head.num_classes',
                'model.roi_head.mask_head.num_classes', 'make_custom_config.py')
    assert 'CocoDataset.METAINFO' in msg  # says where the 80 names come from
    # the issue's exact case: 3 real COCO names, the file lists only them
    from mmposmlp.datasets.custom import make_custom_coco
    coco3 = make_custom_coco(str(tmp_path / 'coco3'), ('person', 'bicycle', 'car'), splits=(('train', 3), ('val', 2)))
    error(DET, det_options(coco3, classes=None, heads=None), '77 of them', "'motorcycle'", 'num_classes=3')
    # classes set, heads left at 80
    error(DET, det_options(root, heads=None), 'the data has 3 classes', 'model.roi_head.bbox_head.num_classes=80',
          'set num_classes=3')
    # a class name the file does not have
    error(DET, det_options(root, classes=('kiwi', 'lemon', 'plumm')), "'plumm'", 'not categories')


def test_coco_evaluator_ann_file_is_checked(data, tmp_path):
    root = data['coco']
    opts = det_options(root)
    opts['val_evaluator.ann_file'] = str(tmp_path / 'missing.json')
    error(DET, opts, 'dataset not found', str(tmp_path / 'missing.json'), 'val_evaluator.ann_file')
    # an evaluator file whose categories are not the classes: CocoMetric would fail after training
    other = tmp_path / 'other.json'
    ann = json.load(open(osp.join(root, 'annotations/val.json')))
    ann['categories'] = [dict(id=1, name='apple'), dict(id=2, name='pear'), dict(id=3, name='plum')]
    other.write_text(json.dumps(ann))
    opts['val_evaluator.ann_file'] = str(other)
    error(DET, opts, str(other), "'kiwi', 'lemon'", 'val_evaluator')
    opts['test_evaluator.ann_file'] = str(tmp_path / 'gone.json')
    error(DET, opts, 'test_evaluator.ann_file', loaders=('test_dataloader', ))


def test_coco_empty_and_broken_annotation_files(data, tmp_path):
    root = copy_data(data['coco'], tmp_path)
    path = osp.join(root, 'annotations', 'train.json')
    ann = json.load(open(path))
    json.dump(dict(ann, annotations=[]), open(path, 'w'))
    error(DET, det_options(root), path, 'no annotations', 'filter_empty_gt')
    # an empty val file is fine for evaluation-only annotations? no: no images at all is refused
    json.dump(dict(ann, images=[], annotations=[]), open(path, 'w'))
    error(DET, det_options(root), path, 'lists no images')
    open(path, 'w').close()
    error(DET, det_options(root), path, 'empty file (0 bytes)')
    with open(path, 'w') as f:
        f.write('{"images": [')
    error(DET, det_options(root), path, 'not valid JSON')
    json.dump(dict(ann, annotations=[dict(a, category_id=99) for a in ann['annotations']]), open(path, 'w'))
    error(DET, det_options(root), path, 'none of its', 'annotations belongs to the 3 classes')
    json.dump(ann, open(path, 'w'))
    os.remove(osp.join(root, 'images', 'train', ann['images'][-1]['file_name']))
    error(DET, det_options(root), ann['images'][-1]['file_name'], 'data_prefix.img')


def test_coco_scan_of_large_files_is_bounded_and_agrees(data, tmp_path, monkeypatch):
    """Files above COCO_FULL_PARSE_BYTES are scanned in chunks, not parsed: same verdicts."""
    from mmposmlp.engine import dataset_checks as dc
    root = copy_data(data['coco'], tmp_path)
    path = osp.join(root, 'annotations', 'train.json')
    ann = json.load(open(path))
    full = dc._load_coco(path)
    monkeypatch.setattr(dc, 'COCO_FULL_PARSE_BYTES', 0)
    monkeypatch.setattr(dc, 'SCAN_CHUNK_BYTES', 97)  # keys fall across chunk boundaries
    scanned = dc._load_coco(path)
    assert scanned['annotations'] is None and scanned['images'] is None  # nothing per-annotation was parsed
    assert scanned['categories'] == full['categories'] == ann['categories']
    assert scanned['has_images'] and scanned['has_annotations']
    # categories at the end (as in real COCO), padded annotations before them
    ann2 = dict(info=dict(description='x' * 500), images=ann['images'], annotations=[], categories=ann['categories'])
    json.dump(ann2, open(path, 'w'), indent=2)
    scanned = dc._load_coco(path)
    assert scanned['categories'] == ann['categories'] and scanned['has_images'] and not scanned['has_annotations']
    error(DET, det_options(root), path, 'no annotations')
    json.dump(dict(ann2, annotations=ann['annotations']), open(path, 'w'))
    error(DET, det_options(root, classes=None, heads=None), path, '80 of them')


# ------------------------------------------------------------------ segmentation (ADE20K layout)
def test_seg_fitting_config_passes_and_label_range_is_checked(data):
    root = data['ade']  # classes stored as 1..4, 0 = unlabelled
    check(SEG, seg_options(root))
    # the default ADE20K head (150) for 4 classes
    error(SEG, seg_options(root, heads=150), 'the data has 4 classes', 'model.decode_head.num_classes=150')
    # too few classes for the values in the maps
    msg = error(SEG, seg_options(root, classes=('meadow', 'pond', 'rock'), heads=3),
                'label values 4 are outside [0, 3)', 'ignore index 255', 'reduce_zero_label=True',
                'the maps hold 4 classes')
    assert 'annotations/' in msg and msg.split(':')[0].endswith('.png')
    # wrong reduce_zero_label: 1-based maps read as 0-based
    error(SEG, seg_options(root, rzl=False), 'label values 4 are outside [0, 4)',
          'if 0 means "unlabelled" in the maps, set reduce_zero_label=True')


def test_seg_reduce_zero_label_mistakes(data, tmp_path):
    from mmposmlp.datasets.custom import make_custom_ade
    root0 = make_custom_ade(str(tmp_path / 'zero_based'), ('background', 'pond', 'rock'), zero_is_unlabelled=False)
    check(SEG, seg_options(root0, classes=('background', 'pond', 'rock'), heads=3, rzl=False))
    # 0-based maps whose class 0 is background, read with reduce_zero_label=True: class 0 silently ignored
    error(SEG, seg_options(root0, classes=('background', 'pond', 'rock'), heads=3, rzl=True),
          "class 0 of metainfo.classes is 'background'", 'reduce_zero_label=False')
    # dataset and pipeline disagree (mmseg asserts at the first batch)
    error(SEG, seg_options(data['ade'], rzl=True, pipeline_rzl=False), 'reduce_zero_label=True',
          "LoadAnnotations has reduce_zero_label=False", 'set both')


def test_seg_label_map_size_missing_map_and_empty_folder(data, tmp_path):
    from PIL import Image
    root = copy_data(data['ade'], tmp_path)
    seg = osp.join(root, 'annotations', 'training', 'training_00002.png')
    lab = np.asarray(Image.open(seg))
    Image.fromarray(lab[:, :-8]).save(seg)  # 120 wide, its image 128
    msg = error(SEG, seg_options(root), seg, 'label map is 120x96', 'training_00002.jpg is 128x96',
                'size of their images')
    assert msg.startswith(seg)
    os.remove(seg)
    error(SEG, seg_options(root), seg, 'does not exist', 'seg_map_path')
    img_dir = osp.join(root, 'images', 'training')
    for f in os.listdir(img_dir):
        os.remove(osp.join(img_dir, f))
    error(SEG, seg_options(root), img_dir, "holds no images ending in '.jpg'")


def test_unreadable_files_and_malformed_annotations_are_named(data, tmp_path):
    """The remaining one-sentence errors, one per broken file: a COCO file that is a JSON list or has no
    categories, a seg split file with no names, an image or a label map that cannot be read, a classification
    list naming an image that is not there (3-, 4- and 5-class sets)."""
    coco = copy_data(data['coco'], tmp_path)
    path = osp.join(coco, 'annotations', 'train.json')
    ann = json.load(open(path))
    json.dump([ann], open(path, 'w'))
    error(DET, det_options(coco), path, 'holds a JSON list, not a COCO dict')
    json.dump(dict(ann, categories=[]), open(path, 'w'))
    error(DET, det_options(coco), path, 'no usable "categories" list', 'one entry per class')

    ade = copy_data(data['ade'], tmp_path)
    opts = seg_options(ade)
    split = osp.join(ade, 'train_split.txt')
    open(split, 'w').close()
    opts['train_dataloader.dataset.ann_file'] = 'train_split.txt'
    error(SEG, opts, split, 'is empty', 'one image name', "ann_file=''")
    with open(split, 'w') as f:
        f.write('training_00001\ntraining_00003\n')
    check(SEG, opts)  # the listed images only
    img = osp.join(ade, 'images', 'training', 'training_00003.jpg')
    with open(img, 'wb') as f:
        f.write(b'not a jpeg')
    msg = error(SEG, opts, img, 'the image cannot be read', 'valid image file')
    assert msg.startswith(img)
    seg = osp.join(ade, 'annotations', 'training', 'training_00001.png')
    with open(seg, 'wb') as f:
        f.write(b'\x89PNG broken')
    msg = error(SEG, opts, seg, 'the label map cannot be read', 'single-channel PNG')
    assert msg.startswith(seg)

    shapes = copy_data(data['imagenet'], tmp_path)
    first = open(osp.join(shapes, 'meta', 'val.txt')).readline().split()[0]
    os.remove(osp.join(shapes, 'val', first))
    error(CLS, cls_options(shapes, ann=True), osp.join(shapes, 'meta', 'val.txt'), 'line 1 names',
          osp.join(shapes, 'val', first), 'does not exist', 'data_prefix')


def test_seg_label_maps_are_sampled_with_a_cap(data, monkeypatch):
    """At most SAMPLE_LABEL_MAPS label maps are decoded per dataset, spread over the list (first/last in)."""
    from PIL import Image

    from mmposmlp.engine import dataset_checks as dc
    assert dc._evenly(list(range(10)), 3) == [0, 5, 9] or dc._evenly(list(range(10)), 3) == [0, 4, 9]
    assert dc._evenly(list(range(1000)), 64)[-1] == 999 and len(dc._evenly(list(range(1000)), 64)) == 64
    opened = []
    real_open = Image.open

    def counting_open(path, *a, **k):
        opened.append(str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(Image, 'open', counting_open)
    monkeypatch.setattr(dc, 'SAMPLE_LABEL_MAPS', 2)
    check(SEG, seg_options(data['ade']), loaders=('train_dataloader', ))
    maps = [p for p in opened if p.endswith('.png')]
    assert len(maps) == 2 and maps[0].endswith('training_00001.png') and maps[1].endswith('training_00006.png')


# ------------------------------------------------------------------ video lists
def test_video_fitting_config_passes_and_labels_are_checked(data, tmp_path):
    root = data['video']
    check(VIDEO, video_options(root))
    # the default Kinetics head would accept labels 0..2 (in range): fine for the check, but the heads disagree
    opts = video_options(root)
    opts['model.cls_head.num_classes'] = 2
    error(VIDEO, opts, 'heads disagree', 'model.cls_head.num_classes=2',
          'model.data_preprocessor.blending.augments[0].num_classes=3')
    msg = error(VIDEO, video_options(root, heads=2), osp.join(root, 'train_list.txt'), 'has label 2',
                'outside [0, 2)', 'set num_classes=3', 'model.cls_head.num_classes')
    assert 'line ' in msg
    root2 = copy_data(root, tmp_path)
    open(osp.join(root2, 'train_list.txt'), 'w').close()
    error(VIDEO, video_options(root2), osp.join(root2, 'train_list.txt'), 'is empty (0 bytes)')
    with open(osp.join(root2, 'train_list.txt'), 'w') as f:
        f.write('\n\n')
    error(VIDEO, video_options(root2), 'has no samples')
    with open(osp.join(root2, 'train_list.txt'), 'w') as f:
        f.write('swipe_left_000.mp4 left\n')
    error(VIDEO, video_options(root2), 'line 1', 'not an integer')


def test_video_zero_byte_unreadable_and_missing_videos(data, tmp_path):
    root = copy_data(data['video'], tmp_path)
    video = osp.join(root, 'videos', 'train', 'swipe_down_001.mp4')
    open(video, 'w').close()
    msg = error(VIDEO, video_options(root), video, 'empty file (0 bytes)', 'line 6 of')
    assert msg.startswith(video)
    with open(video, 'wb') as f:
        f.write(os.urandom(4096))
    msg = error(VIDEO, video_options(root), video, 'cannot be opened or decoded as a video by decord', 're-encode')
    assert len(msg) < 600
    os.remove(video)
    error(VIDEO, video_options(root), 'line 6 names', video, 'does not exist', 'data_prefix')


def corrupt_frames(path):
    """Zero the coded frames of an mp4 after its first 30 %: the container header (and the first frame) still
    read, later frames do not decode (a video damaged in the middle)."""
    with open(path, 'rb') as f:
        raw = f.read()
    start, end = raw.find(b'mdat') + 4, raw.find(b'moov') - 4
    assert 0 < start < end, 'PyAV writes mdat before moov'
    cut = start + (end - start) * 3 // 10
    with open(path, 'wb') as f:
        f.write(raw[:cut] + bytes(end - cut) + raw[end:])


def test_video_whose_frames_do_not_decode_fails_before_training(data, tmp_path):
    import decord
    root = copy_data(data['video'], tmp_path)
    video = osp.join(root, 'videos', 'train', 'swipe_left_001.mp4')
    corrupt_frames(video)
    assert len(decord.VideoReader(video, num_threads=1)) == 8  # its header opens: a header-only check passes it
    msg = error(VIDEO, video_options(root), video, 'line 5 of',
                'cannot be opened or decoded as a video by decord', 're-encode')
    assert msg.startswith(video) and len(msg) < 600


def test_video_checks_add_the_decode_guard_hook(data):
    cfg = check(VIDEO, video_options(data['video']))
    hooks = [h['type'] for h in cfg.custom_hooks]
    assert hooks.count('mmposmlp.NameUndecodableVideosHook') == 1
    from mmposmlp.engine.dataset_checks import add_video_decode_guard
    assert add_video_decode_guard(cfg, ['train_dataloader']) is False  # added once
    cfg = check(CLS, cls_options(data['imagenet']))
    assert 'NameUndecodableVideosHook' not in str(cfg.get('custom_hooks'))  # no videos, no hook


def test_named_video_transform_turns_decoder_errors_into_one_sentence(data, tmp_path):
    """The wrapped mmaction transforms, called as the dataset calls them; and the text torch's DataLoader
    makes of a worker's exception is cut back to the sentence."""
    from mmaction.datasets.transforms import DecordDecode, DecordInit
    from mmcv.transforms import Compose

    from mmposmlp.engine.dataset_checks import (NamedVideoTransform, UndecodableVideoError,
                                                name_undecodable_videos)
    root = copy_data(data['video'], tmp_path)
    video = osp.join(root, 'videos', 'train', 'swipe_left_001.mp4')
    corrupt_frames(video)

    class Dataset:
        ann_file = osp.join(root, 'train_list.txt')
        pipeline = Compose([DecordInit(), dict(type='mmaction.SampleFrames', clip_len=8, num_clips=1),
                            DecordDecode()])

    ds = Dataset()
    wrapper = type('Wrapper', (), dict(dataset=ds))()  # e.g. RepeatDataset
    assert name_undecodable_videos(wrapper) == 2 and name_undecodable_videos(wrapper) == 0
    assert [type(t).__name__ for t in ds.pipeline.transforms] == ['NamedVideoTransform', 'SampleFrames',
                                                                  'NamedVideoTransform']
    good = ds.pipeline(dict(filename=osp.join(root, 'videos', 'train', 'swipe_left_000.mp4'), start_index=0,
                            modality='RGB'))
    assert good['imgs'][0].shape == (64, 64, 3) and len(good['imgs']) == 8
    with pytest.raises(UndecodableVideoError) as info:
        ds.pipeline(dict(filename=video, start_index=0, modality='RGB'))
    msg = str(info.value)
    assert msg.startswith(f'{video} (listed in {Dataset.ann_file}) failed in DecordDecode (')
    assert '\n' not in msg and msg.endswith('.') and 'remove its line from the list' in msg
    assert type(info.value.__cause__).__name__ == 'DECORDError'
    # torch.utils.data._utils.ExceptionWrapper.reraise: type(exc)(f'Caught ... Original {traceback}')
    import traceback

    from torch.utils.data._utils import ExceptionWrapper
    try:
        raise info.value
    except UndecodableVideoError:
        wrapped = ExceptionWrapper(where='in DataLoader worker process 0')
    assert wrapped.exc_msg.startswith('Traceback') and 'DECORDError' in wrapped.exc_msg  # reraise adds 'Original '
    with pytest.raises(UndecodableVideoError) as again:
        wrapped.reraise()
    assert str(again.value) == msg, traceback.format_exception(again.value)
    assert repr(NamedVideoTransform(DecordInit(), 'x')) == repr(DecordInit())


def run_tool(name, argv, capsys):
    """tools/<name>.py as the command line runs it (run_cli: exit code, one ERROR line), in this process:
    (exit code, stderr)."""

    from conftest import drop_new_mmengine_instances, mmengine_instance_names
    from mmposmlp.engine.entry import run_cli
    tool = load_tool('tools', f'{name}.py')
    before = mmengine_instance_names()
    capsys.readouterr()
    try:
        code = run_cli(tool.main, [str(a) for a in argv])
    finally:
        drop_new_mmengine_instances(before)
    return code, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_video_failing_past_the_pre_flight_sample_stops_train_and_test_naming_it(data, tmp_path, monkeypatch,
                                                                                 capsys):
    """tools/train.py / tools/test.py on the toy PosMLP-Video (3 classes): a video outside the pre-flight sample
    that does not decode stops the run with the one-sentence error naming it, in the main process (train
    loader) and from a DataLoader worker (val and test loaders, num_workers=1)."""
    import mmposmlp.engine.dataset_checks as dc
    monkeypatch.setattr(dc, 'SAMPLE_VIDEOS', 2)  # the first and the last video of each list
    root = copy_data(data['video'], tmp_path)
    cfg = str(tmp_path / 'gestures.py')
    tool = repo_path('tools', 'misc', 'make_custom_config.py')
    code, err = run_tool('misc/make_custom_config', [repo_path('configs', 'posmlp_video', 'toy',
                                                               'posmlp-video-s_toy-k400.py'), root, '--out', cfg],
                         capsys)
    assert code == 0 and osp.isfile(cfg), (tool, err)
    opts = ['--cfg-options', 'train_cfg.max_epochs=1', 'train_cfg.val_interval=1', 'val_dataloader.num_workers=1',
            'test_dataloader.num_workers=1']

    def one_sentence(err, video, listed, transform):
        assert err.count('\n') == 1 and 'Traceback' not in err, err
        assert err.startswith(f'ERROR: {video} (listed in {listed}) failed in {transform} ('), err
        assert 'remove its line from the list' in err and err.rstrip().endswith('opened and decoded).')

    train_bad = osp.join(root, 'videos', 'train', 'swipe_left_000.mp4')  # line 2 of 6: not sampled
    corrupt_frames(train_bad)
    code, err = run_tool('train', [cfg, '--work-dir', tmp_path / 'w1'] + opts, capsys)
    assert code == 1
    one_sentence(err, train_bad, osp.join(root, 'train_list.txt'), 'DecordDecode')

    shutil.copy(osp.join(data['video'], 'videos', 'train', 'swipe_left_000.mp4'), train_bad)
    val_bad = osp.join(root, 'videos', 'val', 'swipe_left_000.mp4')  # line 2 of 3: not sampled
    corrupt_frames(val_bad)
    code, err = run_tool('train', [cfg, '--work-dir', tmp_path / 'w2'] + opts, capsys)
    assert code == 1
    one_sentence(err, val_bad, osp.join(root, 'val_list.txt'), 'DecordDecode')
    ckpt = tmp_path / 'w2' / 'epoch_1.pth'
    assert ckpt.is_file()  # the training epoch ran; its validation stopped
    code, err = run_tool('test', [cfg, ckpt, '--work-dir', tmp_path / 'w3'] + opts[:1] + opts[-1:], capsys)
    assert code == 1
    one_sentence(err, val_bad, osp.join(root, 'val_list.txt'), 'DecordDecode')


# ------------------------------------------------------------------ classification (folders, ann files)
def test_classification_folders_and_ann_files(data, tmp_path):
    root = data['imagenet']  # 5 classes
    check(CLS, cls_options(root, ann=True))
    check(CLS, cls_options(root, ann=False))
    check(CLS, cls_options(root, ann=True, classes=('kiwi', 'lemon', 'plum', 'fig', 'lime')))
    opts = cls_options(root)
    opts['data_preprocessor.num_classes'] = 1000  # Mixup/CutMix would make 1000-wide targets for 5 logits
    error(CLS, opts, 'heads disagree', 'model.head.num_classes=5', 'data_preprocessor.num_classes=1000')
    opts['model.train_cfg'] = None  # without Mixup/CutMix the preprocessor's num_classes is not used
    check(CLS, opts)
    error(CLS, cls_options(root, heads=4, ann=False), '5 class folders', 'model.head.num_classes=4',
          'set num_classes=5')
    error(CLS, cls_options(root, heads=4, ann=True), osp.join(root, 'meta', 'train.txt'), 'has label 4',
          'outside [0, 4)')
    error(CLS, cls_options(root, heads=5, ann=True, classes=('kiwi', 'lemon', 'plum')), 'the data has 3 classes',
          'model.head.num_classes=5')
    error(CLS, cls_options(root, heads=3, ann=False, classes=('kiwi', 'lemon', 'plum')), '5 class folders',
          'names 3 classes', 'sorted folder names')
    root2 = copy_data(root, tmp_path)
    with open(osp.join(root2, 'meta', 'train.txt'), 'w') as f:
        f.write('\n')
    error(CLS, cls_options(root2, ann=True), 'meta/train.txt has no samples')
    shutil.rmtree(osp.join(root2, 'val'))
    os.makedirs(osp.join(root2, 'val'))
    error(CLS, cls_options(root2, ann=False), osp.join(root2, 'val'), 'no class sub-folders')


def test_classification_mmpretrain_imagenet_type_with_split(data, tmp_path):
    """mmpretrain's ImageNet type with split='train' reads meta/train.txt (ann-file style)."""
    root = data['imagenet']
    opts = {}
    for loader, split in (('train_dataloader', 'train'), ('val_dataloader', 'val')):
        opts[f'{loader}.dataset.data_root'] = root
        opts[f'{loader}.dataset.split'] = split
    opts['model.head.num_classes'] = 3
    opts['data_preprocessor.num_classes'] = 3
    error(CLS, opts, osp.join(root, 'meta', 'train.txt'), 'outside [0, 3)')


# ------------------------------------------------------------------ through the tools
def test_train_and_test_tools_run_the_checks(data, tmp_path, capsys):
    from mmposmlp.engine.entry import run_cli
    root = data['coco']
    train = load_tool('tools', 'train.py')
    test = load_tool('tools', 'test.py')
    opts = [f'{k}={v!r}' if isinstance(v, tuple) else f'{k}={v}' for k, v in
            det_options(root, classes=None, heads=None).items()]
    rc = run_cli(train.main, [DET, '--work-dir', str(tmp_path / 'w'), '--cfg-options'] + opts)
    err = capsys.readouterr().err.strip()
    assert rc == 1 and err.startswith('ERROR: ') and err.count('\n') == 0, err
    assert 'annotations/train.json' in err and '80 of them' in err
    ckpt = tmp_path / 'x.pth'
    ckpt.write_bytes(b'0')
    rc = run_cli(test.main, [DET, str(ckpt), '--work-dir', str(tmp_path / 'w'), '--cfg-options'] + opts)
    err = capsys.readouterr().err.strip()
    assert rc == 1 and 'annotations/val.json' in err and '80 of them' in err, err


# ------------------------------------------------------------------ no false alarms on the shipped data/configs
TOY_CONFIGS = ('fpn_posmlp-t_toy-ade20k.py', 'mask-rcnn_posmlp-t_1x_toy-coco.py', 'posmlp-t_toy-in1k.py',
               'retinanet_posmlp-t_1x_toy-coco.py', 'upernet_posmlp-t_toy-ade20k.py')


@pytest.mark.parametrize('name', TOY_CONFIGS)
def test_toy_configs_pass_on_toy_data(name, toy_data, tmp_path, monkeypatch):
    os.makedirs(tmp_path / 'data')
    os.symlink(toy_data, tmp_path / 'data' / 'toy')
    monkeypatch.chdir(tmp_path)
    check(repo_path('configs', 'posmlp', 'toy', name), None, ('train_dataloader', 'val_dataloader', 'test_dataloader'))


def test_toy_kinetics_with_the_k400_config_passes(toy_data):
    """Labels 0..3 of the toy Kinetics lists fit the 400-class head (and its Mixup/CutMix)."""
    root = osp.join(toy_data, 'kinetics400')
    opts = {}
    for loader, split in (('train_dataloader', 'train'), ('val_dataloader', 'val')):
        opts[f'{loader}.dataset.ann_file'] = osp.join(root, f'kinetics400_{split}_list_videos.txt')
        opts[f'{loader}.dataset.data_prefix.video'] = osp.join(root, f'videos_{split}')
    check(VIDEO, opts)


def test_every_path_a_config_reads_is_checked(tmp_path):
    """Data roots, any ``*_file`` (annotation, split, proposal, label-map files), data_prefix folders,
    class-list files given as metainfo.classes and the evaluators' ann_file."""
    from mmengine.config import Config

    from mmposmlp.engine.dataset_checks import missing_dataset_paths
    root = tmp_path / 'd'
    (root / 'imgs').mkdir(parents=True)
    (root / 'ann.json').write_text('{}')
    cfg = Config(dict(
        train_dataloader=dict(dataset=dict(type='RepeatDataset', times=2, dataset=dict(
            data_root=str(root), ann_file='ann.json', proposal_file='props.pkl', data_prefix=dict(img='imgs'),
            metainfo=dict(classes='classes.txt')))),
        val_dataloader=dict(dataset=dict(data_root=str(root), ann_file='splits/val.txt',
                                         data_prefix=dict(img_path='imgs', seg_map_path='labels'))),
        val_evaluator=[dict(type='CocoMetric', ann_file=str(root / 'val.json')), dict(type='IoUMetric')],
        test_evaluator=dict(type='Evaluator', metrics=[dict(type='CocoMetric', ann_file=str(root / 't.json'))])))
    found = missing_dataset_paths(cfg, ['train_dataloader', 'val_dataloader', 'test_dataloader'])
    assert found == [
        (str(root / 'props.pkl'), 'train_dataloader.dataset.dataset.proposal_file'),
        (str(root / 'classes.txt'), 'train_dataloader.dataset.dataset.metainfo.classes'),
        (str(root / 'splits/val.txt'), 'val_dataloader.dataset.ann_file'),
        (str(root / 'labels'), 'val_dataloader.dataset.data_prefix.seg_map_path'),
        (str(root / 'val.json'), 'val_evaluator[0].ann_file'),
    ]
    found = missing_dataset_paths(Config(dict(test_dataloader=dict(dataset=dict(type='CocoDataset')),
                                              test_evaluator=cfg.test_evaluator)),
                                  ['test_dataloader'])
    assert found == [(str(root / 't.json'), 'test_evaluator[0].ann_file')]
