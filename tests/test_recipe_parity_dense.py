"""Detection / segmentation recipes vs the official (or the papers' stated) mmdet 2.x / mmseg 0.x recipes.

The references, kept below as data (mmdet 2.x / mmseg 0.x configs with mmcv 1.x hooks):
- PVT+PEG: the authors' own configs (Meituan-AutoML/Twins ``detection/configs``, ``segmentation/configs``).
- Wave-MLP: no official dense code exists; the paper "follows the training recipe in [46]" (PVT): whai362/PVT's
  RetinaNet / Mask R-CNN 1x configs (AdamW lr 1e-4, wd 1e-4, mmdet 2.x ``schedule_1x``) and, for Semantic FPN,
  the paper's Sec. 4.3 (40k iterations, lr 1e-4, poly 0.9) with PVT's weight decay 1e-4 and min_lr 0.
- PosMLP: no official dense code exists; the paper's Sec. 5.5 (mmdetection, 1x, AdamW lr 1e-4, wd 0.067) with
  mmdet 2.x ``schedule_1x``; the configs beyond the paper follow Swin's official 3x / UperNet configs
  (SwinTransformer/Swin-Transformer-Object-Detection, -Semantic-Segmentation) and the Twins / PVT FPN ones.
  Their documented deviation (no weight decay for norms and the gating units' position parameters) is
  listed per entry and must be stated in the config's header.
- Swin + IMLP ("the same as Swin-Ti"): Swin's official 1x / 3x Mask R-CNN and UperNet 160k configs.
The mmcv 1.x learning-rate hooks are written out from their definitions (``LrUpdaterHook``: linear warm-up
``lr * (1 - (1 - i / W)(1 - ratio))`` per iteration on top of the regular lr; ``step``:
``lr * gamma ** #(steps <= epoch)`` per epoch; ``poly``: ``(lr - min) (1 - i / max) ** power + min`` per
iteration). Our configs' mmengine schedulers, stepped as mmengine's ``ParamSchedulerHook`` does, must give the
same lr at every iteration, and our optimizer the same weight decay per parameter as mmcv's
``DefaultOptimizerConstructor`` with the official ``paramwise_cfg`` (official names mapped to ours:
``pos_block`` -> ``pegs``).
"""
import copy
import functools
import math
import os.path as osp
import re

import pytest
import torch

from param_schedules import build_param_schedulers, step_param_schedulers

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

_MMDET2_1X = dict(policy='step', warmup='linear', warmup_iters=500, warmup_ratio=0.001, step=[8, 11])
_MMDET2_3X = dict(_MMDET2_1X, step=[27, 33])
_SWIN_KEYS = {'absolute_pos_embed': 0., 'relative_position_bias_table': 0., 'norm': 0.}
_RETINA_1X = dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4), grad_clip=None, custom_keys={},
                  lr_config=_MMDET2_1X, max_epochs=12,
                  source='Twins detection/configs/retinanet_pcpvt_s_fpn_1x_coco_pvt_setting.py')
_RETINA_3X = dict(optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05), grad_clip=None,
                  custom_keys={'pos_block': 0., 'norm': 0.}, lr_config=_MMDET2_3X, max_epochs=36,
                  source='Twins detection/configs/retinanet_pcpvt_s_fpn_3x_ms_coco.py (schedule_1x warm-up)')
_FPN_80K = dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4), grad_clip=None, custom_keys={},
                lr_config=dict(policy='poly', power=0.9, min_lr=1e-6), max_iters=80000,
                source='Twins segmentation/configs/fpn_pcpvt_s_512x512_80k_ade20k.py + schedule_80k.py')
_WAVEMLP_DET = dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4), grad_clip=None, custom_keys={},
                    lr_config=_MMDET2_1X, max_epochs=12,
                    source='Wave-MLP Sec. 4.2 -> PVT detection/configs/{retinanet,mask_rcnn}_pvt_s_fpn_1x_coco.py')
_WAVEMLP_FPN = dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4), grad_clip=None, custom_keys={},
                    lr_config=dict(policy='poly', power=0.9, min_lr=0.), max_iters=40000,
                    source='Wave-MLP Sec. 4.3 (40k, lr 1e-4, poly 0.9) + PVT segmentation/configs fpn (wd, min_lr)')
