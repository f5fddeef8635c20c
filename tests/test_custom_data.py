"""Own data: the generators of mmposmlp/datasets/custom.py and tools/misc/make_custom_config.py for every task.

The tool reads the classes / label range / class list from generated datasets with class counts other than
the base configs' (3-7 instead of 80 / 150 / 400 / 1000) and must fill classes, every head's num_classes,
palette, evaluator, data roots and the backbone initialisation; the written configs pass the dataset checks
and (slow tests) train and evaluate.
"""
import json
import os
import os.path as osp

import pytest

from toolcfg import load_tool, repo_path, run_tool

TOOL = repo_path('tools', 'misc', 'make_custom_config.py')
TOOL_REL = 'tools/misc/make_custom_config.py'
DET = repo_path('configs', 'posmlp', 'mask-rcnn_posmlp-t_1x_coco.py')
RETINA = repo_path('configs', 'wavemlp', 'retinanet_wavemlp-t_fpn_1x_coco.py')
UPERNET = repo_path('configs', 'posmlp', 'upernet_posmlp-t_8xb2-160k_ade20k-512x512.py')
VIDEO = repo_path('configs', 'posmlp_video', 'posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py')
CLS = repo_path('configs', 'posmlp', 'posmlp-t_8xb120_in1k.py')
FRUIT = ('kiwi', 'lemon', 'plum', 'fig')


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    from mmposmlp.datasets import custom
    root = tmp_path_factory.mktemp('own_data')
    return dict(
        coco4=custom.make_custom_coco(str(root / 'fruit'), FRUIT, category_ids=(3, 7, 8, 20)),
        coco7=custom.make_custom_coco(str(root / 'fruit7'), custom.DEFAULT_CLASSES['imagenet']),
        ade6=custom.make_custom_ade(str(root / 'garden')),
        ade3=custom.make_custom_ade(str(root / 'garden0'), ('soil', 'leaf', 'stone'), zero_is_unlabelled=False),
        video6=custom.make_custom_video(str(root / 'gestures')),
        folders7=custom.make_custom_imagenet(str(root / 'shapes')),
        ann3=custom.make_custom_imagenet(str(root / 'shapes3'), ('kiwi', 'lemon', 'plum'), ann_files=True))


def run_in_process(base, root, out, *extra):
    """The tool's main() in this process: (exit code, stdout, stderr)."""
    return run_tool_main([base, root, '--out', out] + list(extra))


def run_tool_main(argv):
    """tools/misc/make_custom_config.py main(argv) in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io
    tool = load_tool(TOOL)
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        rc = tool.main(list(argv))
    return rc, buf.getvalue(), err.getvalue()


def make(base, root, tmp_path, *extra, name='custom.py'):
    """Run the tool; returns (the written config, its stdout)."""
    out = str(tmp_path / name)
    rc, stdout, stderr = run_in_process(base, root, out, *extra)
    assert rc == 0, stderr
    from mmengine.config import Config
    return Config.fromfile(out), stdout


def refused(base, root, tmp_path, *extra):
    """The tool's one-line error for data it cannot follow."""
    rc, _, stderr = run_in_process(base, root, str(tmp_path / 'refused.py'), *extra)
    assert rc == 1 and stderr.startswith('ERROR: ') and stderr.count('\n') == 1, stderr
    assert not osp.exists(tmp_path / 'refused.py')
    return stderr


def heads(cfg):
    from mmposmlp.engine.dataset_checks import cfg_key, num_classes_paths
    return {cfg_key(p): v for p, v in num_classes_paths(cfg)}


