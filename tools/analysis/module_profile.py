"""Where a step's time and saved memory go, per module and per kind of operator.

* **Time**: every module's forward is a ``torch.profiler.record_function`` range (module hooks);
  each operator is charged to the innermost module around it. Backward work is charged to the
  module whose forward operator created the autograd node (the profiler records the node's
  sequence number with both the forward operator and its ``evaluate_function`` event).
* **Saved memory**: ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd keeps
  for backward; it is charged to the innermost module running when it was saved, each storage
  once (views of one storage count once); parameters saved by reference are not counted.

Module names are folded into units (``blocks.<j>`` -> ``blocks.*``, heads and necks to their top
module), so a table has one row per stem, stage's blocks (and their composite sub-modules: Swin's
attention and FFN; a block's norms, FCs and activation are leaves, counted in the block; so are the
stem's modules, counted in the stem), patch merging, neck and head.
"""
import re
from collections import defaultdict
from typing import Callable, Dict, List, Optional

import torch
import torch.nn as nn

#: operator name (normalised: lower case, no ``aten::``, no underscores, no ``Backward<n>``) -> kind
_KIND_RULES = (
    ('bmm', 'batched matmul (token mixing / attention)'),
    ('conv', 'convolution'),
    ('addmm', 'FC GEMM'), ('linear', 'FC GEMM'), ('matmul', 'other'), ('mm', 'FC GEMM'),  # matmul: by its children
    ('norm', 'norm'),
    ('gelu', 'activation / softmax'), ('softmax', 'activation / softmax'), ('relu', 'activation / softmax'),
    ('sigmoid', 'activation / softmax'),
    ('copy', 'layout: copies, gathers, pads'), ('clone', 'layout: copies, gathers, pads'),
    ('index', 'layout: copies, gathers, pads'), ('cat', 'layout: copies, gathers, pads'),
    ('stack', 'layout: copies, gathers, pads'), ('roll', 'layout: copies, gathers, pads'),
    ('pad', 'layout: copies, gathers, pads'), ('contiguous', 'layout: copies, gathers, pads'),
    ('gather', 'layout: copies, gathers, pads'), ('scatter', 'layout: copies, gathers, pads'),
    ('unbind', 'layout: copies, gathers, pads'), ('permute', 'layout: copies, gathers, pads'),
    ('add', 'element-wise'), ('mul', 'element-wise'), ('sub', 'element-wise'), ('div', 'element-wise'),
    ('fill', 'element-wise'), ('where', 'element-wise'), ('sum', 'element-wise'), ('mean', 'element-wise'),
    ('masked', 'element-wise'), ('exp', 'element-wise'), ('neg', 'element-wise'),
    ('view', 'views and other bookkeeping'), ('reshape', 'views and other bookkeeping'),
    ('expand', 'views and other bookkeeping'), ('transpose', 'views and other bookkeeping'),
    ('empty', 'views and other bookkeeping'), ('detach', 'views and other bookkeeping'),
)
_BACKWARD_PREFIX = 'autograd::engine::evaluate_function: '
_RANGE_PREFIX = 'module::'


def op_kind(name: str) -> str:
    """Kind of a forward operator or backward node name (``aten::addmm``, ``AddmmBackward0``)."""
    n = name.split('::')[-1].strip()
    n = re.sub(r'Backward\d*$', '', n).replace('_', '').lower()
    for key, kind in _KIND_RULES:
        if key in n:
            return kind
    return 'other'


def unit_of(name: str) -> str:
    """A module's qualified name folded into its unit (one row per stage's blocks, head, ...)."""
    name = re.sub(r'\bblocks\.\d+\b', 'blocks.*', name)
    parts = name.split('.') if name else []
    if '*' in parts:  # a block's sub-modules keep two levels: blocks.*.attn.w_msa
        return '.'.join(parts[:parts.index('*') + 3])
    if parts[:1] == ['backbone'] and len(parts) > 1 and parts[1] in ('stages', 'layers'):
        return '.'.join(parts[:4])  # backbone.stages.<i>.downsample
    if parts[:1] == ['backbone']:
        return '.'.join(parts[:2])  # backbone.patch_embed, backbone.norm0
    return '.'.join(parts[:2]) or '(model)'  # neck.lateral_convs, roi_head.bbox_head


class _ModuleTracker:
    """Forward hooks keeping the stack of running modules and a profiler range per module."""

    def __init__(self, model: nn.Module, ranges: bool):
        self.stack: List[str] = []
        self._ranges: List[object] = []
        self._use_ranges = ranges
        self._handles = []
        for name, module in model.named_modules():
            if '.blocks.' in name and not any(True for _ in module.children()):
                # leaves inside a block (its norms, FCs, activation) are not hooked: a block's fused
                # path calls them as modules only when they carry no hooks, so a hook would change it
                continue
            if re.search(r'(^|\.)patch_embed\.', name):
                continue  # the same for the stem's modules (PosMLP's ConvPE runs one recomputing function)
            self._handles.append(module.register_forward_pre_hook(self._enter(name)))
            self._handles.append(module.register_forward_hook(self._exit(), always_call=True))

    def _enter(self, name):
        def hook(module, args):
            self.stack.append(name)
            if self._use_ranges:
                rf = torch.profiler.record_function(_RANGE_PREFIX + name)
                rf.__enter__()
                self._ranges.append(rf)
        return hook

    def _exit(self):
        def hook(module, args, output):
            self.stack.pop()
            if self._use_ranges:
                self._ranges.pop().__exit__(None, None, None)
        return hook

    def remove(self):
        for h in self._handles:
            h.remove()


