"""PVT+PEG detection / segmentation recipes vs the authors' official mmdet 2.x / mmseg 0.x configs.

The official configs (Meituan-AutoML/Twins ``detection/configs`` and ``segmentation/configs``, written for
mmdet 2.x / mmseg 0.x with mmcv 1.x hooks) are kept below as data. The mmcv 1.x learning-rate hooks are
written out from their definitions (``LrUpdaterHook``: linear warm-up ``lr * (1 - (1 - i / W)(1 - ratio))``
per iteration on top of the regular lr; ``step``: ``lr * gamma ** #(steps <= epoch)`` per epoch; ``poly``:
``(lr - min) (1 - i / max) ** power + min`` per iteration). Our configs' mmengine schedulers, stepped as
mmengine's ``ParamSchedulerHook`` does, must give the same lr at every iteration, and our optimizer the
same weight decay per parameter as mmcv's ``DefaultOptimizerConstructor`` with the official
``paramwise_cfg`` (official names mapped to ours: ``pos_block`` -> ``pegs``).
"""
import copy
import functools
import math
import os.path as osp

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

_RETINA_1X = dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4), grad_clip=None, custom_keys={},
                  lr_config=dict(policy='step', warmup='linear', warmup_iters=500, warmup_ratio=0.001,
                                 step=[8, 11]), max_epochs=12,
                  source='Twins detection/configs/retinanet_pcpvt_s_fpn_1x_coco_pvt_setting.py')
_RETINA_3X = dict(optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05), grad_clip=None,
                  custom_keys={'pos_block': 0., 'norm': 0.},
                  lr_config=dict(policy='step', warmup='linear', warmup_iters=500, warmup_ratio=0.001,
                                 step=[27, 33]), max_epochs=36,
                  source='Twins detection/configs/retinanet_pcpvt_s_fpn_3x_ms_coco.py (schedule_1x warm-up)')
_FPN_80K = dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4), grad_clip=None, custom_keys={},
                lr_config=dict(policy='poly', power=0.9, min_lr=1e-6), max_iters=80000,
                source='Twins segmentation/configs/fpn_pcpvt_s_512x512_80k_ade20k.py + schedule_80k.py')
OFFICIAL = {f'retinanet_pvt-peg-{a}_fpn_1x_coco.py': _RETINA_1X for a in 'tsm'}
OFFICIAL.update({f'retinanet_pvt-peg-{a}_fpn_ms-3x_coco.py': _RETINA_3X for a in 'tsm'})
OFFICIAL.update({f'fpn_pvt-peg-{a}_4xb4-80k_ade20k-512x512.py': _FPN_80K for a in 'tsm'})
OFFICIAL_TO_OURS = {'pos_block': 'pegs'}
EPOCH_LENGTH = 100  # the 500-iteration warm-up then spans 5 epochs: warm-up and steps overlap as at worst


def mmcv1_lr(off, it, epoch):
    base = off['optimizer']['lr']
    lc = off['lr_config']
    if lc['policy'] == 'step':
        regular = base * 0.1 ** sum(epoch >= s for s in lc['step'])
    else:
        regular = (base - lc['min_lr']) * (1 - it / off['max_iters']) ** lc['power'] + lc['min_lr']
    if lc.get('warmup') == 'linear' and it < lc['warmup_iters']:
        k = (1 - it / lc['warmup_iters']) * (1 - lc['warmup_ratio'])
        return regular * (1 - k)
    return regular


def _scope(name):
    return 'mmseg' if name.startswith('fpn_') else 'mmdet'


def _params(names, slow_if):
    """The small/medium/tiny configs share one recipe: one of each in the default suite, the rest slow."""
    return [pytest.param(n, marks=pytest.mark.slow) if slow_if(n) else n for n in names]


# one config per recipe in the default suite (the 80k-iteration poly curve takes ~20 s: slow)
_LR_FAST = {'retinanet_pvt-peg-s_fpn_1x_coco.py', 'retinanet_pvt-peg-s_fpn_ms-3x_coco.py'}
_OPT_FAST = {'retinanet_pvt-peg-t_fpn_1x_coco.py', 'retinanet_pvt-peg-t_fpn_ms-3x_coco.py',
             'fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py'}


