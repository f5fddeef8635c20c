"""Heads that need what our backbones do not give, refused before the first step in one sentence.

Some upstream heads classify a token, not a feature map: TimeSformer's head takes TimeSformer's class token
(``(N, C)``), mmpretrain's ViT and DeiT heads take ViT's class (and distillation) token unless a neck pools the
maps. Our hierarchical backbones return feature maps (``out_type='cls_token'`` is CPVT's option), so such a head
fails deep inside a matmul with a bare shape error. :func:`check_consumers` names the mismatch and the fix;
:class:`ConsumerCheckHook` runs it before training, validation and testing.
"""
import torch.nn as nn
from mmengine.hooks import Hook

from mmposmlp.engine.errors import UserError
from mmposmlp.engine.unused_outputs import innermost_backbone, unwrap
from mmposmlp.registry import HOOKS

# head type -> (what it classifies, the fix for a backbone that returns feature maps)
TOKEN_HEADS = {
    'TimeSformerHead': ("TimeSformer's class token, an (N, C) vector",
                        "use cls_head=dict(type='I3DHead', in_channels={channels}, num_classes={classes}), which "
                        'average-pools the maps'),
    'VisionTransformerClsHead': ("a ViT's class token, an (N, C) vector",
                                 "add neck=dict(type='GlobalAveragePooling') to pool the maps into one"),
    'DeiTClsHead': ("DeiT's class and distillation tokens",
                    "use neck=dict(type='GlobalAveragePooling') with head=dict(type='LinearClsHead', "
                    'in_channels={channels}, num_classes={classes})'),
}


class ConsumerMismatchError(UserError):
    """A head needs an input that the backbone does not produce."""


def _head(model):
    for name in ('cls_head', 'head'):
        head = getattr(model, name, None)
        if isinstance(head, nn.Module):
            return name, head
    return None, None


def _pools(model) -> bool:
    """A neck sits between backbone and head (mmpretrain's GlobalAveragePooling and the like)."""
    return isinstance(getattr(model, 'neck', None), nn.Module)


def check_consumers(model: nn.Module) -> None:
    """Raise :class:`ConsumerMismatchError` when the model's head needs a token our backbone does not return."""
    model = unwrap(model)
    _, backbone = innermost_backbone(model)
    name, head = _head(model)
    if backbone is None or head is None or not type(backbone).__module__.startswith('mmposmlp.'):
        return
    needs = TOKEN_HEADS.get(type(head).__name__)
    if needs is None or getattr(backbone, 'out_type', 'featmap') == 'cls_token' or _pools(model):
        return
    what, fix = needs
    channels = getattr(backbone, 'out_channels', None)
    channels = channels[-1] if isinstance(channels, (list, tuple)) else channels
    fix = fix.format(channels=channels, classes=getattr(head, 'num_classes', 'K'))
    raise ConsumerMismatchError(f'{name} {type(head).__name__} classifies {what}, but mmposmlp.'
                                f'{type(backbone).__name__} returns feature maps without one: {fix}.')


@HOOKS.register_module()
class ConsumerCheckHook(Hook):
    """Runs :func:`check_consumers` on the model before training, validation or testing starts
    (``custom_hooks = [dict(type='mmposmlp.ConsumerCheckHook')]``)."""
    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        check_consumers(runner.model)
