"""The curated mutants of ``make test-mutation`` follow the code (.dev_scripts/mutants.py)."""
import os.path as osp

import pytest

from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _runner():
    return load_tool('.dev_scripts', 'mutation_test.py')


RUNNER = _runner()
MUTANTS = RUNNER.load_mutants()


def test_enough_distinct_mutants_covering_the_core():
    ids = [m['id'] for m in MUTANTS]
    assert len(ids) == len(set(ids)), 'duplicate mutant ids'
    assert len(ids) >= 40
    files = {m['file'] for m in MUTANTS}
    for area in ('mmposmlp/models/layers/windows.py', 'mmposmlp/models/layers/gating.py',
                 'mmposmlp/models/layers/relative_position.py', 'mmposmlp/models/backbones/posmlp.py',
                 'mmposmlp/models/checkpoints.py', 'mmposmlp/engine/checkpoint.py'):
        assert area in files, f'no mutant in {area}'


@pytest.mark.parametrize('mutant', MUTANTS, ids=[m['id'] for m in MUTANTS])
def test_mutant_applies_and_names_existing_tests(mutant):
    assert RUNNER.check_applicable(mutant) == '', f"stale mutant {mutant['id']}: {RUNNER.check_applicable(mutant)}"
    assert mutant['find'] != mutant['replace']
    args = mutant['tests']
    for i, arg in enumerate(args):
        if arg.startswith('-') or (i and args[i - 1] == '-k'):  # options and -k expressions
            continue
        path = arg.split('::')[0]
        assert osp.isfile(osp.join(ROOT, path)), f"{mutant['id']}: no test file {path}"
