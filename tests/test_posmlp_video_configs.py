"""configs/posmlp_video: every config builds (mmaction2 / mmpretrain scope); recipe values and
params against the PosMLP-Video paper (Sec. 4.2, Tables 3, 9-11)."""
import glob
import re
import os.path as osp
import warnings

import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope

warnings.filterwarnings('ignore', message='Unnecessary conv bias')
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CFG_DIR = osp.join(ROOT, 'configs', 'posmlp_video')
CONFIGS = sorted(osp.basename(p) for p in glob.glob(osp.join(CFG_DIR, '*.py')))
# parameters reported by the paper (Table 3 / Sec. 4.4 text): S 13.51M (174 classes),
# L 35.4M (SSv1/SSv2, 174 classes) and 35.5M (K400, 400 classes)
PAPER_PARAMS = {('s', 174): 13.51e6, ('l', 174): 35.4e6, ('l', 400): 35.5e6}


def _build(name):
    cfg = Config.fromfile(osp.join(CFG_DIR, name))
    scope = 'mmpretrain' if name.endswith('_in1k.py') else 'mmaction'
    import importlib
    importlib.import_module(f'{scope}.models')
    registry = importlib.import_module(f'{scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(scope):
        model = registry.build(cfg.model)
    return cfg, model


def test_config_set():
    archs = ('s', 'b', 'l')
    for a in archs:
        for t in (16, 24):
            assert f'posmlp-video-{a}_4xb8-{t}x4x1-60e_kinetics400-rgb.py' in CONFIGS
        for ds in ('sthv1', 'sthv2', 'diving48', 'egtea'):
            assert f'posmlp-video-{a}_4xb8-u16-60e_{ds}-rgb.py' in CONFIGS
        assert f'posmlp-video-{a}_8xb120_in1k.py' in CONFIGS
    import yaml
    with open(osp.join(CFG_DIR, 'metafile.yml')) as f:
        meta = yaml.safe_load(f)
    listed = {osp.basename(m['Config']) for m in meta['Models']}
    assert listed <= set(CONFIGS)
    assert all(osp.isfile(osp.join(ROOT, m['Config'])) for m in meta['Models'])


@pytest.mark.parametrize('name', CONFIGS)
def test_config_builds(name):
    cfg, model = _build(name)
    bb = model.backbone
    assert type(bb).__name__ == 'PosMLPVideo'
    arch = name.split('_')[0].split('-')[2]
    if name.endswith('_in1k.py'):
        assert bb.image_mode and cfg.model.head.in_channels == 576
        if arch != 's':
            return
        import torch  # the mmpretrain neck/head take the image-mode output (a tuple of NCHW maps)
        with torch.no_grad():
            out = model.eval()(torch.randn(1, 3, 64, 64), mode='tensor')
        assert out.shape == (1, 1000)
        return
    assert cfg.model.cls_head.in_channels == bb.embed_dims[-1]
    arch = name.split('_')[0].split('-')[2]
    dataset = re.search(r'_([a-z0-9]+)-rgb', name).group(1)
    k400 = dataset == 'kinetics400'
    ablation = name.split('_')[0].count('-') > 2
    # recipe of Sec. 4.2
    lr = cfg.optim_wrapper.optimizer.lr
    assert cfg.optim_wrapper.optimizer.type == 'AdamW' and cfg.optim_wrapper.optimizer.weight_decay == 0.05
    assert lr == (2e-4 if k400 else 4e-4)
    assert cfg.train_cfg.max_epochs == 60
    assert cfg.param_scheduler[0].warmup_steps == (10 if k400 else 5)
    assert cfg.train_dataloader.batch_size == 8
    dp = {'s': (0.05, 0.1), 'b': (0.1, 0.3), 'l': (0.2, 0.5)}[arch][0 if k400 else 1]
    assert cfg.model.backbone.drop_path_rate == dp
    clip_len = next(t['clip_len'] for t in cfg.test_pipeline if 'clip_len' in t)
    assert all(w[0] == clip_len for w in bb.window_sizes) or 'w8x14' in name
    test_types = [t['type'] for t in cfg.test_pipeline]
    if k400:
        # 4 clips x 3 crops, sampled and cropped as PySlowFast (see test_eval_pipeline_parity_video.py)
        sampler = next(t for t in cfg.test_pipeline if t['type'] == 'mmposmlp.SlowFastSampleFrames')
        crop = next(t for t in cfg.test_pipeline if t['type'] == 'mmposmlp.SlowFastUniformCrop')
        assert sampler['num_clips'] == 4 and tuple(crop['spatial_indices']) == (0, 1, 2)
        assert any(t['type'] == 'Flip' for t in cfg.train_pipeline)
    else:
        assert 'UniformSample' in test_types  # sparse sampling, 1 clip
    if 'shuffle-test' in name:
        assert 'mmposmlp.ShuffleFrames' in test_types
        assert cfg.test_dataloader.dataset.pipeline == cfg.test_pipeline
    # parameters (whole recognizer) against the paper where it gives them
    n = sum(p.numel() for p in model.parameters())
    key = (arch, cfg.model.cls_head.num_classes)
    if key in PAPER_PARAMS and not ablation:
        assert abs(n - PAPER_PARAMS[key]) / PAPER_PARAMS[key] < 0.01
    if key == ('s', 174) and not ablation:
        assert n == 13509537
    # pipelines build under mmaction's scope (incl. mmposmlp.ShuffleFrames)
    from mmaction.registry import TRANSFORMS
    import mmaction.datasets  # noqa: F401
    with DefaultScope.overwrite_default_scope('mmaction'):
        for pipe in (cfg.train_pipeline, cfg.val_pipeline, cfg.test_pipeline):
            for t in pipe:
                TRANSFORMS.build(t)
