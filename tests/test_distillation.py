"""Distillation (mmposmlp/models/classifiers/distillation.py): DeiT's hard / soft distillation token and the
module-output KD of IMLP Table 2, the frozen teacher, its checked loading, and the configs that use them
(CPVT Table 4's distilled rows, IMLP Tables 2 / 4 / 8)."""
import copy
import fractions
import os
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SMALL = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
NUM_CLASSES = 10


def _teacher_cfg(path):
    return dict(type='ImageClassifier', backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, ),
                                                      with_cls_token=False, out_type='avg_featmap', final_norm=False),
                neck=None, head=dict(type='LinearClsHead', num_classes=NUM_CLASSES, in_channels=32),
                init_cfg=dict(type='Pretrained', checkpoint=path))


def _write_teacher(tmp_path, seed=1):
    """A random-weight teacher file, its weights scaled up so that its argmax varies between images."""
    from mmpretrain.registry import MODELS
    torch.manual_seed(seed)
    teacher = MODELS.build({k: v for k, v in _teacher_cfg('x').items() if k != 'init_cfg'})
    with torch.no_grad():
        teacher.head.fc.weight.normal_(0, 10.)
        teacher.head.fc.bias.zero_()
    path = str(tmp_path / 'teacher.pth')
    torch.save({'state_dict': teacher.state_dict(), 'meta': {'epoch': 300}}, path)
    return path, teacher.state_dict()


def _student(teacher_path, augments=True, **kw):
    """CPVT with a distillation token, stochastic (drop path 0.2), Mixup/CutMix like DeiT."""
    from mmpretrain.registry import MODELS
    cfg = dict(
        type='mmposmlp.DistillationClassifier',
        backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, 1), with_dist_token=True,
                      drop_path_rate=0.2),
        neck=None,
        head=dict(type='mmposmlp.DeiTDistillationHead', num_classes=NUM_CLASSES, in_channels=32,
                  loss=dict(type='CrossEntropyLoss', use_soft=augments),
                  init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)),
        data_preprocessor=dict(type='ClsDataPreprocessor', num_classes=NUM_CLASSES, mean=[123.675, 116.28, 103.53],
                               std=[58.395, 57.12, 57.375], to_rgb=True),
        teacher=_teacher_cfg(teacher_path))
    if augments:
        cfg['train_cfg'] = dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)])
    cfg.update(kw)
    model = MODELS.build(cfg)
    model.init_weights()
    return model


def _batch(n=4, seed=0):
    from mmpretrain.structures import DataSample
    g = torch.Generator().manual_seed(seed)
    return dict(inputs=[torch.randint(0, 256, (3, 48, 48), generator=g, dtype=torch.uint8) for _ in range(n)],
                data_samples=[DataSample().set_gt_label(int(i)) for i in torch.randint(0, NUM_CLASSES, (n, ),
                                                                                         generator=g)])


def _sgd(model):
    from mmengine.optim import build_optim_wrapper
    return build_optim_wrapper(model, dict(optimizer=dict(type='SGD', lr=0.5, momentum=0.0)))


def _seed(s):
    torch.manual_seed(s)
    np.random.seed(s)