_POSMLP_GATE = {'norm': 0., '.gate.': 0.}
_POSMLP_DET = dict(optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.067), grad_clip=None,
                   custom_keys={}, deviation=_POSMLP_GATE, lr_config=_MMDET2_1X, max_epochs=12,
                   source='PosMLP Sec. 5.5 (mmdetection 1x, AdamW 1e-4, wd 0.067) + mmdet 2.x schedule_1x')
_POSMLP_3X = dict(_POSMLP_DET, custom_keys={'norm': 0.}, deviation={'.gate.': 0.}, lr_config=_MMDET2_3X,
                  max_epochs=36, source='Swin-Transformer-Object-Detection mask_rcnn_swin_tiny_..._adamw_3x_coco.py '
                                        'schedule with the PosMLP paper\'s optimizer')
_POSMLP_FPN_80K = dict(_FPN_80K, optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-4),
                       deviation=_POSMLP_GATE)
_POSMLP_FPN_40K = dict(_WAVEMLP_FPN, optimizer=dict(type='AdamW', lr=2e-4, betas=(0.9, 0.999), weight_decay=1e-4),
                       deviation=_POSMLP_GATE, source='PVT segmentation/configs fpn (8 GPUs x 2: lr 2e-4, 40k)')
_SWIN_SEG = dict(optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.01), grad_clip=None,
                 custom_keys=_SWIN_KEYS,
                 lr_config=dict(policy='poly', power=1.0, min_lr=0., warmup='linear', warmup_iters=1500,
                                warmup_ratio=1e-6), max_iters=160000,
                 source='Swin-Transformer-Semantic-Segmentation upernet_swin_tiny_patch4_window7_512x512_160k_ade20k.py')
_SWIN_DET_1X = dict(optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05), grad_clip=None,
                    custom_keys=_SWIN_KEYS, lr_config=_MMDET2_1X, max_epochs=12,
                    source='Swin-Transformer-Object-Detection mask_rcnn_swin_tiny_..._adamw_1x_coco.py')
_SWIN_DET_3X = dict(_SWIN_DET_1X, lr_config=_MMDET2_3X, max_epochs=36,
                    source='Swin-Transformer-Object-Detection mask_rcnn_swin_tiny_..._adamw_3x_coco.py')

OFFICIAL = {f'cpvt/retinanet_pvt-peg-{a}_fpn_1x_coco.py': _RETINA_1X for a in 'tsm'}
OFFICIAL.update({f'cpvt/retinanet_pvt-peg-{a}_fpn_ms-3x_coco.py': _RETINA_3X for a in 'tsm'})
OFFICIAL.update({f'cpvt/fpn_pvt-peg-{a}_4xb4-80k_ade20k-512x512.py': _FPN_80K for a in 'tsm'})
for _a in ('t', 's', 'm', 'b', 't-dw', 's-dw', 'm-dw', 'b-dw'):
    OFFICIAL[f'wavemlp/retinanet_wavemlp-{_a}_fpn_1x_coco.py'] = _WAVEMLP_DET
    OFFICIAL[f'wavemlp/mask-rcnn_wavemlp-{_a}_fpn_1x_coco.py'] = _WAVEMLP_DET
    if _a[0] != 'b':
        OFFICIAL[f'wavemlp/fpn_wavemlp-{_a}_4xb8-40k_ade20k-512x512.py'] = _WAVEMLP_FPN
for _a in 'ts':
    OFFICIAL[f'posmlp/retinanet_posmlp-{_a}_1x_coco.py'] = _POSMLP_DET
    OFFICIAL[f'posmlp/mask-rcnn_posmlp-{_a}_1x_coco.py'] = _POSMLP_DET
    OFFICIAL[f'posmlp/fpn_posmlp-{_a}_4xb4-80k_ade20k-512x512.py'] = _POSMLP_FPN_80K
    OFFICIAL[f'posmlp/fpn_posmlp-{_a}_8xb2-40k_ade20k-512x512.py'] = _POSMLP_FPN_40K
    OFFICIAL[f'posmlp/upernet_posmlp-{_a}_8xb2-160k_ade20k-512x512.py'] = dict(_SWIN_SEG, deviation={'.gate.': 0.})
OFFICIAL['posmlp/mask-rcnn_posmlp-t_ms-crop-3x_coco.py'] = _POSMLP_3X
OFFICIAL['imlp/mask-rcnn_swin-t-imlp_fpn_1x_coco.py'] = _SWIN_DET_1X
OFFICIAL['imlp/mask-rcnn_swin-t-imlp_fpn_ms-crop-3x_coco.py'] = _SWIN_DET_3X
OFFICIAL['imlp/upernet_swin-t-imlp_8xb2-160k_ade20k-512x512.py'] = _SWIN_SEG
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
    return 'mmseg' if osp.basename(name).startswith(('fpn_', 'upernet_')) else 'mmdet'


