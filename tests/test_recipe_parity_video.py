"""Training-step parity of the PosMLP-Video recipes with the official PySlowFast trainer.

The official trainer (zhouds1918/PosMLP_Video, PySlowFast) is not a package; its few formulas are written
out here from their published definitions, with the official yaml values as data:

* optimizer (``slowfast/models/optimizer.py`` ``construct_optimizer``): AdamW(eps 1e-8); parameters of
  BatchNorm modules get ``BN.WEIGHT_DECAY`` (0.0), 1-D parameters get 0 (``SOLVER.ZERO_WD_1D_PARAM``),
  all others ``SOLVER.WEIGHT_DECAY``;
* lr (``slowfast/utils/lr_policy.py``), set before every iteration at the fractional epoch
  ``e + i / iters_per_epoch``: cosine ``end + (base - end) (1 + cos(pi (t - w) / (max - w))) / 2`` with
  ``COSINE_AFTER_WARMUP`` (offset w = WARMUP_EPOCHS), and for ``t < w`` the line from WARMUP_START_LR to
  the cosine's value at w;
* ``tools/train_net.py``: ``loss_scaler(loss, optimizer, clip_grad=SOLVER.CLIP_GRADIENT)`` (default 20,
  L2 norm); soft-target cross entropy on labels smoothed by ``MIXUP.LABEL_SMOOTH_VALUE``.
"""
import copy
import json
import math
import os.path as osp

import pytest
import torch

from param_schedules import build_param_schedulers, step_param_schedulers

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

# configs/SSV1/SSV1_MLP_S16.yaml (+ slowfast/config/defaults.py for what the yaml leaves at default)
SLOWFAST_SSV1_S16 = dict(BASE_LR=4e-4, NUM_SHARDS=1, BASE_LR_SCALE_NUM_SHARDS=True, COSINE_AFTER_WARMUP=True,
                         COSINE_END_LR=1e-6, WARMUP_START_LR=1e-6, WARMUP_EPOCHS=5.0, MAX_EPOCH=60,
                         WEIGHT_DECAY=0.05, BN_WEIGHT_DECAY=0.0, ZERO_WD_1D_PARAM=True, CLIP_GRADIENT=20,
                         LABEL_SMOOTH_VALUE=0.1, EPS=1e-8)
CONFIG = 'configs/posmlp_video/posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py'
ITERS_PER_EPOCH = 2


def slowfast_lr(cfg, t):
    base = cfg['BASE_LR'] * (cfg['NUM_SHARDS'] if cfg['BASE_LR_SCALE_NUM_SHARDS'] else 1)

    def cosine(t):
        off = cfg['WARMUP_EPOCHS'] if cfg['COSINE_AFTER_WARMUP'] else 0.
        return cfg['COSINE_END_LR'] + (base - cfg['COSINE_END_LR']) * (
            math.cos(math.pi * (t - off) / (cfg['MAX_EPOCH'] - off)) + 1.) * 0.5
    if t < cfg['WARMUP_EPOCHS']:
        start, end = cfg['WARMUP_START_LR'], cosine(cfg['WARMUP_EPOCHS'])
        return t * (end - start) / cfg['WARMUP_EPOCHS'] + start
    return cosine(t)


def slowfast_decays(state):
    """Official key -> decayed? BatchNorm-module parameters and 1-D parameters are not decayed."""
    bn_modules = {k.rsplit('.', 1)[0] for k in state if k.endswith('running_mean')}
    return {k: not (k.rsplit('.', 1)[0] in bn_modules or v.ndim == 1) for k, v in state.items()
            if v.is_floating_point() and not k.endswith(('running_mean', 'running_var'))}


