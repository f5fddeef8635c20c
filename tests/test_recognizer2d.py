"""Our image backbones in mmaction2's 2-D recognizers (TSN) through SingleTensorBackbone: the shipped TSN config's
toy variant trains a step and predicts on the toy Kinetics clips; a head that needs a class token our backbones
do not give (TimeSformer's) is refused in one sentence."""
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from toolcfg import repo_path

TOY_TSN = repo_path('configs', 'posmlp', 'toy', 'tsn_posmlp-t_toy-kinetics400.py')
ONE_STEP = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=1, val_interval=100)
val_cfg = None
val_dataloader = None
val_evaluator = None
param_scheduler = []
default_hooks = dict(checkpoint=dict(by_epoch=False, interval=1), logger=dict(interval=1))
log_processor = dict(by_epoch=False)
test_dataloader = dict(dataset=dict(indices=2))
# a narrow PosMLP (the toy's is PosMLP-T): the test is about the wiring, not the width
model = dict(backbone=dict(backbone=dict(arch=dict(_delete_=True, embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                                  groups=[2, 4, 8, 16], mlp_ratios=[2, 2, 2, 2],
                                                  window_sizes=[7, 7, 7, 7]))),
             cls_head=dict(in_channels=128))
"""


def test_tsn_config_wraps_posmlp_in_single_tensor_backbone():
    cfg = Config.fromfile(repo_path('configs', 'posmlp', 'tsn_posmlp-t_8xb32-1x1x3-100e_kinetics400-rgb.py'))
    assert cfg.model.type == 'Recognizer2D' and cfg.model.cls_head.type == 'TSNHead'
    assert cfg.model.backbone.type == 'mmposmlp.SingleTensorBackbone'
    assert cfg.model.backbone.backbone.type == 'mmposmlp.PosMLP' and cfg.model.cls_head.in_channels == 768


def test_tsn_posmlp_toy_trains_a_step_and_predicts(toy_data, tmp_path, monkeypatch):
    from mmengine.runner import Runner
    os.makedirs(tmp_path / 'data')
    os.symlink(toy_data, tmp_path / 'data' / 'toy')
    monkeypatch.chdir(tmp_path)
    cfg_path = tmp_path / 'tsn.py'
    cfg_path.write_text(f'_base_ = {TOY_TSN!r}\n' + ONE_STEP)
    cfg = Config.fromfile(str(cfg_path))
    cfg.work_dir = str(tmp_path / 'work')
    runner = Runner.from_cfg(cfg)
    inner = runner.model.backbone.backbone
    assert type(inner).__name__ == 'PosMLP'
    before = {n: p.detach().clone() for n, p in inner.named_parameters()}
    runner.train()
    assert any(not torch.equal(before[n], p.detach()) for n, p in inner.named_parameters())
    metrics = runner.test()
    assert 0.0 <= metrics['acc/top1'] <= 1.0
    assert osp.isfile(tmp_path / 'work' / 'iter_1.pth')


def _timesformer_with_posmlp_video():
    from mmposmlp.testing import build_model_from_cfg
    cfg = Config.fromstring(
        "_base_ = 'mmaction::recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py'\n"
        "model = dict(backbone=dict(_delete_=True, type='mmposmlp.PosMLPVideo', out_indices=(3, ),\n"
        "    arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2, groups=[2, 2, 4, 4],\n"
        "              window_sizes=[(2, 4, 4), (2, 4, 4), (2, 2, 2), (2, 2, 2)])),\n"
        "    cls_head=dict(in_channels=32, num_classes=5))\n", '.py')
    return build_model_from_cfg(cfg)[0]


TIMESFORMER_SENTENCE = (
    "cls_head TimeSformerHead classifies TimeSformer's class token, an (N, C) vector, but mmposmlp.PosMLPVideo "
    "returns feature maps without one: use cls_head=dict(type='I3DHead', in_channels=32, num_classes=5), which "
    'average-pools the maps.')


def test_timesformer_head_is_refused_in_one_sentence():
    from mmposmlp.engine.consumer_checks import ConsumerCheckHook, ConsumerMismatchError, check_consumers
    model = _timesformer_with_posmlp_video()
    with pytest.raises(ConsumerMismatchError) as exc:
        check_consumers(model)
    assert str(exc.value) == TIMESFORMER_SENTENCE

    class FakeRunner:
        pass
    runner = FakeRunner()
    runner.model = model
    with pytest.raises(ConsumerMismatchError):
        ConsumerCheckHook().before_run(runner)
    # without the check, the head fails deep inside (the bare error the sentence replaces)
    with pytest.raises(Exception) as bare:
        model.eval()
        with torch.no_grad():
            model._forward(torch.randn(1, 1, 3, 4, 32, 32), stage='head')
    assert 'class token' not in str(bare.value)


def test_the_i3d_head_the_sentence_names_is_accepted():
    from mmposmlp.engine.consumer_checks import check_consumers
    from mmposmlp.testing import build_model_from_cfg
    cfg = Config.fromstring(
        "_base_ = 'mmaction::recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py'\n"
        "model = dict(backbone=dict(_delete_=True, type='mmposmlp.PosMLPVideo', out_indices=(3, ),\n"
        "    arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2, groups=[2, 2, 4, 4],\n"
        "              window_sizes=[(2, 4, 4), (2, 4, 4), (2, 2, 2), (2, 2, 2)])),\n"
        "    cls_head=dict(_delete_=True, type='I3DHead', in_channels=32, num_classes=5))\n", '.py')
    model = build_model_from_cfg(cfg)[0]
    check_consumers(model)
    model.eval()
    with torch.no_grad():
        assert model._forward(torch.randn(1, 1, 3, 4, 32, 32), stage='head').shape == (1, 5)
