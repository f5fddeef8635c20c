#!/usr/bin/env python
"""Mutation check: apply each curated mutant to a scratch copy of the repository, run the tests
that should catch it, and report the score.

    python .dev_scripts/mutation_test.py [--only ID ...] [--list] [--timeout S] [--json OUT]

The mutants (``.dev_scripts/mutants.py``) are small, realistic bugs - a sign, an off-by-one, a
dropped line, a widened allow-list - each with the test selection a developer would expect to
catch it. A mutant is *killed* when that selection fails (or times out), *survives* when it
passes (*equivalent* when the list explains why no test can tell it apart), and is *stale* when its source text no longer occurs exactly once (the list must follow
the code: ``tests/test_mutation_list.py`` checks this in the default suite). The repository
itself is never modified: the copy lives in a temporary directory.

Why not mutmut / cosmic-ray: both enumerate every operator in every line and run a whole test
command per mutant; on 2 cores with a suite of minutes that is days. A curated list with
targeted selections runs in about half an hour (docs/testing.md).
"""
import argparse
import importlib.util
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
_IGNORE_EVERYWHERE = shutil.ignore_patterns('.git', '__pycache__', '*.egg-info', '.pytest_cache')
_IGNORE_AT_ROOT = {'.venv', 'work_dirs', 'data', 'build', 'dist', '.gpu', '.whl'}  # generated, not source


def COPY_IGNORE(directory, names):
    ignored = set(_IGNORE_EVERYWHERE(directory, names))
    if osp.abspath(directory) == ROOT:
        ignored |= _IGNORE_AT_ROOT & set(names)
    return ignored


def load_mutants():
    spec = importlib.util.spec_from_file_location('mutants', osp.join(ROOT, '.dev_scripts', 'mutants.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MUTANTS


def check_applicable(mutant, root=ROOT) -> str:
    """'' if the mutant's ``find`` text occurs exactly once in its file, else why not."""
    path = osp.join(root, mutant['file'])
    if not osp.isfile(path):
        return f"{mutant['file']} does not exist"
    count = open(path, encoding='utf-8').read().count(mutant['find'])
    return '' if count == 1 else f"its text occurs {count} times in {mutant['file']}"


def run_mutant(mutant, copy_root, timeout):
    path = osp.join(copy_root, mutant['file'])
    original = open(path, encoding='utf-8').read()
    why = check_applicable(mutant, copy_root)
    if why:
        return dict(status='stale', detail=why, seconds=0.)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(original.replace(mutant['find'], mutant['replace'], 1))
    env = dict(os.environ, PYTHONPATH=copy_root, OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '1'),
               PYTHONDONTWRITEBYTECODE='1')
    cmd = [sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider', '-m', 'not slurm',
           *mutant['tests']]
    start = time.time()
    try:
        res = subprocess.run(cmd, cwd=copy_root, env=env, capture_output=True, text=True, timeout=timeout)
        if res.returncode == 0:
            status, detail = 'survived', res.stdout.strip().splitlines()[-1:]
        elif res.returncode == 1:
            status, detail = 'killed', [line for line in res.stdout.splitlines() if line.startswith('FAILED')][:1]
        else:  # 2-5: collection/usage errors, no tests ran: the selection itself is broken
            status, detail = 'error', (res.stdout + res.stderr).strip().splitlines()[-3:]
    except subprocess.TimeoutExpired:
        status, detail = 'killed', [f'timed out after {timeout} s']
    finally:
        with open(path, 'w', encoding='utf-8') as f:
            f.write(original)
    return dict(status=status, detail=' '.join(detail), seconds=round(time.time() - start, 1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--only', nargs='+', help='run only these mutant ids')
    parser.add_argument('--list', action='store_true', help='list the mutants and exit')
    parser.add_argument('--timeout', type=int, default=600, help='seconds per mutant (a timeout counts as killed)')
    parser.add_argument('--json', help='write the per-mutant results here')
    args = parser.parse_args(argv)
    mutants = load_mutants()
    if args.only:
        known = {m['id'] for m in mutants}
        unknown = sorted(set(args.only) - known)
        if unknown:
            parser.error(f'unknown mutant ids {unknown}; see --list')
        mutants = [m for m in mutants if m['id'] in set(args.only)]
    if args.list:
        for m in mutants:
            print(f"{m['id']:<28} {m['file']}: {m['why']}")
        return 0
    results = {}
    with tempfile.TemporaryDirectory(prefix='mmposmlp-mutation-') as tmp:
        copy_root = osp.join(tmp, 'repo')
        shutil.copytree(ROOT, copy_root, ignore=COPY_IGNORE, symlinks=True)
        for i, m in enumerate(mutants, 1):
            r = run_mutant(m, copy_root, args.timeout)
            results[m['id']] = dict(r, file=m['file'], why=m['why'])
            print(f"[{i}/{len(mutants)}] {r['status']:<8} {m['id']:<28} {r['seconds']:>6.1f}s  {r['detail'][:110]}",
                  flush=True)
    by_id = {m['id']: m for m in mutants}
    for mid, r in results.items():
        if r['status'] == 'survived' and by_id[mid].get('equivalent'):
            r['status'], r['equivalent'] = 'equivalent', by_id[mid]['equivalent']
    counts = {s: sum(r['status'] == s for r in results.values())
              for s in ('killed', 'survived', 'equivalent', 'stale', 'error')}
    scored = counts['killed'] + counts['survived']
    print(f"\nmutation score: {counts['killed']}/{scored} non-equivalent mutants killed"
          + ''.join(f", {counts[s]} {s}" for s in ('survived', 'equivalent', 'stale', 'error') if counts[s]))
    for mid, r in results.items():
        if r['status'] != 'killed':
            print(f"  {r['status']}: {mid} ({r['file']}): {r['why']}"
                  + (f" - equivalent: {r['equivalent']}" if r['status'] == 'equivalent' else ''))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return 0 if counts['killed'] + counts['equivalent'] == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