@pytest.mark.parametrize('augments', [True, False], ids=['mixup_cutmix', 'hard_labels'])
def test_hard_distillation_step_equals_the_hand_computed_loss(tmp_path, augments):
    """One training step: the loss is 1/2 CE(class head, targets) + 1/2 CE(distillation head, argmax of the
    teacher's logits on the same (mixed) images), bit for bit, with drop path and Mixup/CutMix drawing random
    numbers; the student's weights move by exactly -lr x the gradient of that loss."""
    path, _ = _write_teacher(tmp_path)
    model = _student(path, augments=augments).train()
    hand = copy.deepcopy(model)
    data = _batch(8)

    _seed(7)
    log = model.train_step(copy.deepcopy(data), _sgd(model))

    _seed(7)
    d = hand.data_preprocessor(copy.deepcopy(data), True)  # the same Mixup/CutMix draws
    x, samples = d['inputs'], d['data_samples']
    cls_token, dist_token = hand.backbone(x)[-1]  # the same drop-path draws
    cls_score = hand.head.layers.head(cls_token)
    dist_score = hand.head.layers.head_dist(dist_token)
    with torch.no_grad():
        t_logits = hand.teacher.module.head.fc(hand.teacher.module.backbone(x)[-1])  # LinearClsHead
    B = x.shape[0]
    if augments:
        target = torch.stack([s.gt_score for s in samples])
        assert not torch.equal(target, F.one_hot(target.argmax(1), NUM_CLASSES).float())  # really mixed
        label_loss = (-target * F.log_softmax(cls_score, dim=-1)).sum(-1).sum() / B
    else:
        y = torch.cat([s.gt_label for s in samples])
        label_loss = F.cross_entropy(cls_score, y, reduction='none').sum() / B
    teacher_labels = t_logits.argmax(dim=1)
    assert len(set(teacher_labels.tolist())) > 1
    dist_loss = F.cross_entropy(dist_score, teacher_labels)
    torch.testing.assert_close(  # what cross_entropy is, written out
        dist_loss.double(), -F.log_softmax(dist_score.double(), dim=1).gather(1, teacher_labels[:, None]).mean(),
        rtol=1e-6, atol=0)
    expected = label_loss * 0.5 + dist_loss * 0.5
    assert torch.equal(log['loss'].detach(), expected.detach()), (log, expected)
    assert torch.equal(log['loss_distill'].detach(), (dist_loss * 0.5).detach())
    assert torch.equal(log['loss_cls'].detach(), (label_loss * 0.5).detach())

    expected.backward()
    for (name, p), (_, q) in zip(model.named_parameters(), hand.named_parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.detach(), q.detach() - 0.5 * q.grad, rtol=0, atol=1e-6, msg=name)


def test_soft_distillation_is_deits_kl_at_temperature_tau():
    from mmposmlp.models.heads.deit_distillation import DeiTDistillationHead
    head = DeiTDistillationHead(num_classes=7, in_channels=8, distill_type='soft', alpha=0.3, tau=3.0)
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(5, 7, generator=g, dtype=torch.float64), torch.randn(5, 7, generator=g, dtype=torch.float64)
    p_t = F.softmax(t / 3, dim=1)
    kl = (p_t * (p_t.log() - F.log_softmax(s / 3, dim=1))).sum() * 9 / s.numel()
    torch.testing.assert_close(head.distill_loss(s, t), kl, rtol=1e-12, atol=0)
    hard = DeiTDistillationHead(num_classes=7, in_channels=8)
    assert (hard.distill_type, hard.alpha, hard.tau) == ('hard', 0.5, 1.0)  # DeiT's defaults
    for bad, match in ((dict(distill_type='hrad'), "unknown distill_type 'hrad'"), (dict(alpha=1.5), 'alpha=1.5'),
                       (dict(tau=0), 'tau=0')):
        with pytest.raises(ValueError, match=match):
            DeiTDistillationHead(num_classes=7, in_channels=8, **bad)


def test_prediction_averages_both_heads_and_the_teacher_never_runs_at_test_time(tmp_path):
    path, _ = _write_teacher(tmp_path)
    model = _student(path).eval()
    x = torch.randn(2, 3, 48, 48)
    feats = model.extract_feat(x)
    cls_score, dist_score = model.head.scores(feats)
    calls = []
    handle = model.teacher.module.register_forward_hook(lambda *a: calls.append(1))
    out = model(x, mode='tensor')
    torch.testing.assert_close(out, (cls_score + dist_score) / 2, rtol=0, atol=0)
    preds = model(x, _batch(2)['data_samples'], mode='predict')
    torch.testing.assert_close(torch.stack([p.pred_score for p in preds]), F.softmax(out, dim=1))
    handle.remove()
    assert calls == []


