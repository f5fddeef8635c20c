"""Swin + IMLP ImageNet recipe vs the official Swin trainer (the IMLP paper: "exactly as the original methods").

The official trainer (microsoft/Swin-Transformer) builds its optimizer with its own ``set_weight_decay``, its
schedule with timm's ``CosineLRScheduler`` stepped every iteration (``step_update`` after each step with that
step's index), clips gradients at 5 and scales the learning rates linearly with the total batch. Those
arguments and rules are kept below as data; timm is the reference implementation of the schedule. Both sides
start from the same weights and see the same batches: learning rate and weight decay per parameter, and the
weights after every step, must agree.
"""
import copy
import math
import os.path as osp

import pytest
import torch

from param_schedules import build_param_schedulers, step_param_schedulers

timm = pytest.importorskip('timm')

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

OFFICIAL = dict(
    source='microsoft/Swin-Transformer config.py (_C.TRAIN and _C.MODEL defaults), configs/swin/*.yaml '
           '(DROP_PATH_RATE), main.py (linear scaling by the total batch / 512, step_update after each step), '
           'lr_scheduler.py (CosineLRScheduler, t_in_epochs=False, WARMUP_PREFIX), optimizer.py (set_weight_decay)',
    base_lr=5e-4, warmup_lr=5e-7, min_lr=5e-6, weight_decay=0.05, epochs=300, warmup_epochs=20, clip_grad=5.0,
    eps=1e-8, betas=(0.9, 0.999), smoothing=0.1, warmup_prefix=True, total_batch=1024,
    skip=('absolute_pos_embed', ), skip_keywords=('relative_position_bias_table', ))
CONFIGS = {'configs/imlp/swin-t-imlp_16xb64_in1k.py': 0.2, 'configs/imlp/swin-s-imlp_16xb64_in1k.py': 0.3,
           'configs/imlp/swin-b-imlp_16xb64_in1k.py': 0.5}  # path: the yaml's DROP_PATH_RATE
SCALE = OFFICIAL['total_batch'] / 512


def _cfg(path):
    from mmengine.config import Config
    return Config.fromfile(osp.join(ROOT, path))


def _official_decays(name, param):
    """optimizer.py set_weight_decay on the parameter's name (our names keep Swin's leaf names)."""
    leaf = name.split('.')[-1]
    return not (param.ndim == 1 or name.endswith('.bias') or leaf in OFFICIAL['skip']
                or any(k in name for k in OFFICIAL['skip_keywords']))


def _timm_scheduler(optimizer, epoch_length):
    from timm.scheduler.cosine_lr import CosineLRScheduler
    num_steps = OFFICIAL['epochs'] * epoch_length
    warmup_steps = OFFICIAL['warmup_epochs'] * epoch_length
    return CosineLRScheduler(optimizer, t_initial=num_steps - warmup_steps, cycle_mul=1.,  # t_mul in timm < 0.6
                             lr_min=OFFICIAL['min_lr'] * SCALE, warmup_lr_init=OFFICIAL['warmup_lr'] * SCALE,
                             warmup_t=warmup_steps, cycle_limit=1, t_in_epochs=False,
                             warmup_prefix=OFFICIAL['warmup_prefix'])


@pytest.mark.parametrize('path', sorted(CONFIGS))
def test_swin_imlp_recipe_arguments(path):
    cfg = _cfg(path)
    opt = cfg.optim_wrapper.optimizer
    assert opt.type == 'AdamW' and math.isclose(opt.lr, OFFICIAL['base_lr'] * SCALE)
    assert opt.weight_decay == OFFICIAL['weight_decay'] and opt.eps == OFFICIAL['eps']
    assert tuple(opt.betas) == OFFICIAL['betas']
    assert cfg.optim_wrapper.clip_grad == dict(max_norm=OFFICIAL['clip_grad'])
    assert cfg.train_cfg.max_epochs == OFFICIAL['epochs']
    assert cfg.train_dataloader.batch_size * 16 == OFFICIAL['total_batch'] and '16xb64' in path
    assert cfg.model.backbone.drop_path_rate == CONFIGS[path]
    loss = cfg.model.head.loss
    assert loss.type == 'LabelSmoothLoss' and loss.label_smooth_val == OFFICIAL['smoothing']
    assert loss.mode == 'original'
    assert not [h for h in cfg.get('custom_hooks', []) if 'EMA' in h['type']], 'Swin evaluates the raw model'


@pytest.mark.parametrize('path', sorted(CONFIGS))
def test_swin_imlp_lr_matches_official_every_iteration(path):
    """All 300 epochs (7 iterations each: per-epoch and per-iteration schedules differ)."""
    from mmengine.optim import OptimWrapper
    cfg = _cfg(path)
    length = 7
    p, q = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    ref_opt = torch.optim.AdamW([p], lr=OFFICIAL['base_lr'] * SCALE)
    ref = _timm_scheduler(ref_opt, length)
    ow = OptimWrapper(torch.optim.AdamW([q], lr=cfg.optim_wrapper.optimizer.lr))
    ours = build_param_schedulers(cfg, ow, length, 'mmpretrain')
    for it in range(OFFICIAL['epochs'] * length):
        a, b = ow.optimizer.param_groups[0]['lr'], ref_opt.param_groups[0]['lr']
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-18), (path, it, a, b)
        ref.step_update(it)  # main.py: after step `it`, with its index
        step_param_schedulers(ours, it, length)
    assert OFFICIAL['min_lr'] * SCALE < ow.optimizer.param_groups[0]['lr'] < 1.001 * OFFICIAL['min_lr'] * SCALE