def _build():
    from mmengine.config import Config
    from mmposmlp.models.converters.posmlp_video import convert_official_posmlp_video, official_cfg_to_ours
    from mmposmlp.testing import build_model_from_cfg
    vec = torch.load(osp.join(ROOT, 'tests', 'data', 'posmlp_video.pt'), weights_only=True)
    arch = json.loads(vec['arch_json'])
    cfg = Config.fromfile(osp.join(ROOT, CONFIG))
    kw = official_cfg_to_ours(arch)
    kw.pop('drop_path_rate')
    cfg.model.backbone.update(kw)
    cfg.model.backbone.pop('window_sizes')
    cfg.model.data_preprocessor.pop('blending')  # un-augmented batches
    num_classes = arch['MODEL']['NUM_CLASSES'] if 'MODEL' in arch else 10
    cfg.model.cls_head.update(in_channels=arch['POSMLP_VIDEO']['EMBED_DIMS'][-1], num_classes=num_classes)
    model, _ = build_model_from_cfg(cfg)
    state = vec['state_dict']
    conv = convert_official_posmlp_video(state)
    head = {k: conv.pop(k) for k in list(conv) if k.startswith('head.')}
    res = model.backbone.load_state_dict(conv, strict=True)
    assert not res.missing_keys and not res.unexpected_keys
    model.cls_head.fc_cls.load_state_dict({k[5:]: v for k, v in head.items()})
    # our name of every official parameter: convert a marker state (1 = decayed) the same way
    decays = slowfast_decays(state)
    markers = {k: (torch.full_like(v, float(decays[k]), dtype=torch.float64) if k in decays else v)
               for k, v in state.items()}
    mconv = convert_official_posmlp_video(markers)
    expected = {}
    for n, _ in model.named_parameters():
        key = n[len('backbone.'):] if n.startswith('backbone.') else 'head.' + n.rsplit('.', 1)[1]
        expected[n] = bool(mconv[key].abs().sum() > 0)
    size = arch.get('DATA', {}).get('TRAIN_CROP_SIZE', 112)
    frames = arch['WIN_SIZE_T'][0]
    return cfg, model.double(), expected, (3, frames, size, size), num_classes