def test_teacher_is_frozen_and_outside_the_students_state_optimizer_and_ema(tmp_path):
    from mmengine.model import ExponentialMovingAverage
    path, saved = _write_teacher(tmp_path)
    model = _student(path)
    teacher = model.teacher.module
    for k, v in teacher.state_dict().items():  # loaded from the file
        assert torch.equal(v, saved[k]), k
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    teacher_ids = {id(p) for p in teacher.parameters()}
    assert all(not p.requires_grad for p in teacher.parameters())
    assert not any(k.startswith('teacher') for k in model.state_dict())
    assert not teacher_ids & {id(p) for p in model.parameters()}
    optim = _sgd(model)
    assert not teacher_ids & {id(p) for group in optim.param_groups for p in group['params']}
    ema = ExponentialMovingAverage(model)
    assert ema.module.teacher is model.teacher  # an EMA copy shares the one teacher
    assert not any('teacher' in k for k in ema.avg_parameters)
    model.train()
    assert not teacher.training
    student_before = copy.deepcopy(model.backbone.state_dict())
    for i in range(2):
        model.train_step(_batch(seed=i), optim)
        ema.update_parameters(model)
    assert not teacher.training and all(p.grad is None for p in teacher.parameters())
    for k, v in teacher.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert any(not torch.equal(v, student_before[k]) for k, v in model.backbone.state_dict().items())
    # a saved and reloaded student needs no teacher weights
    fresh = _student(path)
    fresh.load_state_dict(model.state_dict(), strict=True)


def test_a_teacher_without_weights_is_refused_in_one_sentence(tmp_path):
    missing = str(tmp_path / 'no_such_teacher.pth')
    model = None
    with pytest.raises(FileNotFoundError) as e:
        model = _student(missing)
    msg = str(e.value)
    assert missing in msg and '\n' not in msg and msg.count('. ') == 0, msg
    assert model is None
    with pytest.raises(ValueError,
                       match=r"the teacher has no weights to load; give it init_cfg=dict\(type='Pretrained'"):
        _student(missing, teacher={k: v for k, v in _teacher_cfg(missing).items() if k != 'init_cfg'})
    with pytest.raises(ValueError, match="unknown key 'checkpont'; did you mean 'checkpoint'"):
        _student(missing, teacher=dict(_teacher_cfg(missing), init_cfg=dict(type='Pretrained', checkpont=missing)))
    # built but never initialised: loss() refuses instead of distilling a random teacher
    from mmpretrain.registry import MODELS
    path, _ = _write_teacher(tmp_path)
    cfg = dict(type='mmposmlp.DistillationClassifier', backbone=dict(type='mmposmlp.CPVT', arch=SMALL,
                                                                         peg_positions=(0, ), with_dist_token=True),
               head=dict(type='mmposmlp.DeiTDistillationHead', num_classes=NUM_CLASSES, in_channels=32),
               teacher=_teacher_cfg(path))
    built = MODELS.build(cfg)
    d = built.data_preprocessor(_batch(), True)
    with pytest.raises(RuntimeError, match=r"teacher's weights \(.*teacher.pth\) were never loaded: call the model's "
                       r'init_weights\(\) before training'):
        built(d['inputs'], d['data_samples'], mode='loss')


def test_a_teacher_file_that_needs_a_class_is_refused_unless_trusted(tmp_path):
    from mmposmlp.utils.safe_load import UnsafeCheckpointError, trusted_checkpoints
    marker = tmp_path / 'MARKER'

    class Evil:
        def __reduce__(self):
            return os.system, (f'touch {marker}', )

    _, state = _write_teacher(tmp_path)
    evil = str(tmp_path / 'evil.pth')
    torch.save({'state_dict': state, 'meta': {'x': Evil()}}, evil)
    with pytest.raises(UnsafeCheckpointError) as e:
        _student(evil)
    assert 'evil.pth' in str(e.value) and '\n' not in str(e.value)
    assert not marker.exists()
    # a harmless class (fractions.Fraction) needs the explicit per-file opt-in
    odd = str(tmp_path / 'odd.pth')
    torch.save({'state_dict': state, 'meta': {'lr': fractions.Fraction(1, 3)}}, odd)
    with pytest.raises(UnsafeCheckpointError, match='odd.pth'):
        _student(odd)
    with trusted_checkpoints([odd]):
        model = _student(odd)
    for k, v in model.teacher.module.state_dict().items():
        assert torch.equal(v, state[k])