def _small_model(path):
    from mmposmlp.testing import build_model_from_cfg
    cfg = _cfg(path)
    cfg.model.pop('train_cfg', None)  # no Mixup / CutMix: the same un-augmented batches on both sides
    cfg.model.pop('init_cfg', None)
    cfg.model.backbone.update(arch=dict(embed_dims=16, depths=[1, 1, 2, 1], num_heads=[1, 2, 2, 4]),
                              img_size=64, window_size=2)
    cfg.model.head.update(num_classes=10, in_channels=128)
    model, _ = build_model_from_cfg(cfg)
    torch.manual_seed(0)
    with torch.no_grad():
        for prm in model.parameters():
            prm.add_(torch.randn_like(prm) * 0.02)
    return cfg, model.double()


def test_swin_imlp_weight_decay_matches_official():
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    cfg, model = _small_model('configs/imlp/swin-t-imlp_16xb64_in1k.py')
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        import mmpretrain.engine  # noqa: F401
        ow = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    ids = {id(prm): n for n, prm in model.named_parameters()}
    got = {ids[id(prm)]: g['weight_decay'] for g in ow.optimizer.param_groups for prm in g['params']}
    params = dict(model.named_parameters())
    wrong = [n for n in got if (got[n] > 0) != _official_decays(n, params[n])]
    assert not wrong, f'weight decay differs from the official set_weight_decay for {wrong}'
    assert all(v in (0., OFFICIAL['weight_decay']) for v in got.values())
    names = ' '.join(n for n in got if got[n] == 0)
    assert 'relative_position_bias_table' in names and 'ffn' in names  # IMLP's BN / AGeLU: flat, no decay


def test_swin_imlp_training_steps_match_official():
    """Through the warm-up into the cosine (1 iteration per epoch): lr per step and the weights after."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    from mmpretrain.structures import DataSample
    from timm.loss import LabelSmoothingCrossEntropy
    cfg, model = _small_model('configs/imlp/swin-t-imlp_16xb64_in1k.py')
    ref_model = copy.deepcopy(model)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        import mmpretrain.engine  # noqa: F401
        ow = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    ours = build_param_schedulers(cfg, ow, 1, 'mmpretrain')
    decay = [prm for n, prm in ref_model.named_parameters() if _official_decays(n, prm)]
    no_decay = [prm for n, prm in ref_model.named_parameters() if not _official_decays(n, prm)]
    ref_opt = torch.optim.AdamW([{'params': decay}, {'params': no_decay, 'weight_decay': 0.}],
                                eps=OFFICIAL['eps'], betas=OFFICIAL['betas'], lr=OFFICIAL['base_lr'] * SCALE,
                                weight_decay=OFFICIAL['weight_decay'])
    ref_sched = _timm_scheduler(ref_opt, 1)
    criterion = LabelSmoothingCrossEntropy(smoothing=OFFICIAL['smoothing'])
    g = torch.Generator().manual_seed(1)
    steps = OFFICIAL['warmup_epochs'] + 3
    for it in range(steps):
        x = torch.randn(2, 3, 64, 64, generator=g, dtype=torch.float64)
        y = torch.randint(0, 10, (2, ), generator=g)
        assert math.isclose(ow.optimizer.param_groups[0]['lr'], ref_opt.param_groups[0]['lr'], rel_tol=1e-12)
        torch.manual_seed(1000 + it)
        model.train()
        loss, _ = model.parse_losses(model.loss(x, [DataSample().set_gt_label(int(t)) for t in y]))
        ow.update_params(loss)
        step_param_schedulers(ours, it, 1)
        torch.manual_seed(1000 + it)
        ref_model.train()
        ref_loss = criterion(ref_model(x, mode='tensor'), y)
        ref_opt.zero_grad()
        ref_loss.backward()
        torch.nn.utils.clip_grad_norm_(ref_model.parameters(), OFFICIAL['clip_grad'])
        ref_opt.step()
        ref_sched.step_update(it)
        # mmpretrain's LabelSmoothLoss builds its smoothed targets in float32: ~1e-8 relative
        assert torch.allclose(loss, ref_loss, rtol=1e-6, atol=0), (it, float(loss), float(ref_loss))
    assert ow.optimizer.param_groups[0]['lr'] < OFFICIAL['base_lr'] * SCALE  # into the cosine
    for (n, a), b in zip(model.named_parameters(), ref_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-10), (n, float((a - b).abs().max()))
