"""A PoSTGU training step at the paper's clip size, on CPU: wall time, peak memory, largest allocation.

PosMLP-Video-S with joint spatio-temporal gating units (``posmlp-video-s-postgu_*``: windows 16x14x14 =
3136 tokens in stages 1-3, 16x7x7 in stage 4) on one 16x224x224 clip, as a whole Recognizer3D with its
loss (forward + loss + backward, no optimiser: ``tools/analysis/speed_memory.make_step``)::

    python .dev_scripts/postgu_paper_size.py                 # 2 steps, 1 thread
    python .dev_scripts/postgu_paper_size.py --steps 1 --threads 2 --json out.json

Per step it reports the wall time, the resident set size before it, the peak resident size during it
(``VmHWM``, reset just before the step, as ``speed_memory.measure_memory_inprocess``) and the largest
tensor allocated by any operator (a ``TorchDispatchMode`` that records sizes, never tensors). It checks
that no operator allocated the positional matrices of all groups of a unit that builds them one group
at a time (``gating.GROUPWISE_BYTES``): no ``(..., N, N)`` tensor of ``G N^2`` values or more; it exits
with status 1 if one was.
"""
import argparse
import gc
import json
import os.path as osp
import sys
import time
from typing import List, Sequence, Tuple

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

CONFIG = 'configs/posmlp_video/posmlp-video-s-postgu_4xb8-u16-60e_sthv1-rgb.py'


class AllocationWatch(TorchDispatchMode):
    """Records every operator output whose storage is new (not a view or in-place result of an input):
    the ``keep`` largest (bytes, shape, operator), and for each gating unit of ``units`` (see
    :func:`groupwise_units`) the floating tensors holding its positional matrices of all groups
    (:func:`all_groups_matrix`). Sizes only: no tensor is held."""

    def __init__(self, units: Sequence[dict] = (), keep: int = 8):
        super().__init__()
        self.units, self.keep = list(units), keep
        self.largest: List[Tuple[int, Tuple[int, ...], str]] = []
        self.dense: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
        for t in _tensors(out):
            if t.untyped_storage().data_ptr() not in inputs:
                self._record(t, str(func))
        return out

    def _record(self, t: torch.Tensor, op: str) -> None:
        nbytes = t.numel() * t.element_size()
        if len(self.largest) < self.keep or nbytes > self.largest[-1][0]:
            self.largest.append((nbytes, tuple(t.shape), op))
            self.largest.sort(key=lambda r: -r[0])
            del self.largest[self.keep:]
        if t.is_floating_point():
            for u in self.units:
                if all_groups_matrix(tuple(t.shape), u):
                    self.dense.append(f"{u['name']}: {tuple(t.shape)} by {op}")


def all_groups_matrix(shape: Tuple[int, ...], unit: dict) -> bool:
    """Whether a tensor of ``shape`` holds the positional matrices of all ``G`` groups of ``unit`` (a window
    of ``N`` tokens), in a layout the mixings build them: ``(..., G, N, N)`` (matrices, masked matrices,
    their gradients; one group's are ``(..., 1, N, N)``), ``(G, N^2)`` / ``(N^2, G)`` (Gaussian scores,
    tables gathered by a flat index) or ``(*window, *window, G)`` (tables gathered per axis)."""
    g, n, window = unit['groups'], unit['tokens'], tuple(unit['window'])
    if g < 2:
        return False
    return (shape[-3:] == (g, n, n) or shape[-2:] in ((g, n * n), (n * n, g))
            or shape[-2 * len(window) - 1:] == (*window, *window, g))


def _tensors(tree) -> List[torch.Tensor]:
    from torch.utils._pytree import tree_leaves
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def groupwise_units(model: torch.nn.Module, element_size: int = 4) -> List[dict]:
    """The gating units whose positional matrices are built one group at a time at ``element_size``."""
    from mmposmlp.models.layers import gating
    units = []
    for name, m in model.named_modules():
        if isinstance(m, gating.PositionalGatingUnit):
            dense = m.mixing.groups * m.num_tokens**2 * element_size
            if dense > gating.GROUPWISE_BYTES:
                units.append(dict(name=name, groups=m.mixing.groups, tokens=m.num_tokens, window=list(m.window),
                              dense_bytes=dense))
    return units


def _load_average() -> str:
    with open('/proc/loadavg') as f:
        return ' '.join(f.read().split()[:3])


def measure(config: str, clip: Sequence[int], batch: int, steps: int) -> dict:
    from tools.analysis import speed_memory as B
    built = B.build_candidate(B.Spec(config))
    units = groupwise_units(built.module)
    step = B.make_step(built, (batch, 3, *clip), mode='train')
    rows = []
    for i in range(steps):
        gc.collect()
        rss, hwm_before = B._rss_bytes(), B._hwm_bytes()
        reset = B._reset_peak_rss()
        watch = AllocationWatch(units)
        t0 = time.perf_counter()
        with watch:
            step()
        seconds = time.perf_counter() - t0
        hwm = B._hwm_bytes() if reset else B._maxrss_bytes()
        rows.append(dict(step=i + 1, seconds=seconds, rss_before_mib=rss / 2**20,
                         vmhwm_before_mib=hwm_before / 2**20, vmhwm_after_mib=hwm / 2**20,
                         peak_extra_mib=(hwm - rss) / 2**20, peak_reset=reset,
                         largest=[dict(mib=b / 2**20, shape=list(s), op=op) for b, s, op in watch.largest],
                         dense_matrices=sorted(set(watch.dense)), load_average=_load_average()))
    return dict(config=config, measured=built.measured, clip=[batch, 3, *clip], threads=torch.get_num_threads(),
                torch=torch.__version__, groupwise_units=len(units),
                dense_bytes_max_mib=max((u['dense_bytes'] for u in units), default=0) / 2**20, steps=rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--config', default=CONFIG)
    parser.add_argument('--clip', type=int, nargs=3, default=[16, 224, 224], metavar=('T', 'H', 'W'))
    parser.add_argument('--batch', type=int, default=1)
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--json', help='also write the results to this file')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f'load average before: {_load_average()}', flush=True)
    res = measure(osp.join(ROOT, args.config) if not osp.isabs(args.config) else args.config, args.clip,
                  args.batch, args.steps)
    print(f"{res['measured']}, clip {res['clip']}, {res['threads']} thread(s), torch {res['torch']}; "
          f"{res['groupwise_units']} gating units mix one group at a time (all groups would be up to "
          f"{res['dense_bytes_max_mib']:.0f} MiB per unit)")
    for r in res['steps']:
        top = r['largest'][0] if r['largest'] else dict(mib=0, shape=[], op='')
        print(f"step {r['step']}: {r['seconds']:.1f} s; rss before {r['rss_before_mib']:.0f} MiB, VmHWM before "
              f"{r['vmhwm_before_mib']:.0f} / after {r['vmhwm_after_mib']:.0f} MiB (peak {r['peak_extra_mib']:.0f} "
              f"MiB over rss); largest allocation {top['mib']:.1f} MiB {tuple(top['shape'])} by {top['op']}; "
              f"load average {r['load_average']}")
        for problem in r['dense_matrices']:
            print(f'  dense positional matrices built: {problem}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(res, f, indent=1)
    return 1 if any(r['dense_matrices'] for r in res['steps']) else 0


if __name__ == '__main__':
    sys.exit(main())