def test_a_teacher_checkpoint_that_does_not_fit_is_refused(tmp_path):
    from mmposmlp.models.checkpoints import CheckpointMismatchError
    _, state = _write_teacher(tmp_path)
    state = dict(state)
    state['backbone.extra.weight'] = torch.zeros(1)
    path = str(tmp_path / 'more.pth')
    torch.save({'state_dict': state}, path)
    with pytest.raises(CheckpointMismatchError, match=r"1 key\(s\) with no place in ImageClassifier: 'backbone.extra"):
        _student(path)


def test_feature_distillation_is_the_mean_squared_error_of_the_paired_module_outputs(tmp_path):
    """IMLP Table 2 "w/ channel + KD": each student FFN output learns the teacher's FFN output."""
    path, _ = _write_teacher(tmp_path)
    weight = 0.7
    pairs = dict(student='backbone.layers.*.ffn.fc2', teacher='backbone.layers.*.ffn.fc2')
    gap = dict(with_cls_token=False, out_type='avg_featmap', final_norm=False)  # the teacher's token layout
    model = _student(path, head=dict(type='LinearClsHead', num_classes=NUM_CLASSES, in_channels=32),
                     backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, ), **gap),
                     feature_distill=dict(pairs, loss_weight=weight)).eval()
    x = torch.randn(3, 3, 48, 48)
    samples = _batch(3)['data_samples']
    losses = model.loss(x, samples)
    assert set(losses) == {'loss', 'loss_feature_distill'}
    outs = {}
    hooks = [m.register_forward_hook(lambda mod, i, o, key=key: outs.setdefault(key, o))
             for key, m in [(('s', i), model.backbone.layers[i].ffn.fc2) for i in range(2)]
             + [(('t', i), model.teacher.module.backbone.layers[i].ffn.fc2) for i in range(2)]]
    model.extract_feat(x)
    model.teacher.module(x, mode='tensor')
    for h in hooks:
        h.remove()
    expected = weight * sum(((outs[('s', i)] - outs[('t', i)]) ** 2).mean() for i in range(2)) / 2
    torch.testing.assert_close(losses['loss_feature_distill'], expected, rtol=1e-6, atol=0)
    twin = copy.deepcopy(model)  # as an EMA copy: its own student modules, the one shared teacher
    assert twin.teacher is model.teacher
    torch.testing.assert_close(twin.loss(x, samples)['loss_feature_distill'], losses['loss_feature_distill'])
    # the gradient reaches the student's modules and never the teacher
    losses['loss_feature_distill'].backward()
    assert model.backbone.layers[0].ffn.fc2.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.teacher.module.parameters())
    with pytest.raises(ValueError, match=r"student pattern 'backbone.layers.\*.ffn.fc2' matches 2 module\(s\) and "
                       r"teacher pattern 'backbone.layers.0.ffn.fc2' matches 1"):
        _student(path, head=dict(type='LinearClsHead', num_classes=NUM_CLASSES, in_channels=32),
                 backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, )),
                 feature_distill=dict(student='backbone.layers.*.ffn.fc2', teacher='backbone.layers.0.ffn.fc2'))
    with_cls = _student(path, head=dict(type='LinearClsHead', num_classes=NUM_CLASSES, in_channels=32),
                        backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, )), feature_distill=pairs)
    with pytest.raises(ValueError, match=r'pairs a student output of shape \(3, 10, 32\) with a teacher output of '
                       r'shape \(3, 9, 32\); pair modules whose outputs have the same shape'):
        with_cls.loss(x, samples)
    twice = _student(path, head=dict(type='LinearClsHead', num_classes=NUM_CLASSES, in_channels=32),
                     backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, ), drop_path_rate=0.1, **gap),
                     feature_distill=dict(student='backbone.layers.*.drop_path', teacher='backbone.layers.*.ffn'))
    with pytest.raises(RuntimeError, match=r'each student module must run once per forward, but they ran \[2, 2\] '
                       'times'):
        twice.loss(x, samples)  # a block's DropPath serves both residual branches
    with pytest.raises(ValueError, match=r"feature_distill takes \['student', 'teacher', 'loss_weight'\]"):
        _student(path, feature_distill=dict(student='a', teacher='b', weight=1.0))
    with pytest.raises(ValueError, match='nothing is distilled'):
        _student(path, head=dict(type='LinearClsHead', num_classes=NUM_CLASSES, in_channels=32),
                 backbone=dict(type='mmposmlp.CPVT', arch=SMALL, peg_positions=(0, )))


