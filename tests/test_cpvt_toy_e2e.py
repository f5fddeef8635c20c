"""End-to-end toy runs of the shipped dense configs (train + val with the real loops/metrics).

RetinaNet PVT-T+PEG (COCO format) and Semantic FPN PVT-T+PEG (ADE20K format) train a few
iterations on generated data and are evaluated; the backbone starts from a GAP-classifier
checkpoint in our converted format (what ``pcpvt2mmposmlp.py`` writes), loaded via init_cfg.
"""
import os.path as osp

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


@pytest.fixture(scope='module')
def toy_root(request, tmp_path_factory):
    try:  # the shared session fixture, when tests/conftest.py provides it
        return str(request.getfixturevalue('toy_data'))
    except pytest.FixtureLookupError:
        from mmposmlp.datasets.toy import make_toy_datasets
        out = str(tmp_path_factory.mktemp('toy'))
        make_toy_datasets(out, seed=0, which=('coco', 'ade20k'))
        return out


@pytest.fixture(scope='module')
def gap_checkpoint(tmp_path_factory):
    """A PVT-T+PEG GAP ImageNet classifier checkpoint (random weights, converted key layout)."""
    from mmposmlp.models.backbones.pvt_peg import PVTPEG
    torch.manual_seed(0)
    bb = PVTPEG('tiny', out_indices=(3, ), norm_after_stage=[False, False, False, True])
    bb.init_weights()
    sd = {'backbone.' + k: v for k, v in bb.state_dict().items()}
    sd['head.fc.weight'] = torch.zeros(1000, 512)
    sd['head.fc.bias'] = torch.zeros(1000)
    path = str(tmp_path_factory.mktemp('ckpt') / 'pvt-peg-t-gap_in1k_mmposmlp.pth')
    torch.save({'state_dict': sd, 'meta': {}}, path)
    return path, bb.state_dict()


def _walk_pipeline(pipeline, fn):
    for t in pipeline:
        fn(t)


def _finish(cfg, work_dir):
    cfg.work_dir = str(work_dir)
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=-1, save_last=False)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=1)
    cfg.env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
                       dist_cfg=dict(backend='gloo'))
    cfg.launcher = 'none'
    cfg.randomness = dict(seed=0)
    for split in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[split].num_workers = 0
        cfg[split].persistent_workers = False
        cfg[split].batch_size = 2 if split == 'train_dataloader' else 1
    return cfg


def test_toy_retinanet_pvt_peg_t(toy_root, gap_checkpoint, tmp_path):
    from mmengine.config import Config
    from mmengine.runner import Runner
    cfg = Config.fromfile(osp.join(ROOT, 'configs/cpvt/retinanet_pvt-peg-t_fpn_1x_coco.py'))
    coco = osp.join(toy_root, 'coco') + '/'
    for split in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[split].dataset.data_root = coco
        # the toy annotations hold 3 of the 80 COCO categories: the metric can only map those
        cfg[split].dataset.metainfo = dict(classes=('person', 'bicycle', 'car'))
    cfg.model.bbox_head.num_classes = 3
    cfg.val_evaluator.ann_file = coco + 'annotations/instances_val2017.json'
    cfg.test_evaluator.ann_file = coco + 'annotations/instances_val2017.json'

    def small(t):
        if t.type == 'Resize':
            t.scale = (160, 128)
    _walk_pipeline(cfg.train_dataloader.dataset.pipeline, small)
    _walk_pipeline(cfg.val_dataloader.dataset.pipeline, small)
    cfg.model.backbone.init_cfg.checkpoint = gap_checkpoint[0]
    cfg.train_dataloader.dataset.indices = 4  # 2 iterations of 2 images
    cfg.val_dataloader.dataset.indices = 2
    # an untrained detector scores below the default 0.05 threshold: keep a few boxes anyway
    cfg.model.test_cfg.update(score_thr=0.0, nms_pre=100, max_per_img=20)
    cfg.train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1, val_interval=10)
    runner = Runner.from_cfg(_finish(cfg, tmp_path))
    runner.train()
    # the backbone really started from the classifier checkpoint (PEG of the last stage untouched
    # except by a few small AdamW steps)
    peg_w = runner.model.backbone.pegs[3].proj[0].weight.detach()
    assert (peg_w - gap_checkpoint[1]['pegs.3.proj.0.weight']).abs().max() < 1e-2
    metrics = runner.val()
    assert 0 <= metrics['coco/bbox_mAP'] <= 1


def test_toy_semantic_fpn_pvt_peg_t(toy_root, gap_checkpoint, tmp_path):
    from mmengine.config import Config
    from mmengine.runner import Runner
    cfg = Config.fromfile(osp.join(ROOT, 'configs/cpvt/fpn_pvt-peg-t_4xb4-80k_ade20k-512x512.py'))
    ade = osp.join(toy_root, 'ade', 'ADEChallengeData2016')
    for split in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[split].dataset.data_root = ade

    def small(t):
        if t.type in ('RandomResize', 'Resize'):
            t.scale = (160, 128)
        if t.type == 'RandomCrop':
            t.crop_size = (64, 64)
    _walk_pipeline(cfg.train_dataloader.dataset.pipeline, small)
    _walk_pipeline(cfg.val_dataloader.dataset.pipeline, small)
    cfg.model.data_preprocessor.size = (64, 64)
    cfg.model.backbone.init_cfg.checkpoint = gap_checkpoint[0]
    cfg.val_dataloader.dataset.indices = 2
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=2, val_interval=10)
    cfg.param_scheduler = [dict(type='PolyLR', power=0.9, eta_min=1e-6, begin=0, end=2, by_epoch=False)]
    runner = Runner.from_cfg(_finish(cfg, tmp_path))
    runner.train()
    metrics = runner.val()
    assert 'mIoU' in metrics and 0 <= metrics['mIoU'] <= 100
