"""Helpers shared by the tests and tools: build any shipped config's model, run a dummy forward."""
import importlib

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

_REGISTRIES = {
    'mmdet': 'mmdet.registry', 'mmseg': 'mmseg.registry', 'mmaction': 'mmaction.registry',
    'mmpretrain': 'mmpretrain.registry',
}


def model_registry(scope: str):
    importlib.import_module(f'{scope}.models')
    return importlib.import_module(_REGISTRIES[scope]).MODELS


def build_model_from_cfg(cfg, drop_pretrained: bool = True):
    """Build ``cfg.model`` (path or Config) in the config's default scope.

    ``drop_pretrained`` removes the backbone's ``Pretrained`` init (no weights on disk).
    Returns ``(model, scope)``.
    """
    if not isinstance(cfg, Config):
        cfg = Config.fromfile(cfg)
    scope = cfg.get('default_scope', 'mmpretrain')
    registry = model_registry(scope)
    model_cfg = cfg.model.copy()
    if drop_pretrained and 'backbone' in model_cfg:
        model_cfg.backbone.pop('init_cfg', None)
        model_cfg.backbone.pop('pretrained', None)
    with DefaultScope.overwrite_default_scope(scope):
        model = registry.build(model_cfg)
    return model, scope


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def dummy_forward(model, scope: str, shape=(1, 3, 64, 96)):
    """Run a full forward of a detector/segmentor/classifier/recognizer on random input."""
    model.eval()
    x = torch.randn(shape)
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample
        h, w = shape[-2:]
        samples = [DetDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), scale_factor=(1.0, 1.0),
                                               batch_input_shape=(h, w), pad_shape=(h, w)))
                   for _ in range(shape[0])]
        return model(x, samples, mode='predict')
    if scope == 'mmseg':
        return model(x, mode='tensor')
    if scope == 'mmaction':
        return model(x[:, None] if x.dim() == 5 else x, mode='tensor')
    return model(x, mode='tensor')


def fake_batch(scope: str, batch: int = 2, shape=(64, 96), num_classes: int = 3, clip_len: int = 4,
               video_format: str = 'NCTHW'):
    """A tiny labelled batch in the format each library's data preprocessor expects
    (mmaction: ``video_format`` 'NCTHW' for 3D recognizers, 'NCHW' (segments) for 2D ones)."""
    h, w = shape
    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for i in range(batch):
        if scope == 'mmaction' and video_format == 'NCTHW':
            inputs.append(torch.randint(0, 255, (1, 3, clip_len, h, w), generator=g).float())
        elif scope == 'mmaction':
            inputs.append(torch.randint(0, 255, (clip_len, 3, h, w), generator=g).float())
        else:
            inputs.append(torch.randint(0, 255, (3, h, w), generator=g, dtype=torch.uint8))
        if scope == 'mmdet':
            import numpy as np
            from mmdet.structures import DetDataSample
            from mmdet.structures.mask import BitmapMasks
            from mmengine.structures import InstanceData
            s = DetDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w),
                                            scale_factor=(1.0, 1.0), batch_input_shape=(h, w)))
            inst = InstanceData()
            inst.bboxes = torch.tensor([[4.0, 6.0, w / 2, h / 2], [w / 3, h / 3, w - 3.0, h - 2.0]])
            inst.labels = torch.tensor([0, 1 % num_classes])
            masks = np.zeros((2, h, w), dtype=np.uint8)
            masks[0, 6:h // 2, 4:w // 2] = 1
            masks[1, h // 3:h - 2, w // 3:w - 3] = 1
            inst.masks = BitmapMasks(masks, h, w)
            s.gt_instances = inst
        elif scope == 'mmseg':
            from mmengine.structures import PixelData
            from mmseg.structures import SegDataSample
            s = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w)))
            s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, h, w), generator=g))
        elif scope == 'mmaction':
            from mmaction.structures import ActionDataSample
            s = ActionDataSample().set_gt_label(torch.tensor([i % num_classes]))
        else:
            from mmpretrain.structures import DataSample
            s = DataSample().set_gt_label(i % num_classes)
        samples.append(s)
    return dict(inputs=inputs, data_samples=samples)


def train_iterations(model, scope: str, iters: int = 2, lr: float = 1e-4, **batch_kwargs):
    """Run ``iters`` real ``train_step`` calls (data preprocessor, losses, AdamW); returns losses."""
    from mmengine.optim import OptimWrapper
    model.train()
    optim = OptimWrapper(torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr))
    data = fake_batch(scope, **batch_kwargs)
    losses = []
    with DefaultScope.overwrite_default_scope(scope):
        for _ in range(iters):
            log_vars = model.train_step(data, optim)
            losses.append(float(log_vars['loss']))
    return losses