# --------------------------------------------------------------------------------------------- the backbone
def test_cpvt_distillation_token_equals_mmpretrain_distilled_deit_fp64():
    """CPVT with ``with_dist_token=True``, no PEG and DeiT's learnable table is mmpretrain's
    ``DistilledVisionTransformer`` (tokens [cls, dist, patches], a 2 + H*W position table)."""
    from mmpretrain.models import DistilledVisionTransformer

    from mmposmlp.models.backbones.cpvt import CPVT
    ours = CPVT(SMALL, img_size=64, peg_positions=(), pos_embed_type='learnable', with_dist_token=True).double()
    ref = DistilledVisionTransformer(SMALL, img_size=64).double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in ours.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / (p[0].numel() if p.dim() > 1 else 10) ** 0.5)
    state = {}
    for k, v in ours.state_dict().items():
        k = k.replace('abs_pos_embed.pos_embed', 'pos_embed').replace('patch_embed.', 'patch_embed.projection.')
        state[k.replace('ffn.fc1.', 'ffn.layers.0.0.').replace('ffn.fc2.', 'ffn.layers.1.')] = v
    assert ref.load_state_dict(state, strict=True)
    ours.eval(), ref.eval()
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    (cls_o, dist_o), (cls_r, dist_r) = ours(x)[0], ref(x)[0]
    torch.testing.assert_close(cls_o, cls_r, rtol=0, atol=1e-12)
    torch.testing.assert_close(dist_o, dist_r, rtol=0, atol=1e-12)
    assert (cls_o - dist_o).abs().max() > 1e-3
    with pytest.raises(ValueError, match='with_dist_token=True needs with_cls_token=True'):
        CPVT(SMALL, with_dist_token=True, with_cls_token=False, out_type='avg_featmap')


def test_cpvt_distillation_token_passes_the_pegs_and_freezes_with_the_stem():
    from mmposmlp.models.backbones.cpvt import CPVT
    m = CPVT(SMALL, peg_positions=(0, 1), with_dist_token=True, frozen_stages=0).eval()
    assert m.num_extra_tokens == 2 and not m.dist_token.requires_grad and not m.cls_token.requires_grad
    raw = CPVT(SMALL, peg_positions=(0, ), with_dist_token=True, out_type='raw', out_indices=0).eval()
    x = torch.randn(1, 3, 48, 48)
    seen = []
    raw.pegs[0].register_forward_hook(lambda mod, inp, out: seen.append((inp[0], out)))
    raw(x)
    before, after = seen[0]
    assert before.shape[1] == 2 + 9
    torch.testing.assert_close(after[:, :2], before[:, :2], rtol=0, atol=0)  # cls and dist tokens untouched
    assert (after[:, 2:] - before[:, 2:]).abs().max() > 0


# --------------------------------------------------------------------------------------------- the configs
CONFIGS = {  # config -> (params, what)
    'cpvt/paper_tables/cpvt-ti-distilled_8xb128_in1k.py': (5_882_384, 'CPVT-Ti + dist token + head_dist'),
    'cpvt/paper_tables/deit-ti-distilled_8xb128_in1k.py': (5_910_800, "timm's deit_tiny_distilled_patch16_224"),
    'imlp/ablations/deit-ti-imlp-channel-kd_4xb256_in1k.py': (4_864_936, 'the AMLP student of Table 2'),
    'imlp/ablations/deit-ti-gelu-sum_4xb256_in1k.py': (2_166_952, 'DeiT-Ti without its MLP parameters'),
    'imlp/ablations/deit-ti-agelu-sum_4xb256_in1k.py': (9_244_840, '+ 4 x 768 x 192 per block'),
    'imlp/ablations/deit-ti-softplus_4xb256_in1k.py': (5_717_416, 'DeiT-Ti'),
}


