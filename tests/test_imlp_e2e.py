"""Toy end-to-end run of the shipped Mask R-CNN Swin-T + IMLP config (IMLP paper, Table 6).

The real config (full Swin-T + IMLP, real COCO pipeline and metric) trains a few iterations
on the generated COCO-format toy set and is evaluated; the backbone starts from a plain
(non-IMLP) Swin-T checkpoint through the config's init_cfg, so everything but the FFNs is
loaded and the IMLPs are newly initialised.
"""
import math
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
        make_toy_datasets(out, seed=0, which=('coco', ))
        return out


# 'swin-t': the config as shipped; 'narrow': the same config with a narrower, shallower Swin
# (embed_dims 32, one block per stage) so that the default suite stays fast on 2 CPU cores.
ARCHS = {
    'swin-t': dict(embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24]),
    'narrow': dict(embed_dims=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]),
}


def _plain_checkpoint(arch, tmp_path):
    """A plain-FFN Swin detector-backbone checkpoint (mmdet key layout), random weights."""
    from mmdet.models.backbones import SwinTransformer
    torch.manual_seed(0)
    bb = SwinTransformer(window_size=7, mlp_ratio=4, qkv_bias=True, out_indices=(0, 1, 2, 3), **ARCHS[arch])
    bb.init_weights()
    sd = {'backbone.' + k: v for k, v in bb.state_dict().items()}
    path = str(tmp_path / f'{arch}_plain.pth')
    torch.save({'state_dict': sd, 'meta': {}}, path)
    return path


TOY_CLASSES = ('person', 'bicycle', 'car')


def _small(pipeline):
    for t in pipeline:
        if t['type'] == 'Resize':
            t['scale'] = (320, 256)


@pytest.mark.parametrize('arch', ['narrow', pytest.param('swin-t', marks=pytest.mark.slow)])
def test_toy_mask_rcnn_swin_t_imlp(arch, toy_root, tmp_path):
    from mmengine.config import Config
    from mmengine.runner import Runner
    cfg = Config.fromfile(osp.join(ROOT, 'configs/imlp/mask-rcnn_swin-t-imlp_fpn_1x_coco.py'))
    coco = osp.join(toy_root, 'coco') + '/'
    light = arch == 'narrow'
    sizes = (2, 1, 1) if light else (4, 2, 2)
    for split, n in zip(('train_dataloader', 'val_dataloader', 'test_dataloader'), sizes):
        cfg[split].dataset.data_root = coco
        cfg[split].dataset.metainfo = dict(classes=TOY_CLASSES)
        cfg[split].dataset.indices = n
        cfg[split].num_workers = 0
        cfg[split].persistent_workers = False
        cfg[split].batch_size = 2 if split == 'train_dataloader' else 1
        _small(cfg[split].dataset.pipeline)
    cfg.val_evaluator.ann_file = coco + 'annotations/instances_val2017.json'
    cfg.test_evaluator.ann_file = coco + 'annotations/instances_val2017.json'
    cfg.model.backbone.update(ARCHS[arch])
    c = ARCHS[arch]['embed_dims']
    cfg.model.neck.in_channels = [c, 2 * c, 4 * c, 8 * c]
    cfg.model.backbone.init_cfg.checkpoint = _plain_checkpoint(arch, tmp_path)
    cfg.model.backbone.convert_weights = False  # our file is already in mmdet's layout
    # the toy set has 3 of COCO's classes: an 80-class head would predict ids the metric lacks
    cfg.model.roi_head.bbox_head.num_classes = len(TOY_CLASSES)
    cfg.model.roi_head.mask_head.num_classes = len(TOY_CLASSES)
    cfg.model.test_cfg.rcnn.score_thr = 0.0  # an untrained detector still yields boxes to evaluate
    if light:  # fewer proposals / RoIs: the heads dominate CPU time
        cfg.model.train_cfg.rpn_proposal.max_per_img = 100
        cfg.model.train_cfg.rcnn.sampler.num = 64
        cfg.model.test_cfg.rpn.max_per_img = 100
    cfg.train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1, val_interval=1)
    cfg.param_scheduler = []
    cfg.work_dir = str(tmp_path)
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=-1, save_last=False)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=1)
    cfg.env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
                       dist_cfg=dict(backend='gloo'))
    cfg.launcher = 'none'
    cfg.randomness = dict(seed=0)

    runner = Runner.from_cfg(cfg)
    losses, metrics = [], {}
    runner.register_hook(_recorder(losses, metrics), priority='LOWEST')
    runner.train()

    bb = runner.model.backbone
    assert type(bb).__name__ == 'DetSwinTransformerIMLP'
    rep = bb.imlp_load_report
    n_blocks = sum(ARCHS[arch]['depths'])
    assert len(rep['dropped_host_ffn_keys']) == 4 * n_blocks and len(bb.imlp_ffn_names) == n_blocks
    assert rep['new_imlp_keys'] and all('.ffn.' in k for k in rep['new_imlp_keys'])
    assert losses and all(math.isfinite(v) for v in losses)
    assert 'coco/bbox_mAP' in metrics and math.isfinite(metrics['coco/bbox_mAP'])
    assert 'coco/segm_mAP' in metrics
    assert 'SyncBatchNorm' not in {type(m).__name__ for m in runner.model.modules()}


def _recorder(losses, metrics):
    from mmengine.hooks import Hook

    class Recorder(Hook):
        """Collects the total training loss of every iteration and the val metrics."""

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            losses.append(float(outputs['loss']))

        def after_val_epoch(self, runner, metrics=None):
            metrics_out.update(metrics or {})

    metrics_out = metrics
    return Recorder()
