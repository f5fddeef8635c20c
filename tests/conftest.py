import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# 2 cores: keep intra-op threads bounded so parallel subprocesses do not thrash.
os.environ.setdefault('OMP_NUM_THREADS', '2')


@pytest.fixture(scope='session')
def repo_root():
    return ROOT
