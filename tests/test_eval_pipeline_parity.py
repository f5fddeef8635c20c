"""Evaluation-pipeline parity: encoded JPEG -> network input, ours vs the official eval transform.

The official ImageNet evaluations are torchvision/timm transforms on PIL images:
``Image.open(f).convert('RGB')`` -> ``Resize(short side, BICUBIC)`` -> ``CenterCrop(224)`` -> ``ToTensor`` ->
``Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)``; the short side is timm's
``floor(224 / crop_pct)`` or DeiT's ``int(224 / 0.875)``; configs evaluated at another resolution ``S``
(``-<S>px`` in the name: PosMLP Table 2's 384, CPVT Table 2's 160-512) use the same rule with ``S`` for 224.
ResNet-18 (CPVT Table 13's reference row, torchvision's released model) is evaluated with torchvision's
``Resize(256)`` (PIL BILINEAR, antialiased) instead: its entry names the interpolation as a fourth item.
The table below keeps, per config, the official short-side rule and its source; our ``test_pipeline`` +
``data_preprocessor`` must give the same tensor within one grey level for every shipped ImageNet config.
"""
import glob
import math
import os.path as osp

import numpy as np
import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)

# config-name prefix -> (short side of the official eval resize as a function of the crop size S, source)
_TIMM_09 = (lambda S: math.floor(S / 0.9), 'timm transforms_imagenet_eval, crop_pct 0.9')
_DEIT = (lambda S: int(S / 0.875), 'DeiT main.py build_transform: int(S / eval_crop_ratio 0.875), bicubic')
OFFICIAL_EVAL = {
    'posmlp-t_': _TIMM_09 + ('PosMLP config/PosMLP_T.yaml crop_pct 0.9', ),
    'posmlp-t-': _TIMM_09 + ('ablations of PosMLP-T (paper Tables 1, 3-7): its trainer and yaml', ),
    'posmlp-s_': _TIMM_09 + ('PosMLP config/PosMLP_S.yaml crop_pct 0.9', ),
    'posmlp-b_': _TIMM_09 + ('as PosMLP-T/S (no PosMLP-B yaml published)', ),
    'posmlp-video-': _TIMM_09 + ('image pre-training with the PosMLP trainer', ),
    'gmlp-s': _TIMM_09 + ('gMLP rows of PosMLP Tables 1/2/3/10: the PosMLP trainer and yaml', ),
    'gmlp-b': _TIMM_09 + ('gMLP-B row of PosMLP Table 2: the PosMLP trainer and yaml', ),
    'wavemlp-t': _TIMM_09 + ('Wave-MLP default_cfgs wave_T crop_pct 0.9', ),
    'wavemlp-s': _TIMM_09 + ('Wave-MLP default_cfgs wave_S crop_pct 0.9', ),
    'wavemlp-m': _TIMM_09 + ('Wave-MLP default_cfgs wave_M crop_pct 0.9', ),
    'wavemlp-b': (lambda S: math.floor(S / 0.875), 'timm transforms_imagenet_eval',
                  'Wave-MLP default_cfgs wave_B crop_pct 0.875'),
    'cpvt-': _DEIT + ('CPVT = DeiT recipe', ),
    'pvt-peg-': (lambda S: int((256 / 224) * S), 'Twins datasets.py build_transform', 'Resize(int(256/224*S), 3)'),
    'pvt-': (lambda S: int((256 / 224) * S), 'PVT v1 classification/datasets.py build_transform',
             'Resize(int(256/224*S), 3)'),
    'deit-': _DEIT + ('IMLP: the original method\'s evaluation', ),
    'poolformer-s': _TIMM_09 + ('PoolFormer default_cfgs poolformer_s crop_pct 0.9', ),
    'poolformer-m': (lambda S: math.floor(S / 0.95), 'timm transforms_imagenet_eval',
                     'PoolFormer default_cfgs poolformer_m crop_pct 0.95'),
    'lvt-': (lambda S: math.floor(S / 0.96), 'timm transforms_imagenet_eval, crop_pct 0.96',
             'LVT lvt_cls default_cfg crop_pct 0.96 (the IMLP LVT hosts)'),
    'resnet18_': (lambda S: int(S / 0.875), 'torchvision references/classification presets: Resize(256) '
                  'bilinear, CenterCrop(224)', 'ResNet-18 row of CPVT Table 13 = torchvision resnet18', 'bilinear'),
    'swin-': (lambda S: int(S / 0.875), 'Swin data/build.py: Resize(int(256/224*S), bicubic), CenterCrop',
              'IMLP: the original method\'s evaluation'),
}


