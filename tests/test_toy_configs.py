"""Every shipped toy config trains: each file under configs/*/toy/ (and each toy variant built from the
configs/_base_/toy/ fragments, as tests/test_toy_data.py builds them) trains 2 iterations with
tools/train.py and writes a checkpoint.

The detection/segmentation configs at 416x320 take 1-2 min each on 2 busy cores: they are marked ``slow``
here (the PosMLP-T ones also train, validate and test in the default suite in tests/test_posmlp_e2e.py)."""
import glob
import os
import os.path as osp
import subprocess
import sys

import pytest

from mmposmlp.utils.compat import safe_torch_load
from toolcfg import TWO_ITERATIONS

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TOY_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'configs', '*', 'toy', '*.py')))
TOY_CONFIGS = [p for p in TOY_CONFIGS if osp.basename(osp.dirname(osp.dirname(p))) != '_base_']

# the fragment variants (upstream config + configs/_base_/toy/<fragment>.py); no downloads: backbones start
# from random weights
FRAGMENT_VARIANTS = {
    'coco_instance': ("'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'", 'toy_coco',
                      "model = dict(backbone=dict(init_cfg=None))\n"
                      "val_evaluator = _base_.toy_coco_val_evaluator\n"),
    'ade20k': ("'mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py'", 'toy_ade',
               "model = dict(pretrained=None)\n"),
    'kinetics400': ("'mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py'",
                    'toy_k400', "model = dict(backbone=dict(pretrained=None))\n"),
    'imagenet': ("'mmpretrain::resnet/resnet18_8xb32_in1k.py'", 'toy_in1k', ''),
}

# > ~45 s each on 2 busy cores (measured 48-130 s); the PosMLP-T classifier (~24 s) trains its recipe in the
# default suite in test_exact_resume.py (narrow backbone, 8 iterations, killed and resumed)
SLOW = {'posmlp/toy/posmlp-t_toy-in1k.py',
        'posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py', 'posmlp/toy/retinanet_posmlp-t_1x_toy-coco.py',
        'posmlp/toy/fpn_posmlp-t_toy-ade20k.py', 'posmlp/toy/upernet_posmlp-t_toy-ade20k.py',
        'wavemlp/toy/retinanet_wavemlp-t_toy-coco.py', 'coco_instance', 'ade20k',
        'posmlp/toy/tsn_posmlp-t_toy-kinetics400.py'}  # narrowed, in the default suite: tests/test_recognizer2d.py


def _params(names, ids):
    return [pytest.param(n, id=i, marks=[pytest.mark.slow] if i in SLOW else []) for n, i in zip(names, ids)]



def _train(config_text, tmp_path, toy_data):
    os.makedirs(tmp_path / 'data', exist_ok=True)
    os.symlink(toy_data, tmp_path / 'data' / 'toy')
    cfg = tmp_path / 'two_iterations.py'
    cfg.write_text(config_text + TWO_ITERATIONS)
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    res = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'train.py'), str(cfg), '--work-dir', 'work'],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    ckpt = safe_torch_load(str(tmp_path / 'work' / 'iter_2.pth'))
    assert ckpt['meta']['iter'] == 2
    assert 'Iter(train) [2/2]' in res.stdout + res.stderr
    return ckpt


def test_every_toy_config_directory_is_covered():
    """The list below is what the next test runs: every family ships at least one toy config."""
    families = {osp.basename(osp.dirname(osp.dirname(p))) for p in TOY_CONFIGS}
    assert families == {'posmlp', 'posmlp_video', 'wavemlp', 'cpvt', 'imlp'}, families
    fragments = {osp.splitext(osp.basename(p))[0] for p in glob.glob(osp.join(ROOT, 'configs', '_base_', 'toy',
                                                                              '*.py'))}
    assert fragments == set(FRAGMENT_VARIANTS)


@pytest.mark.parametrize('config', _params(TOY_CONFIGS, [osp.relpath(p, osp.join(ROOT, 'configs'))
                                                         for p in TOY_CONFIGS]))
def test_toy_config_trains_two_iterations(config, tmp_path, toy_data):
    _train(f"_base_ = '{config}'\n", tmp_path, toy_data)


@pytest.mark.parametrize('fragment', _params(sorted(FRAGMENT_VARIANTS), sorted(FRAGMENT_VARIANTS)))
def test_toy_fragment_variant_trains_two_iterations(fragment, tmp_path, toy_data):
    upstream, prefix, extra = FRAGMENT_VARIANTS[fragment]
    frag = osp.join(ROOT, 'configs', '_base_', 'toy', f'{fragment}.py')
    text = (f"_base_ = [{upstream}, '{frag}']\n"
            f'train_dataloader = _base_.{prefix}_train_dataloader\n' + extra)
    _train(text, tmp_path, toy_data)
