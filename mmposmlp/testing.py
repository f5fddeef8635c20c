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