def test_video_weight_decay_groups_match_slowfast():
    """SlowFast's construct_optimizer groups (BN and 1-D parameters without decay) on the official test model."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    cfg, model, expected, _, _ = _build()
    with DefaultScope.overwrite_default_scope('mmaction'):
        import mmaction.engine  # noqa: F401
        ow = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    ids = {id(p): n for n, p in model.named_parameters()}
    got = {ids[id(p)]: g['weight_decay'] for g in ow.optimizer.param_groups for p in g['params']}
    assert got.keys() == expected.keys()
    wrong = [n for n in got if got[n] != (SLOWFAST_SSV1_S16['WEIGHT_DECAY'] if expected[n] else 0.)]
    assert not wrong, f'weight decay differs from SlowFast for {wrong}'
    assert any(expected.values()) and not all(expected.values())


def test_video_recipe_arguments():
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(ROOT, CONFIG))
    sf = SLOWFAST_SSV1_S16
    opt = cfg.optim_wrapper.optimizer
    assert opt.type == 'AdamW' and opt.lr == sf['BASE_LR'] and opt.weight_decay == sf['WEIGHT_DECAY']
    assert opt.get('eps', 1e-8) == sf['EPS']
    assert cfg.optim_wrapper.clip_grad == dict(max_norm=float(sf['CLIP_GRADIENT']))
    assert cfg.train_cfg.max_epochs == sf['MAX_EPOCH']
    assert cfg.model.cls_head.label_smooth_eps == sf['LABEL_SMOOTH_VALUE']


@pytest.mark.parametrize('config', [CONFIG, 'configs/posmlp_video/posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'])
def test_video_lr_curve_matches_slowfast(config):
    """Every iteration of the whole schedule (3 iterations per epoch)."""
    from mmengine.config import Config
    from mmengine.optim import OptimWrapper
    cfg = Config.fromfile(osp.join(ROOT, config))
    sf = dict(SLOWFAST_SSV1_S16)
    if 'kinetics400' in config:  # configs/K400/K400_MLP_S16x4.yaml
        sf.update(BASE_LR=2e-4, WARMUP_EPOCHS=10.0)
    q = torch.nn.Parameter(torch.zeros(1))
    ow = OptimWrapper(torch.optim.AdamW([q], lr=cfg.optim_wrapper.optimizer.lr))
    scheds = build_param_schedulers(cfg, ow, 3, 'mmaction')
    for it in range(sf['MAX_EPOCH'] * 3):
        ours, ref = ow.optimizer.param_groups[0]['lr'], slowfast_lr(sf, it / 3)
        assert math.isclose(ours, ref, rel_tol=1e-12), (config, it, ours, ref)
        step_param_schedulers(scheds, it, 3)


@pytest.mark.slow  # ~10 s alone, more on a loaded machine
def test_video_training_steps_match_slowfast():
    """Warm-up into the cosine, per-iteration lr, weight decay per parameter and weights after each step."""
    from mmaction.structures import ActionDataSample
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    sf = SLOWFAST_SSV1_S16
    cfg, model, expected, shape, num_classes = _build()
    ref = copy.deepcopy(model)
    with DefaultScope.overwrite_default_scope('mmaction'):
        import mmaction.engine  # noqa: F401
        ow = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    scheds = build_param_schedulers(cfg, ow, ITERS_PER_EPOCH, 'mmaction')
    named = dict(ref.named_parameters())
    # BN parameters (BN.WEIGHT_DECAY = 0.0) and 1-D parameters form the not-decayed group
    assert sf['BN_WEIGHT_DECAY'] == 0.
    groups = [dict(params=[p for n, p in named.items() if expected[n]], weight_decay=sf['WEIGHT_DECAY']),
              dict(params=[p for n, p in named.items() if not expected[n]], weight_decay=0.)]
    ref_opt = torch.optim.AdamW([g for g in groups if g['params']], lr=sf['BASE_LR'], eps=sf['EPS'],
                                weight_decay=sf['WEIGHT_DECAY'])
    ids = {id(p): n for n, p in model.named_parameters()}
    ref_ids = {id(p): n for n, p in ref.named_parameters()}
    g = torch.Generator().manual_seed(0)
    epochs = int(sf['WARMUP_EPOCHS']) + 1
    it = 0
    for epoch in range(epochs):
        for i in range(ITERS_PER_EPOCH):
            x = torch.randn(1, 1, *shape, generator=g, dtype=torch.float64)
            y = torch.randint(0, num_classes, (1, ), generator=g)
            # official: lr set before the step at the fractional epoch
            lr = slowfast_lr(sf, epoch + i / ITERS_PER_EPOCH)
            for grp in ref_opt.param_groups:
                grp['lr'] = lr
            ours_lr = {ids[id(p)]: (grp['lr'], grp['weight_decay'])
                       for grp in ow.optimizer.param_groups for p in grp['params']}
            ref_lr = {ref_ids[id(p)]: (grp['lr'], grp['weight_decay'])
                      for grp in ref_opt.param_groups for p in grp['params']}
            for n in ref_lr:
                assert math.isclose(ours_lr[n][0], ref_lr[n][0], rel_tol=1e-9), (it, n, ours_lr[n], ref_lr[n])
                assert ours_lr[n][1] == ref_lr[n][1], f'weight decay of {n}: ours {ours_lr[n][1]}, ' \
                                                      f'official {ref_lr[n][1]}'
            # ours
            model.train()
            torch.manual_seed(it)
            losses = model.loss(x, [ActionDataSample().set_gt_label(int(y))])
            loss, _ = model.parse_losses(losses)
            ow.update_params(loss)
            for s in scheds:
                if not s.by_epoch:
                    s.step()
            # official
            ref.train()
            torch.manual_seed(it)
            logits = ref.cls_head(ref.extract_feat(x)[0])
            target = torch.full((1, num_classes), sf['LABEL_SMOOTH_VALUE'] / num_classes, dtype=torch.float64)
            target[0, y] += 1 - sf['LABEL_SMOOTH_VALUE']
            ref_loss = torch.sum(-target * torch.log_softmax(logits, -1), -1).mean()
            ref_opt.zero_grad()
            ref_loss.backward()
            torch.nn.utils.clip_grad_norm_(ref.parameters(), sf['CLIP_GRADIENT'])
            ref_opt.step()
            # mmaction's label smoothing builds its targets in float32: ~1e-8 relative
            assert torch.allclose(loss, ref_loss, rtol=1e-6), (it, float(loss), float(ref_loss))
            it += 1
        for s in scheds:
            if s.by_epoch:
                s.step()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        assert torch.allclose(p, q, rtol=1e-8, atol=1e-10), (n, float((p - q).abs().max()))


ABLATIONS = sorted(osp.basename(p) for p in __import__('glob').glob(
    osp.join(ROOT, 'configs', 'posmlp_video', 'posmlp-video-s-*_4xb8-u16-60e_sthv1-rgb.py')))


@pytest.mark.parametrize('name', ABLATIONS)
def test_ablations_test_16x1x1(name):
    """The paper's ablation tables (3, 5, 7, 8) are "16x1x1": 16 frames, one crop, one clip."""
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'posmlp_video', name))
    pipe = cfg.test_dataloader.dataset.pipeline
    types = [t['type'] for t in pipe]
    assert 'ThreeCrop' not in types and 'TenCrop' not in types and 'CenterCrop' not in types
    # one crop as the official sth.py takes it (spatial index 0; test_eval_pipeline_parity_video.py)
    crop = next(t for t in pipe if t['type'] == 'mmposmlp.SlowFastUniformCrop')
    assert tuple(crop['spatial_indices']) == (0, ) and crop['crop_size'] == 224
    sampler = pipe[0]
    assert sampler['type'] == 'UniformSample' and sampler['clip_len'] == 16 and sampler.get('num_clips', 1) == 1
    resize = next(t for t in pipe if t['type'] == 'mmposmlp.SlowFastShortSideResize')
    assert resize['scale'] == 224  # SlowFast single-crop test: short side = TEST_CROP_SIZE
