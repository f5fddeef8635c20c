"""What a preemption costs on this machine: the table "Measured here" of docs/cluster.md.

::

    python .dev_scripts/measure_preemption.py                       # both toy configs, 3 runs each
    python .dev_scripts/measure_preemption.py --only classifier --runs 1   # one quick run

Each run trains a toy config with ``tools/train.py`` (one process, the config's own settings plus a logger
interval and smoothing window of 1), sends it SIGUSR1 from this script when iteration N begins (classifier 3,
Mask R-CNN 2: a hook of the generated config writes ``began_N`` into the work dir once the iteration's batch is
loaded, which this script polls for), and measures:

* checkpoint: the size of the stop's checkpoint ``iter_N.pth`` (MB = 10^6 bytes, MiB = 2^20);
* the iteration in flight: the ``time`` the run logged for iteration N (``vis_data/scalars.json``);
* signal -> checkpoint renamed into place: until ``iter_N.pth`` exists (the hook writes ``iter_N.pth.tmp``,
  fsyncs it and renames it), polled every 5 ms;
* signal -> process exited, and its exit code (``PreemptionHook`` exits 99);
* iterations lost: iterations the run logged as trained minus ``meta.iter`` of the checkpoint.

It prints ``uptime`` before and after, each run as it ends, and one markdown row per config in the table's form.
The times are wall-clock and include whatever else the machine runs: measure on a quiet machine. The work dirs
live in a temporary folder that is removed afterwards (``--keep`` keeps it); the toy data (``data/toy``) is
generated first if it is missing.
"""
import argparse
import glob
import json
import os
import os.path as osp
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TRAIN = osp.join(ROOT, 'tools', 'train.py')
PREEMPTED_EXIT_CODE = 99

#: name -> (label in the table, toy config, iteration whose beginning the signal is sent at)
CONFIGS = {
    'classifier': ('PosMLP-T classifier', 'configs/posmlp/toy/posmlp-t_toy-in1k.py', 3),
    'mask-rcnn': ('PosMLP-T Mask R-CNN', 'configs/posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py', 2),
}

MARKER_MODULE = 'preemption_marker'
MARKER_HOOK = '''
import os
import time

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class IterationBeganMarker(Hook):
    """Writes <work_dir>/began_<n> (the time) when iteration n begins, after its batch is loaded."""
    priority = 'HIGHEST'

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        path = os.path.join(runner.work_dir, f'began_{runner.iter + 1}')
        with open(path + '.tmp', 'w') as f:
            f.write(repr(time.time()))
        os.replace(path + '.tmp', path)
'''


def write_config(folder: str, toy_config: str) -> str:
    """A config in ``folder`` that is ``toy_config`` with the marker hook and per-iteration logging."""
    from mmengine.config import Config
    base = Config.fromfile(osp.join(ROOT, toy_config), import_custom_modules=False)
    imports = list(base.get('custom_imports', {}).get('imports', [])) + [MARKER_MODULE]
    hooks = [dict(h) for h in base.get('custom_hooks', [])] + [dict(type='IterationBeganMarker')]
    with open(osp.join(folder, f'{MARKER_MODULE}.py'), 'w') as f:
        f.write(MARKER_HOOK)
    path = osp.join(folder, 'measured.py')
    with open(path, 'w') as f:
        f.write(f"_base_ = {osp.join(ROOT, toy_config)!r}\n"
                f"custom_imports = dict(imports={imports!r}, allow_failed_imports=False)\n"
                f"custom_hooks = {hooks!r}\n"
                "default_hooks = dict(logger=dict(type='LoggerHook', interval=1))\n"
                "log_processor = dict(window_size=1)\n")
    return path


