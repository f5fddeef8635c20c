"""CPVT Table 13's ResNet-18 reference rows: thin wrappers of the upstream ResNet-18 configs.

Table 13 prints 12M (ImageNet), 16M (Semantic FPN) and 21M (RetinaNet), the PVT paper's ResNet-18 rows in
whole millions. Our counts reach them by rounding half up to 0.01M, then 0.1M (the precision PVT prints:
15.45M -> 15.5M for the Semantic FPN), then 1M; plain rounding of 15.45M would give 15M.
"""
import importlib
from decimal import ROUND_HALF_UP, Decimal
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
PAPER_TABLES = osp.join(ROOT, 'configs', 'cpvt', 'paper_tables')

# config -> (our count, Table 13's figure in M)
ROWS = {
    'resnet18_8xb32-90e_in1k.py': (11_689_512, 12),
    'fpn_r18_8xb4-40k_ade20k-512x512.py': (15_446_006, 16),
    'retinanet_r18_fpn_8xb2-1x_coco.py': (21_410_100, 21),
}
UPSTREAM = {
    'resnet18_8xb32-90e_in1k.py': ('mmpretrain', 'resnet/resnet18_8xb32_in1k.py'),
    'retinanet_r18_fpn_8xb2-1x_coco.py': ('mmdet', 'retinanet/retinanet_r18_fpn_1x_coco.py'),
}


def _table13_millions(n):
    m = Decimal(n) / Decimal(10**6)
    for step in ('0.01', '0.1', '1'):
        m = m.quantize(Decimal(step), rounding=ROUND_HALF_UP)
    return int(m)


def _cfg(name):
    return Config.fromfile(osp.join(PAPER_TABLES, name))


def _build(name):
    cfg = _cfg(name)
    scope = cfg.default_scope
    importlib.import_module(f'{scope}.models')
    with DefaultScope.overwrite_default_scope(scope):
        return cfg, importlib.import_module(f'{scope}.registry').MODELS.build(cfg.model)


@pytest.mark.parametrize('name', sorted(ROWS))
def test_resnet18_rows_build_with_table13_params_and_run(name):
    cfg, model = _build(name)
    count, paper = ROWS[name]
    n = sum(p.numel() for p in model.parameters())
    assert n == count and _table13_millions(n) == paper
    model.eval()
    with torch.no_grad():
        if cfg.default_scope == 'mmdet':
            scores, _ = model(torch.randn(1, 3, 64, 96), mode='tensor')
            assert [tuple(s.shape[2:]) for s in scores] == [(8, 12), (4, 6), (2, 3), (1, 2), (1, 1)]
        elif cfg.default_scope == 'mmseg':
            assert model(torch.randn(1, 3, 64, 64), mode='tensor').shape == (1, 150, 16, 16)
        else:
            assert model(torch.randn(1, 3, 64, 80), mode='tensor').shape == (1, 1000)


def test_resnet18_classifier_is_torchvision_resnet18():
    """Table 13's 69.8 is torchvision's released resnet18: same architecture, same parameter shapes."""
    torchvision = pytest.importorskip('torchvision')
    _, model = _build('resnet18_8xb32-90e_in1k.py')
    ours = [tuple(p.shape) for p in model.parameters()]
    theirs = [tuple(p.shape) for p in torchvision.models.resnet18().parameters()]
    assert ours == theirs


@pytest.mark.parametrize('name', sorted(UPSTREAM))
def test_resnet18_rows_keep_the_upstream_model(name):
    package, path = UPSTREAM[name]
    upstream = osp.join(osp.dirname(importlib.import_module(package).__file__), '.mim', 'configs', path)
    ours = _cfg(name).model.to_dict()
    ours.pop('_scope_', None)  # added by the package:: inheritance, as for every mmpretrain:: / mmdet:: base
    assert ours == Config.fromfile(upstream).model.to_dict()


def test_resnet18_imagenet_recipe_is_torchvision_90_epochs():
    cfg = _cfg('resnet18_8xb32-90e_in1k.py')
    assert cfg.train_cfg.max_epochs == 90 and cfg.train_dataloader.batch_size == 32
    assert cfg.optim_wrapper.optimizer == dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4,
                                               _scope_='mmpretrain')
    for loader in (cfg.val_dataloader, cfg.test_dataloader):
        resize = loader.dataset.pipeline[1]
        assert (resize.type, resize.scale, resize.backend, resize.interpolation) == (
            'ResizeEdge', 256, 'pillow', 'bilinear')


def test_resnet18_semantic_fpn_is_pvt_fpn_r18_recipe():
    """PVT's fpn_r18_512x512_40k_ade20k.py (mmseg 0.x): ResNetV1c-18 from open-mmlab://resnet18_v1c, SGD lr 0.02,
    momentum 0.9, wd 5e-4, mmcv poly (power 0.9, min lr 0) over 40k iterations, 8 GPUs x 4 images."""
    from mmengine.optim.scheduler import PolyLR
    cfg = _cfg('fpn_r18_8xb4-40k_ade20k-512x512.py')
    assert cfg.model.pretrained == 'open-mmlab://resnet18_v1c'
    assert (cfg.model.backbone.type, cfg.model.backbone.depth) == ('ResNetV1c', 18)
    assert cfg.model.neck.in_channels == [64, 128, 256, 512]
    assert cfg.train_cfg.max_iters == 40000 and cfg.train_dataloader.batch_size == 4
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.momentum, opt.weight_decay) == ('SGD', 0.02, 0.9, 0.0005)
    (sched, ) = cfg.param_scheduler
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=opt.lr)
    kwargs = {k: v for k, v in sched.items() if k != 'type'}
    assert sched.type == 'PolyLR'
    poly = PolyLR(optimizer, **kwargs)
    for i in range(40000):
        if i in (0, 1, 20000, 39999):
            mmcv = 0.02 * (1 - i / 40000) ** 0.9
            assert optimizer.param_groups[0]['lr'] == pytest.approx(mmcv, rel=1e-9, abs=1e-15), i
        optimizer.step()
        poly.step()


def test_resnet18_retinanet_3x_is_the_1x_model_with_the_table13_3x_schedule():
    three = _cfg('retinanet_r18_fpn_8xb2-ms-3x_coco.py')
    one = _cfg('retinanet_r18_fpn_8xb2-1x_coco.py')
    pvt = _cfg(osp.join('..', 'retinanet_pvt-peg-t_fpn_ms-3x_coco.py'))
    assert three.model.to_dict() == one.model.to_dict()
    assert three.optim_wrapper.to_dict() == one.optim_wrapper.to_dict()
    assert three.train_cfg.max_epochs == 36
    assert three.param_scheduler == pvt.param_scheduler
    assert three.train_dataloader.dataset.pipeline == pvt.train_dataloader.dataset.pipeline
    assert one.param_scheduler[0].end == 501  # mmdet 2.x's 500-iteration warm-up