def _innermost_module(event) -> Optional[str]:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(_RANGE_PREFIX):
            return parent.name[len(_RANGE_PREFIX):]
        parent = parent.cpu_parent
    return None


def time_by_module(step: Callable[[], None], model: nn.Module, warmup: int = 1) -> Dict[str, Dict[str, float]]:
    """Seconds of one ``step`` per ``(unit, 'forward'|'backward', kind)``: returns
    ``{unit: {'forward': s, 'backward': s, '<direction>/<kind>': s, ...}}``."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        step()
    tracker = _ModuleTracker(model, ranges=True)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
    finally:
        tracker.remove()
    events = prof.events()
    node_module = {}
    for ev in events:
        if ev.name.startswith(_RANGE_PREFIX) or ev.name.startswith(_BACKWARD_PREFIX):
            continue
        if getattr(ev, 'sequence_nr', -1) >= 0:
            mod = _innermost_module(ev)
            if mod is not None:
                node_module.setdefault(ev.sequence_nr, mod)
    out: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ev in events:
        if ev.name.startswith(_BACKWARD_PREFIX):
            if ev.cpu_parent is not None and ev.cpu_parent.name.startswith(_BACKWARD_PREFIX):
                continue  # nested (not expected): counted in its parent
            unit = unit_of(node_module.get(ev.sequence_nr, '(unattributed backward)'))
            out[unit]['backward'] += ev.cpu_time_total / 1e6
            _charge(out[unit], 'backward/', ev)
        elif not ev.name.startswith(_RANGE_PREFIX) and ev.cpu_parent is not None \
                and ev.cpu_parent.name.startswith(_RANGE_PREFIX):
            unit = unit_of(ev.cpu_parent.name[len(_RANGE_PREFIX):])  # a top-level op of that module
            out[unit]['forward'] += ev.cpu_time_total / 1e6
            _charge(out[unit], 'forward/', ev)
    return {u: dict(v) for u, v in out.items()}


def _charge(bucket: Dict[str, float], prefix: str, ev) -> None:
    """Add ``ev``'s time to ``bucket[prefix + kind]``; a backward node or an operator of no known kind
    (a custom autograd function, a composite op) is split into its child operators' kinds."""
    name = ev.name[len(_BACKWARD_PREFIX):] if ev.name.startswith(_BACKWARD_PREFIX) else ev.name
    kind = op_kind(name)
    children = [c for c in ev.cpu_children if not c.name.startswith(_RANGE_PREFIX)]
    if children and (kind == 'other' or ev.name.startswith(_BACKWARD_PREFIX)):
        for c in children:
            _charge(bucket, prefix, c)
        bucket[prefix + kind] += ev.self_cpu_time_total / 1e6
    else:
        bucket[prefix + kind] += ev.cpu_time_total / 1e6


def saved_bytes_by_module(step_forward: Callable[[], torch.Tensor], model: nn.Module) -> Dict[str, int]:
    """Bytes autograd saves for backward during ``step_forward()`` (which returns the loss), per
    unit; parameters are excluded. The loss is discarded (no backward runs)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = set()
    out: Dict[str, int] = defaultdict(int)
    tracker = _ModuleTracker(model, ranges=False)

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in seen and ptr != 0:
            seen.add(ptr)
            unit = unit_of(tracker.stack[-1]) if tracker.stack else '(model)'
            out[unit] += t.untyped_storage().nbytes()
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = step_forward()
        del loss
    finally:
        tracker.remove()
    return dict(out)


def markdown(times: Dict[str, Dict[str, float]], saved: Optional[Dict[str, int]] = None, top_kinds: int = 3) -> str:
    """One row per unit (first-seen order): forward, backward, share, main operator kinds, saved MiB."""
    total = sum(v.get('forward', 0) + v.get('backward', 0) for v in times.values()) or 1.0
    lines = ['| unit | forward s | backward s | share | main kinds (forward + backward) | saved for backward MiB |',
             '|---|---|---|---|---|---|']
    units = list(times) + [u for u in (saved or {}) if u not in times]
    for u in units:
        v = times.get(u, {})
        kinds = defaultdict(float)
        for k, sec in v.items():
            if '/' in k:
                kinds[k.split('/', 1)[1]] += sec
        fb = v.get('forward', 0) + v.get('backward', 0)
        ranked = sorted(kinds.items(), key=lambda kv: -kv[1])[:top_kinds]
        main = ', '.join(f'{k} {sec / fb:.0%}' for k, sec in ranked) if fb else ''
        mib = f"{(saved or {}).get(u, 0) / 2**20:.1f}" if saved is not None else '-'
        fwd, bwd = v.get('forward', 0), v.get('backward', 0)
        lines.append(f'| {u} | {fwd:.3f} | {bwd:.3f} | {fb / total:.1%} | {main} | {mib} |')
    fw = sum(v.get('forward', 0) for v in times.values())
    bw = sum(v.get('backward', 0) for v in times.values())
    saved_total = f'{sum((saved or {}).values()) / 2**20:.1f}' if saved is not None else '-'
    lines.append(f'| **total** | {fw:.3f} | {bw:.3f} | 100% | | {saved_total} |')
    return '\n'.join(lines)
