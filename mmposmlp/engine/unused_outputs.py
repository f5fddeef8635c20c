"""Backbone outputs that nothing reads, found after the first training iteration and named in one sentence.

PosMLP, Wave-MLP and SwinPEG add an output norm per requested output. A consumer that skips an output (an FPN
with ``start_level=1`` in RetinaNet, FCOS and ATSS; DeepLabV3+'s decode head, which reads outputs 0 and 3) leaves
that norm without gradient. One process trains regardless; torch's DistributedDataParallel with
``find_unused_parameters=False`` (mmengine's default) stops at the next iteration with "Expected to have finished
reduction in the prior iteration" and parameter indices only. :class:`UnusedOutputsHook` watches the first
iteration's backward pass and says which output is ignored, by which consumer setting, and how to fix it;
:func:`outputs_read` reads the same from a config, before anything is built.
"""
from typing import Dict, List, Optional, Sequence, Set

import torch
import torch.nn as nn
from mmengine.hooks import Hook

from mmposmlp.engine.errors import UserError
from mmposmlp.registry import HOOKS

MAX_NAMED = 4  # parameter names quoted in a message; the rest are counted


class UnusedOutputsError(UserError):
    """Distributed training cannot continue: parameters got no gradient and DDP does not look for them."""


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP (or other mmengine) wrapper."""
    from mmengine.model import is_model_wrapper
    return model.module if is_model_wrapper(model) else model


def innermost_backbone(model: nn.Module):
    """``(prefix, module)`` of the feature extractor: ``model.backbone``, through wrappers that hold their
    own ``backbone`` (:class:`~mmposmlp.models.backbones.SingleTensorBackbone`); ``(None, None)`` if absent."""
    prefix, module = None, None
    node = model
    while isinstance(getattr(node, 'backbone', None), nn.Module):
        node = node.backbone
        prefix = 'backbone' if prefix is None else prefix + '.backbone'
        module = node
    return prefix, module


class GradientProbe:
    """Records which trainable parameters, and which outputs of the backbone, a backward pass reaches.

    Tensor hooks only observe: gradients are left unchanged. :meth:`close` removes every hook.
    """

    def __init__(self, model: nn.Module):
        self.model = model
        self.prefix, self.backbone = innermost_backbone(model)
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self.reached: Set[str] = set()
        self.outputs_reached: Set[int] = set()
        self.num_outputs = 0
        self._handles = [p.register_hook(self._mark(n)) for n, p in self.params.items()]
        if self.backbone is not None:
            self._handles.append(self.backbone.register_forward_hook(self._watch_outputs))

    def _mark(self, name):
        def hook(grad):
            self.reached.add(name)
        return hook

    def _watch_outputs(self, module, args, out):
        outs = out if isinstance(out, (tuple, list)) else (out, )
        self.num_outputs = max(self.num_outputs, len(outs))
        for i, t in enumerate(outs):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(self._mark_output(i))

    def _mark_output(self, i):
        def hook(grad):
            self.outputs_reached.add(i)
        return hook

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def unused_parameters(self) -> List[str]:
        return [n for n in self.params if n not in self.reached]

    def unused_outputs(self) -> List[int]:
        return [i for i in range(self.num_outputs) if i not in self.outputs_reached]


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _heads(model) -> List[tuple]:
    """``(name, head)`` of every mmseg-style head that picks backbone outputs by ``in_index``."""
    found = []
    for name in ('decode_head', 'auxiliary_head'):
        node = getattr(model, name, None)
        for i, head in enumerate(node if isinstance(node, nn.ModuleList) else [node]):
            if head is not None and hasattr(head, 'in_index'):
                found.append((name if not isinstance(node, nn.ModuleList) else f'{name}[{i}]', head))
    return found


def _necks(model) -> list:
    neck = getattr(model, 'neck', None)
    if neck is None:
        return []
    return list(neck) if isinstance(neck, nn.Sequential) else [neck]


def consumer_settings(model, unused: Sequence[int], num_outputs: int) -> str:
    """What makes the consumers skip outputs ``unused``: the neck's level range, the heads' ``in_index``."""
    parts = []
    for neck in _necks(model)[:1]:
        start = getattr(neck, 'start_level', None)
        end = getattr(neck, 'backbone_end_level', None)
        if start is not None and any(i < start for i in unused):
            parts.append(f"the neck {type(neck).__name__}'s start_level={start}")
        if end is not None and end < num_outputs and any(i >= end for i in unused):
            parts.append(f"the neck {type(neck).__name__}'s end_level={getattr(neck, 'end_level', end)}")
    for name, head in _heads(model):
        extra = ' (its c1 branch reads output 0)' if getattr(head, 'c1_bottleneck', None) is not None else ''
        parts.append(f"{name} {type(head).__name__}'s in_index={head.in_index}{extra}")
    wrapper = getattr(model, 'backbone', None)
    if not parts and isinstance(getattr(wrapper, 'backbone', None), nn.Module):
        return f'the backbone wrapper {type(wrapper).__name__} does not pass it on'
    if not parts:
        readers = [f'the neck {type(m).__name__}' for m in _necks(model)[:1]] or \
            [f'the {n} {type(getattr(model, n)).__name__}' for n in ('head', 'cls_head', 'bbox_head')
             if isinstance(getattr(model, n, None), nn.Module)]
        return f"{readers[0] if readers else 'the model'} does not read it"
    return ' and '.join(parts)


def _remap(index, used: Sequence[int]):
    """An output index (or list of them) renumbered after dropping the outputs not in ``used``."""
    if isinstance(index, (list, tuple)):
        return [used.index(i) for i in index if i in used]
    return used.index(index) if index in used else index


def suggested_fix(model, backbone, unused: Sequence[int], num_outputs: int) -> str:
    """The smaller config: request only the read outputs and renumber what indexes them."""
    used = [i for i in range(num_outputs) if i not in unused]
    out_indices = getattr(backbone, 'out_indices', None)
    if isinstance(out_indices, (list, tuple)) and len(out_indices) == num_outputs:
        kept = tuple(out_indices[i] for i in used)
        fix = [f"the backbone's out_indices={kept}"]
    else:
        fix = [f'only backbone outputs {used}']
    for neck in _necks(model)[:1]:
        start = getattr(neck, 'start_level', None)
        if start is not None:
            new = sum(1 for i in used if i < start)
            changes = [f'start_level={new}'] if new != start else []
            channels = getattr(neck, 'in_channels', None)
            if isinstance(channels, (list, tuple)) and len(channels) == num_outputs:
                changes.append(f'in_channels={[channels[i] for i in used]}')
            if changes:
                fix.append(f"the neck's {' and '.join(changes)}")
    for name, head in _heads(model):
        new = _remap(head.in_index, used)
        if new != head.in_index:
            fix.append(f'{name}.in_index={new}')
    return ' with '.join(fix[:2]) + (', ' + ', '.join(fix[2:]) if len(fix) > 2 else '')


def _names(names: Sequence[str]) -> str:
    shown = ', '.join(names[:MAX_NAMED])
    return shown + (f' and {len(names) - MAX_NAMED} more' if len(names) > MAX_NAMED else '')


def unused_message(model: nn.Module, probe: GradientProbe) -> Optional[str]:
    """One sentence about the parameters the first backward pass did not reach, or None if it reached all."""
    unused_params = probe.unused_parameters()
    if not unused_params:
        return None
    find_unused = 'set `find_unused_parameters = True` in the config (DDP then searches the graph every iteration)'
    outputs = probe.unused_outputs()
    prefix = probe.prefix + '.' if probe.prefix else None
    in_backbone = [n for n in unused_params if prefix and n.startswith(prefix)]
    if outputs and in_backbone:
        backbone = probe.backbone
        channels = getattr(backbone, 'out_channels', None)
        described = []
        for i in outputs:
            idx = getattr(backbone, 'out_indices', None)
            what = f'out_indices[{i}]={idx[i]}' if isinstance(idx, (list, tuple)) and i < len(idx) else ''
            if isinstance(channels, (list, tuple)) and i < len(channels):
                what += (', ' if what else '') + f'{channels[i]} channels'
            described.append(f'{i} ({what})' if what else str(i))
        which = ('output ' if len(outputs) == 1 else 'outputs ') + ', '.join(described)
        others = [n for n in unused_params if n not in in_backbone]
        also = f' (also unused elsewhere: {_names(others)})' if others else ''
        return (f'backbone {which} of {type(backbone).__name__} receives no gradient because '
                f'{consumer_settings(model, outputs, probe.num_outputs)}, so its parameters '
                f'{_names(in_backbone)} are unused{also}: request only the outputs that are read '
                f'({suggested_fix(model, backbone, outputs, probe.num_outputs)}) or {find_unused}.')
    return (f'parameters {_names(unused_params)} received no gradient in the first training iteration: make the '
            f'loss depend on them, freeze them (requires_grad=False), or {find_unused}.')


# ---------------------------------------------------------------------------------------------------------------
# the same question asked of a config, before anything is built
# ---------------------------------------------------------------------------------------------------------------

CLASSIFIERS = ('ImageClassifier', 'DistillationClassifier')  # mmpretrain heads classify feats[-1]
RECOGNIZERS = ('Recognizer2D', 'Recognizer3D')  # mmaction heads take the backbone's output as it is


class UnknownConsumerError(ValueError):
    """A model whose consumers :func:`outputs_read` has no rule for."""


def _bare(type_name) -> str:
    return str(type_name).rpartition('.')[2]


def fpn_levels(neck: dict, num_outputs: int, scope: str) -> range:
    """The backbone outputs an FPN reads: ``start_level`` up to ``end_level`` (mmdet's end is inclusive, mmseg's
    exclusive; -1 is the last output in both)."""
    start, end = neck.get('start_level', 0), neck.get('end_level', -1)
    if end == -1 or (scope != 'mmseg' and end == num_outputs - 1):
        return range(start, num_outputs)
    return range(start, end if scope == 'mmseg' else end + 1)


def _decode_heads(model: dict) -> List[dict]:
    heads = []
    for name in ('decode_head', 'auxiliary_head'):
        node = model.get(name)
        heads += [h for h in (node if isinstance(node, (list, tuple)) else [node]) if h]
    return heads


def outputs_read(model: dict, num_outputs: int, scope: str) -> List[int]:
    """The backbone outputs (positions in what ``forward`` returns) that the consumers of config ``model`` read:
    an FPN neck its level range, mmseg heads without a neck their ``in_index`` (DeepLabV3+'s c1 branch output
    0), classifiers the last output, recognizers every output. Raises :class:`UnknownConsumerError` for other
    consumers (a rule is needed, not a guess)."""
    kind, neck = _bare(model.get('type')), model.get('neck')
    neck = neck[0] if isinstance(neck, (list, tuple)) else neck
    neck_type = _bare(neck.get('type')) if neck else None
    if kind in CLASSIFIERS and neck_type in (None, 'GlobalAveragePooling'):
        read = {num_outputs - 1}
    elif kind in RECOGNIZERS and neck is None:
        read = set(range(num_outputs))
    elif neck_type == 'FPN':
        read = set(fpn_levels(neck, num_outputs, scope))
    elif neck is None and _decode_heads(model):
        read = set()
        for head in _decode_heads(model):
            index = head.get('in_index', -1)
            read |= {i % num_outputs for i in _as_list(index)}
            if head.get('c1_in_channels', 0) > 0:
                read.add(0)
    else:
        raise UnknownConsumerError(f'no rule says which backbone outputs a {kind} with neck {neck_type} reads: add '
                                   'one to mmposmlp.engine.unused_outputs.outputs_read')
    return sorted(read)


def ddp_needs_every_gradient(wrapped: nn.Module) -> bool:
    """True for torch DDP that neither searches for unused parameters nor assumes a static graph."""
    ddp = torch.nn.parallel.DistributedDataParallel
    return isinstance(wrapped, ddp) and not getattr(wrapped, 'find_unused_parameters', False) and \
        not getattr(wrapped, 'static_graph', False)


@HOOKS.register_module()
class UnusedOutputsHook(Hook):
    """After the first training iteration, names the parameters (and the backbone outputs) that received no
    gradient, with the consumer setting that skips them and the fix.

    Under DDP without ``find_unused_parameters`` the job ends with that sentence (:class:`UnusedOutputsError`)
    before the second iteration's forward pass, where torch would stop with an index-only reduction error. In
    a single process, or with ``find_unused_parameters=True``, training is correct (the optimizer skips
    parameters without gradient), so the sentence is a warning: the same config would fail under DDP, and
    the unused parameters still cost memory and time.

    ``custom_hooks = [dict(type='mmposmlp.UnusedOutputsHook')]``.
    """
    priority = 'VERY_HIGH'

    def __init__(self):
        self._probe: Optional[GradientProbe] = None
        self._done = False

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if not self._done and self._probe is None:
            self._probe = GradientProbe(unwrap(runner.model))

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs: Optional[Dict] = None) -> None:
        if self._probe is None:
            return
        probe, self._probe, self._done = self._probe, None, True
        probe.close()
        msg = unused_message(unwrap(runner.model), probe)
        if msg is None:
            return
        if ddp_needs_every_gradient(runner.model):
            raise UnusedOutputsError(msg[0].upper() + msg[1:])
        runner.logger.warning(msg[0].upper() + msg[1:])

    def after_train(self, runner) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