@functools.lru_cache(maxsize=None)
def _cfg(name):
    from mmengine.config import Config
    return Config.fromfile(osp.join(ROOT, 'configs', 'cpvt', name))


@pytest.mark.slow  # ~1 min: nine mmdet/mmseg configs
def test_dense_recipes_identical_across_sizes():
    """What the slow-marked sizes would check is the same schedule and optimizer as the fast ones."""
    for kind in ('retinanet_pvt-peg-{}_fpn_1x_coco.py', 'retinanet_pvt-peg-{}_fpn_ms-3x_coco.py',
                 'fpn_pvt-peg-{}_4xb4-80k_ade20k-512x512.py'):
        b = _cfg(kind.format('s'))
        for arch in 'tm':
            a = _cfg(kind.format(arch))
            assert a.param_scheduler == b.param_scheduler and a.optim_wrapper == b.optim_wrapper
            assert a.train_cfg == b.train_cfg


@pytest.mark.parametrize('name', _params(sorted(OFFICIAL), lambda n: n not in _LR_FAST))
def test_dense_lr_curve_matches_mmcv1(name):
    from mmengine.optim import OptimWrapper
    from mmengine.registry import PARAM_SCHEDULERS, DefaultScope
    off = OFFICIAL[name]
    cfg = _cfg(name)
    p = torch.nn.Parameter(torch.zeros(1))
    ow = OptimWrapper(torch.optim.AdamW([p], lr=cfg.optim_wrapper.optimizer.lr))
    scheds = []
    with DefaultScope.overwrite_default_scope(_scope(name)):
        for s in copy.deepcopy(cfg.param_scheduler):
            if s.pop('convert_to_iter_based', False):
                cls = PARAM_SCHEDULERS.get(s.pop('type'))
                scheds.append(cls.build_iter_from_epoch(ow, epoch_length=EPOCH_LENGTH, **s))
            else:
                scheds.append(PARAM_SCHEDULERS.build(dict(s, optimizer=ow)))
    if 'max_epochs' in off:
        assert cfg.train_cfg.max_epochs == off['max_epochs']
        its = range(off['max_epochs'] * EPOCH_LENGTH)
    else:
        assert cfg.train_cfg.max_iters == off['max_iters']
        its = range(off['max_iters'])
    for it in its:
        epoch = it // EPOCH_LENGTH
        ours, ref = ow.optimizer.param_groups[0]['lr'], mmcv1_lr(off, it, epoch)
        assert math.isclose(ours, ref, rel_tol=1e-9, abs_tol=1e-15), (name, it, ours, ref)
        for s in scheds:
            if not s.by_epoch:
                s.step()
        if (it + 1) % EPOCH_LENGTH == 0:
            for s in scheds:
                if s.by_epoch:
                    s.step()


@pytest.mark.parametrize('name', _params(sorted(OFFICIAL), lambda n: n not in _OPT_FAST))
def test_dense_optimizer_matches_official(name):
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    from mmposmlp.testing import build_model_from_cfg
    off = OFFICIAL[name]
    cfg = copy.deepcopy(_cfg(name))
    opt = cfg.optim_wrapper.optimizer
    for k, v in off['optimizer'].items():
        assert opt[k] == v, (name, k, opt[k], v)
    assert cfg.optim_wrapper.get('clip_grad') == off['grad_clip']
    model, scope = build_model_from_cfg(cfg)
    with DefaultScope.overwrite_default_scope(scope):
        import importlib
        importlib.import_module(f'{scope}.engine')
        ow = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    ids = {id(p): n for n, p in model.named_parameters()}
    wd = {ids[id(p)]: g['weight_decay'] for g in ow.optimizer.param_groups for p in g['params']}
    # mmcv 1.x DefaultOptimizerConstructor: the longest matching custom key (substring) sets decay_mult
    keys = sorted(sorted(off['custom_keys']), key=len, reverse=True)
    for n, got in wd.items():
        mult = 1.
        for k in keys:
            if OFFICIAL_TO_OURS.get(k, k) in n:
                mult = off['custom_keys'][k]
                break
        assert got == off['optimizer']['weight_decay'] * mult, (name, n, got)