def _build(rel):
    from mmengine.config import Config

    from mmposmlp.testing import build_model_from_cfg
    cfg = Config.fromfile(osp.join(ROOT, 'configs', rel))
    return build_model_from_cfg(cfg)[0], cfg


@pytest.mark.parametrize('rel', sorted(CONFIGS), ids=lambda r: osp.basename(r)[:-3])
def test_new_configs_build_with_their_params(rel):
    model, cfg = _build(rel)
    assert sum(p.numel() for p in model.parameters()) == CONFIGS[rel][0]
    with torch.no_grad():
        out = model.eval()(torch.randn(1, 3, 224, 224), mode='tensor')
    assert out.shape == (1, 1000) and torch.isfinite(out).all()
    ffn = getattr(model.backbone.layers[0], 'ffn', None)
    if 'softplus' in rel:
        assert type(ffn.acts[0]).__name__ == 'Softplus' and (ffn.fc1.out_features, ffn.spatial) == (768, False)
    if 'sum' in rel:
        assert type(ffn).__name__ == 'ActivationSum' and ffn.num_functions == 768
        assert ffn.adaptive == ('agelu' in rel)
    if 'distilled' in rel:
        assert type(model).__name__ == 'DistillationClassifier' and model.backbone.with_dist_token
        assert (model.head.distill_type, model.head.alpha) == ('hard', 0.5)
        assert cfg.model.teacher.model_name == 'regnety_160'
        assert cfg.optim_wrapper.paramwise_cfg.custom_keys['.dist_token'] == dict(decay_mult=0.0)
        assert cfg.train_cfg.max_epochs == 300
    if 'kd' in rel:
        pairs = model.feature_distill
        assert len(pairs['student']) == len(pairs['teacher']) == 12 and pairs['loss_weight'] == 1.0
        assert cfg.model.teacher.model_name == 'deit_tiny_patch16_224'


def test_deit_tiny_distilled_config_has_timms_parameter_count():
    import timm
    model, _ = _build('cpvt/paper_tables/deit-ti-distilled_8xb128_in1k.py')
    ref = timm.create_model('deit_tiny_distilled_patch16_224', pretrained=False)
    assert sum(p.numel() for p in ref.parameters()) == CONFIGS['cpvt/paper_tables/deit-ti-distilled_8xb128_in1k.py'][0]
    assert sum(p.numel() for p in model.teacher.module.parameters()) == sum(
        p.numel() for p in timm.create_model('regnety_160', pretrained=False).parameters())


def test_tools_name_a_missing_teacher_file_before_building_and_trust_covers_it(tmp_path, monkeypatch):
    """tools/train.py's pre-flight check names the teacher file, where it comes from and the command (no
    'train from random initialisation' for a teacher); --trust-checkpoint applies to the teacher file too."""
    from mmengine.config import Config

    from mmposmlp.engine.entry import UserError, pretrained_checkpoints
    from mmposmlp.engine.preflight import check_pretrained
    monkeypatch.chdir(tmp_path)
    for rel, name in (('cpvt/paper_tables/cpvt-ti-distilled_8xb128_in1k.py', 'regnety_160-a5fe301d.pth'),
                      ('imlp/ablations/deit-ti-imlp-channel-kd_4xb256_in1k.py', 'deit_tiny_patch16_224-a1311bcf.pth'),
                      ('cpvt/toy/cpvt-ti-distilled_toy-in1k.py', 'toy_teacher_cpvt.pth')):
        cfg = Config.fromfile(osp.join(ROOT, 'configs', rel))
        if name != 'toy_teacher_cpvt.pth':  # DeiT's files: named by URL (downloaded once, hash-checked)
            assert cfg.model.teacher.init_cfg.checkpoint == 'https://dl.fbaipublicfiles.com/deit/' + name
            assert cfg.model.teacher.init_cfg.checkpoint in pretrained_checkpoints(cfg)
            cfg.model.teacher.init_cfg.checkpoint = 'checkpoints/' + name  # a local copy: the missing-file route
        with pytest.raises(UserError) as e:
            check_pretrained(cfg)
        msg = str(e.value)
        assert f'teacher checkpoint {cfg.model.teacher.init_cfg.checkpoint} does not exist ' \
               '(model.teacher.init_cfg.checkpoint): ' in msg, msg
        assert ('wget -P checkpoints https://dl.fbaipublicfiles.com/deit/' + name in msg) or \
            'make_toy_datasets.py --out data/toy --which imagenet' in msg, msg
        assert 'random initialisation' not in msg and '\n' not in msg
        assert cfg.model.teacher.init_cfg.checkpoint in pretrained_checkpoints(cfg)