def measure_run(config: str, work_dir: str, at: int, timeout: float) -> dict:
    """Train ``config`` until iteration ``at`` begins, send SIGUSR1, and measure (see the module docstring)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, osp.dirname(config), os.environ.get('PYTHONPATH', '')]))
    os.makedirs(work_dir)
    log_path = osp.join(work_dir, 'train.log')
    ckpt = osp.join(work_dir, f'iter_{at}.pth')
    with open(log_path, 'w') as log:
        proc = subprocess.Popen([sys.executable, TRAIN, config, '--work-dir', work_dir], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(osp.join(work_dir, f'began_{at}'), proc, log_path, timeout)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGUSR1)
            to_ckpt = None
            while proc.poll() is None:
                if to_ckpt is None and osp.exists(ckpt):
                    to_ckpt = time.monotonic() - t0
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f'the run did not end {timeout:.0f} s after the signal; see {log_path}')
                time.sleep(0.005)
            to_exit = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if to_ckpt is None and osp.exists(ckpt):
        to_ckpt = to_exit  # renamed in the last poll interval before the exit
    return dict(exit_code=proc.returncode, to_checkpoint=to_ckpt, to_exit=to_exit, log=log_path,
                **_outcome(work_dir, ckpt, at, log_path))


def _wait_for(marker: str, proc, log_path: str, timeout: float) -> None:
    t0 = time.monotonic()
    while not osp.exists(marker):
        if proc.poll() is not None:
            raise RuntimeError(f'the run ended (exit code {proc.returncode}) before {osp.basename(marker)}: '
                               f'{_tail(log_path)}')
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f'no {osp.basename(marker)} within {timeout:.0f} s; see {log_path}')
        time.sleep(0.005)


def _tail(path: str, lines: int = 15) -> str:
    with open(path, errors='replace') as f:
        return ''.join(f.readlines()[-lines:])


def _outcome(work_dir: str, ckpt: str, at: int, log_path: str) -> dict:
    """Checkpoint size and iteration, the logged time of iteration ``at``, iterations logged, the run's own
    signal -> saved time."""
    train = {}
    for path in glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')):
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if any(k.startswith('loss') for k in rec):
                    train[rec['step']] = rec
    out = dict(size=None, ckpt_iter=None, logged_time=train.get(at, {}).get('time'), logged_iters=max(train, default=0))
    if osp.exists(ckpt):
        from mmposmlp.utils.compat import safe_torch_load
        out.update(size=osp.getsize(ckpt), ckpt_iter=safe_torch_load(ckpt)['meta']['iter'])
    with open(log_path, errors='replace') as f:
        saved = re.search(r'saved \S+ ([\d.]+) s after the signal', f.read())
    out['saved_in_process'] = float(saved.group(1)) if saved else None
    return out


def _seconds(values, sep=' / ') -> str:
    return sep.join('-' if v is None else f'{v:.1f}' for v in values) + ' s'


def table_row(name: str, runs: list) -> str:
    label, config, _ = CONFIGS[name]
    sizes = {(round(r['size'] / 1e6), round(r['size'] / 2 ** 20)) for r in runs if r['size'] is not None}
    times = [r['logged_time'] for r in runs if r['logged_time'] is not None]
    in_flight = '-' if not times else (f'{min(times):.1f} s' if len(times) == 1 or min(times) == max(times)
                                       else f'{min(times):.1f}-{max(times):.1f} s')
    codes = ', '.join(sorted({str(r['exit_code']) for r in runs}))
    lost = sorted({r['logged_iters'] - r['ckpt_iter'] for r in runs if r['ckpt_iter'] is not None})
    saved = ', '.join(sorted({f"`iter_{r['ckpt_iter']}.pth`" for r in runs if r['ckpt_iter'] is not None})) or 'nothing'
    logged = ', '.join(str(n) for n in sorted({r['logged_iters'] for r in runs}))
    return (f"| {label} (`{config}`), {len(runs)} run{'s' * (len(runs) > 1)} | "
            f"{' / '.join(f'{mb} MB ({mib} MiB)' for mb, mib in sorted(sizes)) or '-'} | {in_flight} | "
            f"{_seconds(r['to_checkpoint'] for r in runs)} | {_seconds(r['to_exit'] for r in runs)} ({codes}) | "
            f"{', '.join(map(str, lost)) or '-'} (saved {saved}, {logged} iterations logged) |")


HEADER = ('| toy config | checkpoint | the iteration in flight (logged time) | signal -> checkpoint renamed into place '
          f'(after fsync) | signal -> process exited (exit code; {PREEMPTED_EXIT_CODE} expected) | iterations lost |\n'
          '|---|---|---|---|---|---|')


def _uptime() -> str:
    try:
        return subprocess.run(['uptime'], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return 'load average: ' + ', '.join(f'{x:.2f}' for x in os.getloadavg())


def ensure_toy_data() -> None:
    if all(osp.isdir(osp.join(ROOT, 'data', 'toy', d)) for d in ('imagenet', 'coco')):
        return
    print('data/toy is missing: generating it (tools/misc/make_toy_datasets.py --out data/toy)', flush=True)
    subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'misc', 'make_toy_datasets.py'), '--out',
                    osp.join(ROOT, 'data', 'toy')], cwd=ROOT, check=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--only', nargs='+', choices=sorted(CONFIGS), default=sorted(CONFIGS),
                        help='which toy configs (default: both)')
    parser.add_argument('--runs', type=int, default=3, help='runs per config (default 3)')
    parser.add_argument('--at', type=int, default=None,
                        help='signal when this iteration begins (default: classifier 3, Mask R-CNN 2)')
    parser.add_argument('--timeout', type=float, default=1800.0,
                        help='seconds to wait for the iteration, and then for the exit (default 1800)')
    parser.add_argument('--keep', action='store_true', help='keep the work dirs (checkpoints of 200-500 MB)')
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.at is not None and args.at < 1):
        parser.error('--runs and --at must be at least 1')
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, ROOT)
    ensure_toy_data()
    root = tempfile.mkdtemp(prefix='measure_preemption_')
    rows = []
    print(f'before: {_uptime()}', flush=True)
    try:
        for name in args.only:
            _, toy_config, at = CONFIGS[name]
            at = args.at or at
            folder = osp.join(root, name)
            os.makedirs(folder)
            config = write_config(folder, toy_config)
            runs = []
            for i in range(args.runs):
                r = measure_run(config, osp.join(folder, f'run{i}'), at, args.timeout)
                print(f'{name} run {i + 1}/{args.runs}: exit {r["exit_code"]}, signal -> checkpoint '
                      f'{_seconds([r["to_checkpoint"]])} (the run logs {_seconds([r["saved_in_process"]])}), -> exit '
                      f'{_seconds([r["to_exit"]])}, iteration {at} logged {_seconds([r["logged_time"]])}, checkpoint '
                      f'iter {r["ckpt_iter"]}, {r["logged_iters"]} iterations logged', flush=True)
                runs.append(r)
            rows.append(table_row(name, runs))
    finally:
        print(f'after: {_uptime()}', flush=True)
        if args.keep:
            print(f'work dirs kept in {root}')
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(HEADER)
    print('\n'.join(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