def _imagenet_configs():
    files = sorted(glob.glob(osp.join(ROOT, 'configs', '**', '*in1k*.py'), recursive=True))
    return [f for f in files if 'toy' not in f.split(osp.sep) and '_base_' not in f.split(osp.sep)]


def _official_entry(name):
    hits = [k for k in OFFICIAL_EVAL if name.startswith(k)]
    assert hits, f'no official eval transform recorded for {name}: add it to OFFICIAL_EVAL'
    return OFFICIAL_EVAL[max(hits, key=len)]


@pytest.fixture(scope='module')
def jpegs(tmp_path_factory):
    """Two photographs-like JPEGs (landscape and portrait, odd sizes) encoded by PIL."""
    from PIL import Image
    rng = np.random.default_rng(0)
    out = []
    for h, w in ((375, 500), (433, 301)):
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        img = np.stack([128 + 90 * np.sin(xx / 23 + c) * np.cos(yy / 17 - c) for c in range(3)], -1)
        img += rng.normal(0, 12, img.shape)
        img[h // 3:h // 2, w // 4:w // 2] = (250, 30, 40)  # sharp edges
        path = tmp_path_factory.mktemp('jpeg') / f'img_{h}x{w}.JPEG'
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=90)
        out.append(str(path))
    return out


def _official(path, short_side, size=224, interpolation='bicubic'):
    from PIL import Image
    from torchvision import transforms as T
    mode = {'bicubic': T.InterpolationMode.BICUBIC, 'bilinear': T.InterpolationMode.BILINEAR}[interpolation]
    tf = T.Compose([T.Resize(short_side, interpolation=mode), T.CenterCrop(size),
                    T.ToTensor(), T.Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)])
    with open(path, 'rb') as f:
        img = Image.open(f).convert('RGB')
    return tf(img)


def _ours(cfg, path):
    from mmengine.dataset import Compose
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        import mmpretrain.datasets  # noqa: F401
        pipeline = Compose(cfg.test_dataloader.dataset.pipeline)
        pre = MODELS.build(dict(type='ClsDataPreprocessor', **cfg.data_preprocessor))
    packed = pipeline(dict(img_path=path))
    return pre(dict(inputs=[packed['inputs']], data_samples=[packed['data_samples']]), False)['inputs'][0]


@pytest.mark.parametrize('cfg_path', _imagenet_configs(), ids=lambda p: osp.basename(p)[:-3])
def test_imagenet_eval_input_matches_official(cfg_path, jpegs):
    from mmengine.config import Config
    import re
    cfg = Config.fromfile(cfg_path)
    found = re.search(r'-(\d+)px$', osp.basename(cfg_path)[:-3])
    size = int(found.group(1)) if found else 224
    entry = _official_entry(osp.basename(cfg_path))
    short_side = entry[0](size)
    interpolation = entry[3] if len(entry) > 3 else 'bicubic'
    std = torch.tensor(IMAGENET_DEFAULT_STD).view(3, 1, 1) * 255
    for path in jpegs:
        ref = _official(path, short_side, size, interpolation)
        ours = _ours(cfg, path)
        assert ours.shape == ref.shape == (3, size, size)
        grey = ((ours - ref).abs() * std).max().item()
        assert grey <= 1.0 + 1e-3, f'{osp.basename(cfg_path)}: {grey:.2f} grey levels from the official input'