def _params(names, slow_if):
    """The small/medium/tiny configs share one recipe: one of each in the default suite, the rest slow."""
    return [pytest.param(n, marks=pytest.mark.slow) if slow_if(n) else n for n in names]


# one config per recipe in the default suite (the long poly curves take ~10-40 s each: slow)
_LR_FAST = {'cpvt/retinanet_pvt-peg-s_fpn_1x_coco.py', 'cpvt/retinanet_pvt-peg-s_fpn_ms-3x_coco.py',
            'wavemlp/retinanet_wavemlp-t_fpn_1x_coco.py', 'posmlp/mask-rcnn_posmlp-t_ms-crop-3x_coco.py',
            'imlp/mask-rcnn_swin-t-imlp_fpn_ms-crop-3x_coco.py', 'wavemlp/fpn_wavemlp-t_4xb8-40k_ade20k-512x512.py'}
_OPT_FAST = {'cpvt/retinanet_pvt-peg-t_fpn_1x_coco.py', 'cpvt/retinanet_pvt-peg-t_fpn_ms-3x_coco.py',
             'cpvt/fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py', 'wavemlp/retinanet_wavemlp-t_fpn_1x_coco.py',
             'posmlp/retinanet_posmlp-t_1x_coco.py', 'imlp/upernet_swin-t-imlp_8xb2-160k_ade20k-512x512.py'}


@functools.lru_cache(maxsize=None)
def _cfg(name):
    from mmengine.config import Config
    return Config.fromfile(osp.join(ROOT, 'configs', name))


@pytest.mark.slow  # ~1 min: nine mmdet/mmseg configs
def test_dense_recipes_identical_across_sizes():
    """What the slow-marked sizes would check is the same schedule and optimizer as the fast ones."""
    for kind in ('cpvt/retinanet_pvt-peg-{}_fpn_1x_coco.py', 'cpvt/retinanet_pvt-peg-{}_fpn_ms-3x_coco.py',
                 'cpvt/fpn_pvt-peg-{}_4xb4-80k_ade20k-512x512.py'):
        b = _cfg(kind.format('s'))
        for arch in 'tm':
            a = _cfg(kind.format(arch))
            assert a.param_scheduler == b.param_scheduler and a.optim_wrapper == b.optim_wrapper
            assert a.train_cfg == b.train_cfg


@pytest.mark.parametrize('name', _params(sorted(OFFICIAL), lambda n: n not in _LR_FAST))
def test_dense_lr_curve_matches_mmcv1(name):
    from mmengine.optim import OptimWrapper
    off = OFFICIAL[name]
    cfg = _cfg(name)
    p = torch.nn.Parameter(torch.zeros(1))
    ow = OptimWrapper(torch.optim.AdamW([p], lr=cfg.optim_wrapper.optimizer.lr))
    scheds = build_param_schedulers(cfg, ow, EPOCH_LENGTH, _scope(name))
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
        step_param_schedulers(scheds, it, EPOCH_LENGTH)


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
    custom = dict(off['custom_keys'], **off.get('deviation', {}))
    keys = sorted(sorted(custom), key=len, reverse=True)
    for n, got in wd.items():
        mult = 1.
        for k in keys:
            if OFFICIAL_TO_OURS.get(k, k) in n:
                mult = custom[k]
                break
        assert got == off['optimizer']['weight_decay'] * mult, (name, n, got)
    if off.get('deviation'):  # a deliberate deviation is said in the header (of the config or its local base)
        assert any(k.strip('.') in n for k in off['deviation'] for n in wd if wd[n] == 0)
        assert 'no weight decay' in _header(name), f'{name}: the header must state the weight-decay deviation'


def _header(name):
    """The leading comment block of the config and of the local ('./') configs it inherits."""
    path = osp.join(ROOT, 'configs', name)
    text = open(path).read()
    head = ' '.join(ln.lstrip('# ') for ln in text.splitlines() if ln.startswith('#'))
    base = re.search(r"^_base_ = '\./([^']+)'", text, re.M)
    if base:
        head += ' ' + _header(osp.join(osp.dirname(name), base.group(1)))
    return ' '.join(head.split())