def datasets(cfg):
    return [cfg[k].dataset for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')]


# ------------------------------------------------------------------ generators
def test_generators_write_their_layouts(data):
    import numpy as np
    from PIL import Image
    ann = json.load(open(osp.join(data['coco4'], 'annotations', 'train.json')))
    assert [(c['id'], c['name']) for c in ann['categories']] == list(zip((3, 7, 8, 20), FRUIT))
    assert {a['category_id'] for a in ann['annotations']} == {3, 7, 8, 20}
    assert all(osp.isfile(osp.join(data['coco4'], 'images', 'train', im['file_name'])) for im in ann['images'])
    values = set()
    for f in os.listdir(osp.join(data['ade6'], 'annotations', 'training')):
        values |= set(np.unique(np.asarray(Image.open(osp.join(data['ade6'], 'annotations', 'training', f)))))
    assert values == set(range(0, 7))  # 0 = unlabelled, classes 1..6
    assert open(osp.join(data['ade6'], 'classes.txt')).read().split() == ['meadow', 'pond', 'rock', 'shrub', 'hut',
                                                                           'cart']
    lines = open(osp.join(data['video6'], 'train_list.txt')).read().split('\n')
    assert sorted({int(line.split()[1]) for line in lines if line}) == list(range(6))
    assert sorted(os.listdir(osp.join(data['folders7'], 'train'))) == sorted(
        ('kiwi', 'lemon', 'plum', 'fig', 'lime', 'pear', 'date'))
    assert open(osp.join(data['ann3'], 'meta', 'val.txt')).readline().split() == ['kiwi/kiwi_0000.jpg', '0']


def test_generator_cli(tmp_path, capsys):
    res = run_tool(['-m', 'mmposmlp.datasets.custom', '--task', 'imagenet', '--out', str(tmp_path / 'x'),
                    '--classes', 'ant,bee', '--ann-files'], cwd=repo_path())
    assert res.returncode == 0, res.stderr
    assert '2 classes (ant, bee)' in res.stdout
    assert open(tmp_path / 'x' / 'meta' / 'classes.txt').read().split() == ['ant', 'bee']
    from mmposmlp.datasets.custom import main
    with pytest.raises(SystemExit) as exit_info:
        main(['--task', 'coco', '--out', str(tmp_path / 'y'), '--classes', 'ant'])
    assert exit_info.value.code == 2 and 'at least 2 distinct names' in capsys.readouterr().err


# ------------------------------------------------------------------ the tool, per task
def test_tool_detection_mask_rcnn(data, tmp_path):
    root = data['coco4']
    cfg, out = make(DET, root, tmp_path, '--pretrained', 'checkpoints/mine.pth')
    assert '4 classes (kiwi, lemon, plum, fig)' in out
    assert 'the backbone starts from checkpoints/mine.pth, which DOES NOT EXIST yet' in out
    for ds in datasets(cfg):
        assert ds.metainfo.classes == FRUIT and len(ds.metainfo.palette) == 4
        assert len(set(ds.metainfo.palette)) == 4 and ds.data_root == root
        assert ds.type == 'CocoDataset'
    assert cfg.train_dataloader.dataset.ann_file == 'annotations/train.json'
    assert cfg.train_dataloader.dataset.data_prefix.img == 'images/train/'
    assert cfg.test_dataloader.dataset.data_prefix.img == 'images/val/'
    assert heads(cfg) == {'model.roi_head.bbox_head.num_classes': 4, 'model.roi_head.mask_head.num_classes': 4}
    assert cfg.model.rpn_head.type == 'RPNHead'  # class-agnostic, untouched
    for ev in (cfg.val_evaluator, cfg.test_evaluator):
        assert ev.ann_file == osp.join(root, 'annotations', 'val.json') and ev.metric == ['bbox', 'segm']
    # the base config names the official file (no prefix: the default finds `backbone.` keys when a file has them)
    assert cfg.model.backbone.init_cfg == dict(type='Pretrained', checkpoint='checkpoints/mine.pth')
    assert cfg.model.backbone.type == 'mmposmlp.PosMLP' and cfg.optim_wrapper.optimizer.lr == 1e-4  # inherited


def test_tool_detection_retinanet_other_count(data, tmp_path):
    cfg, out = make(RETINA, data['coco7'], tmp_path, '--no-pretrained')
    assert 'the backbone starts from random weights' in out
    assert heads(cfg) == {'model.bbox_head.num_classes': 7}
    assert cfg.model.backbone.init_cfg is None
    assert cfg.val_evaluator.ann_file.endswith('fruit7/annotations/val.json')


def test_tool_segmentation_one_based_with_class_file(data, tmp_path):
    cfg, out = make(UPERNET, data['ade6'], tmp_path)
    names = ('meadow', 'pond', 'rock', 'shrub', 'hut', 'cart')
    assert heads(cfg) == {'model.decode_head.num_classes': 6, 'model.auxiliary_head.num_classes': 6}
    for ds in datasets(cfg):
        assert ds.type == 'BaseSegDataset' and ds.reduce_zero_label is True
        assert ds.metainfo.classes == names and len(ds.metainfo.palette) == 6
        rzl = [t.reduce_zero_label for t in ds.pipeline if t.type == 'LoadAnnotations']
        assert rzl == [True]
    assert cfg.train_dataloader.dataset.data_prefix == dict(img_path='images/training',
                                                            seg_map_path='annotations/training')
    assert cfg.val_dataloader.dataset.data_prefix.seg_map_path == 'annotations/validation'
    assert 'reduce_zero_label=True' in open(tmp_path / 'custom.py').read()


def test_tool_segmentation_zero_based(data, tmp_path):
    cfg, _ = make(UPERNET, data['ade3'], tmp_path, '--classes', 'soil,leaf,stone')
    assert heads(cfg) == {'model.decode_head.num_classes': 3, 'model.auxiliary_head.num_classes': 3}
    for ds in datasets(cfg):
        assert ds.reduce_zero_label is False and ds.metainfo.classes == ('soil', 'leaf', 'stone')
    # without names (no classes.txt, no --classes): the label range decides (0..2 -> 3 classes, 0 is a class)
    import shutil
    noname = str(tmp_path / 'noname')
    shutil.copytree(data['ade3'], noname)
    os.remove(osp.join(noname, 'classes.txt'))
    cfg, _ = make(UPERNET, noname, tmp_path, name='noname.py')
    assert cfg.train_dataloader.dataset.metainfo.classes == ('class_0', 'class_1', 'class_2')
    # two names for the values 0..2: read as 1-based with 0 = unlabelled
    cfg, _ = make(UPERNET, data['ade3'], tmp_path, '--classes', 'leaf,stone', name='two.py')
    assert cfg.train_dataloader.dataset.reduce_zero_label is True
    # names that do not cover the label range are refused
    err = refused(UPERNET, data['ade3'], tmp_path, '--classes', 'soil')
    assert 'values up to 2' in err and 'give 3 names' in err
    err = refused(UPERNET, data['ade3'], tmp_path, '--classes', 'leaf,stone', '--reduce-zero-label', 'false')
    assert 'give 3 names' in err


def test_tool_video(data, tmp_path):
    root = data['video6']
    cfg, _ = make(VIDEO, root, tmp_path)
    assert heads(cfg) == {'model.cls_head.num_classes': 6,
                          'model.data_preprocessor.blending.augments[0].num_classes': 6,
                          'model.data_preprocessor.blending.augments[1].num_classes': 6}
    assert cfg.model.data_preprocessor.blending.augments[0].type == 'MixupBlending'  # the list kept whole
    tr = cfg.train_dataloader.dataset
    assert (tr.data_root, tr.ann_file, tr.data_prefix.video) == (root, 'train_list.txt', 'videos/train')
    assert cfg.test_dataloader.dataset.ann_file == 'val_list.txt'
    assert cfg.model.backbone.init_cfg.checkpoint == 'checkpoints/posmlp-video-s_8xb120_in1k.pth'  # kept


def test_tool_classification_folders_and_ann_files(data, tmp_path):
    cfg, out = make(CLS, data['folders7'], tmp_path, '--no-pretrained')
    names = tuple(sorted(('kiwi', 'lemon', 'plum', 'fig', 'lime', 'pear', 'date')))
    assert '7 classes' in out
    assert heads(cfg) == {'model.head.num_classes': 7, 'data_preprocessor.num_classes': 7}
    for ds, split in zip(datasets(cfg), ('train', 'val', 'val')):
        assert ds.type == 'CustomDataset' and 'split' not in ds and ds.data_prefix == split
        assert ds.ann_file == '' and ds.metainfo.classes == names and ds.pipeline
    cfg, _ = make(CLS, data['ann3'], tmp_path, name='ann.py')
    assert heads(cfg) == {'model.head.num_classes': 3, 'data_preprocessor.num_classes': 3}
    assert cfg.train_dataloader.dataset.ann_file == 'meta/train.txt'
    assert cfg.train_dataloader.dataset.metainfo.classes == ('kiwi', 'lemon', 'plum')
    assert max(cfg.val_evaluator.topk) <= 3  # top-5 of 3 classes would fail in mmpretrain's Accuracy


def test_tool_refuses_inconsistent_data(data, tmp_path):
    import shutil
    root = str(tmp_path / 'fruit')
    shutil.copytree(data['coco4'], root)
    path = osp.join(root, 'annotations', 'val.json')
    ann = json.load(open(path))
    ann['categories'] = ann['categories'][:3]
    json.dump(ann, open(path, 'w'))
    err = refused(DET, root, tmp_path)
    assert path in err and 'same categories' in err
    assert 'is not a folder' in refused(DET, str(tmp_path / 'nowhere'), tmp_path)
    # mmpretrain numbers classes by the sorted folders of each split: the splits must have the same folders
    shapes = str(tmp_path / 'shapes')
    shutil.copytree(data['folders7'], shapes)
    shutil.rmtree(osp.join(shapes, 'val', 'fig'))
    err = refused(CLS, shapes, tmp_path)
    assert "different class folders (not in both: ['fig'])" in err


def _built(cfg, loader, scope):
    """The dataset of a written config, built by the library's own registry (no pipeline: raw samples)."""
    import copy

    from mmengine.registry import DATASETS, init_default_scope

    from mmposmlp.engine.entry import setup_library
    setup_library(cfg)
    init_default_scope(scope)
    ds_cfg = copy.deepcopy(cfg[loader].dataset)
    ds_cfg.pipeline = []
    return DATASETS.build(ds_cfg)


def test_written_configs_read_the_data_with_the_libraries_datasets(data, tmp_path):
    """What the tool writes is read by mmdet/mmseg/mmaction/mmpretrain as meant: the samples, their files and
    labels (COCO category ids 3, 7, 8, 20 -> labels 0..3; folder names -> their sorted index)."""
    cfg, _ = make(DET, data['coco4'], tmp_path, name='det.py')
    ds = _built(cfg, 'train_dataloader', 'mmdet')
    ann = json.load(open(osp.join(data['coco4'], 'annotations', 'train.json')))
    assert len(ds) == len(ann['images']) and ds.metainfo['classes'] == FRUIT
    by_image = {}
    for a in ann['annotations']:
        by_image.setdefault(a['image_id'], []).append((3, 7, 8, 20).index(a['category_id']))
    for i in range(len(ds)):
        info = ds.get_data_info(i)
        assert osp.isfile(info['img_path'])
        assert [inst['bbox_label'] for inst in info['instances']] == by_image[info['img_id']]

    cfg, _ = make(UPERNET, data['ade6'], tmp_path, name='seg.py')
    ds = _built(cfg, 'val_dataloader', 'mmseg')
    assert len(ds) == 3 and ds.metainfo['classes'][0] == 'meadow' and ds.metainfo['reduce_zero_label'] is True
    assert all(osp.isfile(ds.get_data_info(i)['seg_map_path']) for i in range(len(ds)))

    cfg, _ = make(VIDEO, data['video6'], tmp_path, name='video.py')
    ds = _built(cfg, 'train_dataloader', 'mmaction')
    labels = [ds.get_data_info(i)['label'] for i in range(len(ds))]
    assert sorted(set(labels)) == list(range(6)) and all(osp.isfile(ds.get_data_info(i)['filename'])
                                                        for i in range(len(ds)))

    for key in ('folders7', 'ann3'):
        cfg, _ = make(CLS, data[key], tmp_path, name=f'{key}.py')
        ds = _built(cfg, 'val_dataloader', 'mmpretrain')
        names = ds.metainfo['classes']
        for i in range(len(ds)):
            info = ds.get_data_info(i)
            assert osp.isfile(info['img_path'])
            assert osp.basename(osp.dirname(info['img_path'])) == names[info['gt_label']]


# ------------------------------------------------------------------ the worked examples of docs/own_data.md, end to end
GUIDE = repo_path('docs', 'own_data.md')
EXAMPLES = ('detection', 'segmentation', 'video', 'classification')
METRICS = {'detection': ('coco/bbox_mAP:', 'coco/segm_mAP:'), 'segmentation': ('mIoU:', ),
           'video': ('acc/top1:', ), 'classification': ('accuracy/top1:', )}


def readme_example(task):
    """The commands of docs/own_data.md's worked example for ``task``: the ```bash block after the line
    ``<!-- worked example: task -->``, continuation lines joined, comments dropped, as argument lists."""
    import re
    import shlex
    text = open(GUIDE).read()
    m = re.search(r'<!-- worked example: ' + task + r' -->\s*```bash\n(.*?)```', text, re.S)
    assert m, f'docs/own_data.md has no worked example block for {task}'
    commands = []
    for line in m.group(1).replace('\\\n', ' ').splitlines():
        args = shlex.split(line, comments=True)
        if args:
            commands.append(args)
    return commands


def example_workspace(tmp_path):
    """A folder laid out like the repository root for the guide's relative paths: tools/ and the configs'
    family folders link to the repository; data/, configs/custom/ and work_dirs/ are written there."""
    os.symlink(repo_path('tools'), tmp_path / 'tools')
    os.makedirs(tmp_path / 'configs' / 'custom')
    for name in os.listdir(repo_path('configs')):
        if name != 'custom' and osp.isdir(repo_path('configs', name)):
            os.symlink(repo_path('configs', name), tmp_path / 'configs' / name)
    return tmp_path


def test_readme_worked_examples_are_consistent():
    """Every worked example is generator -> make_custom_config -> train -> test: the train command reads the
    config the tool writes, the test command that config (or the one the run saves) and the checkpoint the
    train schedule ends with (base config + the train command's --cfg-options). The slow tests below run them."""
    import argparse

    from mmengine.config import Config, DictAction
    for task in EXAMPLES:
        gen, tool, train, test = readme_example(task)
        assert gen[:3] == ['python', '-m', 'mmposmlp.datasets.custom'] and tool[:2] == ['python', TOOL_REL]
        assert train[:2] == ['python', 'tools/train.py'] and test[:2] == ['python', 'tools/test.py']
        root, written = gen[gen.index('--out') + 1], tool[tool.index('--out') + 1]
        assert tool[3] == root and train[2] == written and written.startswith('configs/custom/')
        cfg = Config.fromfile(repo_path(tool[2]))
        if '--cfg-options' in train:
            parser = argparse.ArgumentParser()
            parser.add_argument('--cfg-options', nargs='+', action=DictAction)
            cfg.merge_from_dict(parser.parse_args(train[train.index('--cfg-options'):]).cfg_options)
        loop = cfg.train_cfg
        ckpt = (f'iter_{loop.max_iters}.pth' if loop.get('type') == 'IterBasedTrainLoop'
                else f'epoch_{loop.max_epochs}.pth')
        name = osp.splitext(osp.basename(written))[0]
        assert test[2] in (written, f'work_dirs/{name}/{name}.py'), test
        assert test[3:] == [f'work_dirs/{name}/{ckpt}'], (task, test, ckpt)


def _run(args, cwd):
    import time
    start = time.perf_counter()
    res = run_tool(args, cwd=str(cwd), env=dict(PYTHONPATH=repo_path(), OMP_NUM_THREADS='2'), timeout=1800)
    assert res.returncode == 0, (args, res.stdout[-3000:], res.stderr[-3000:])
    print(f'{time.perf_counter() - start:.0f} s: {" ".join(args)}')
    return res


def run_readme_example(task, tmp_path):
    """The guide's commands as written, in a workspace laid out like the repository; the test command's
    output."""
    example_workspace(tmp_path)
    res = None
    for args in readme_example(task):
        assert args[0] == 'python'
        res = _run(args[1:], tmp_path)
    return res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize('task', EXAMPLES)
def test_readme_worked_example_trains_and_evaluates(task, tmp_path):
    import re
    out = run_readme_example(task, tmp_path)
    last = [line for line in out.splitlines() if re.search(r'(Epoch|Iter)\(test\) \[', line)]
    assert last, out[-3000:]
    print(last[-1])
    for metric in METRICS[task]:
        assert re.search(re.escape(metric) + r'\s+\d+\.\d+', last[-1]), (metric, last[-1])
    if task == 'segmentation':  # the per-class table names the data's own classes
        assert all(c in out for c in ('meadow', 'pond', 'rock', 'shrub', 'hut', 'cart'))