def test_imlp_kd_config_loads_an_official_format_deit_file_and_pairs_all_12_blocks(tmp_path):
    """The Table 2 "w/ channel + KD" config end to end on one image: the teacher file in DeiT's release format
    ({'model': timm state dict}) loads checked into the TimmClassifier teacher, and each of the 12 AMLP
    outputs is compared with the same block's MLP output of the teacher."""
    import timm
    from mmengine.config import Config

    from mmposmlp.testing import build_model_from_cfg
    torch.manual_seed(0)
    official = timm.create_model('deit_tiny_patch16_224', pretrained=False)
    path = str(tmp_path / 'deit_tiny_patch16_224-a1311bcf.pth')
    torch.save({'model': official.state_dict()}, path)
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'imlp', 'ablations', 'deit-ti-imlp-channel-kd_4xb256_in1k.py'))
    cfg.model.teacher.init_cfg.checkpoint = path
    model = build_model_from_cfg(cfg)[0]
    model.init_weights()
    for k, v in official.state_dict().items():
        assert torch.equal(model.teacher.module.state_dict()[k], v), k
    x = torch.randn(1, 3, 224, 224)
    seen = []
    hooks = [model.get_submodule(n).register_forward_hook(lambda mod, i, o: seen.append(o.shape))
             for n in model.feature_distill['student']]
    losses = model.loss(x, _batch(1)['data_samples'])
    for h in hooks:
        h.remove()
    assert seen == [torch.Size([1, 197, 192])] * 12
    assert set(losses) == {'loss', 'loss_feature_distill'} and losses['loss_feature_distill'] > 0
    torch.testing.assert_close(model.teacher.logits(x), official.eval()(x), rtol=0, atol=0)


@pytest.mark.slow  # ~40 s: a 2-process gloo run of the distilled toy
def test_distilled_toy_trains_with_ddp_and_both_ranks_agree(toy_data, tmp_path):
    """tools/dist_train.sh with 2 processes: the teacher lives outside the DDP-wrapped student (no broadcast,
    no gradient bucket), each rank loads it from the same file; training and evaluation run and both ranks end
    with the same student weights."""
    import subprocess
    import sys

    from resume_harness import toy_cwd
    root = osp.dirname(osp.dirname(osp.abspath(__file__)))
    cwd = toy_cwd(tmp_path, toy_data)
    cfg = tmp_path / 'cfg.py'
    cfg.write_text(f"_base_ = ['{root}/configs/cpvt/toy/cpvt-ti-distilled_toy-in1k.py']\n"
                   "custom_hooks = [dict(type='mmposmlp.SaveRankWeightsHook')]\n")
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=root)
    env['PATH'] = osp.dirname(sys.executable) + os.pathsep + env.get('PATH', '')
    res = subprocess.run(['bash', osp.join(root, 'tools', 'dist_train.sh'), str(cfg), '2', '--work-dir',
                          str(tmp_path / 'work')], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    log = res.stdout + res.stderr
    assert 'loss_distill' in log and 'accuracy/top1' in log
    r0, r1 = (torch.load(tmp_path / 'work' / f'rank{r}_final.pth', weights_only=True)['params'] for r in (0, 1))
    assert len(r0) > 10 and r0.keys() == r1.keys() and all(torch.equal(v, r1[k]) for k, v in r0.items())
    assert not any(k.startswith('teacher') for k in r0)
