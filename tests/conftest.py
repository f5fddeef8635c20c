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


@pytest.fixture(scope='session')
def toy_data(tmp_path_factory):
    """Root of the toy datasets (coco/, ade/, kinetics400/, imagenet/), generated once per session."""
    from mmposmlp.datasets.toy import make_toy_datasets
    root = tmp_path_factory.mktemp('toy_data')
    make_toy_datasets(str(root), seed=0)
    return str(root)


@pytest.fixture(scope='session')
def slurm_cluster(tmp_path_factory):
    """A throw-away single-node Slurm cluster (.dev_scripts/slurm_cluster.sh): yields its env (SLURM_CONF, PATH).

    Needs root and Debian's slurm packages (installed with apt if missing, ~5 s); skipped otherwise. The
    daemons (own munge key, config in a temp dir) are stopped by pid in a finally.
    """
    from slurm_harness import throwaway_slurm_cluster
    with throwaway_slurm_cluster() as (base, _):
        venv_bin = os.path.dirname(sys.executable)
        yield dict(SLURM_CONF=os.path.join(base, 'etc', 'slurm.conf'), PARTITION='debug',
                   PATH=venv_bin + os.pathsep + os.environ.get('PATH', ''))


def _mmengine_singletons():
    from mmengine.logging import MessageHub, MMLogger
    from mmengine.registry import DefaultScope
    from mmengine.visualization import Visualizer
    return MMLogger, MessageHub, Visualizer, DefaultScope


def drop_new_mmengine_instances(before):
    """Forget the mmengine singletons not in ``before`` (closing the logger handlers).

    mmengine keys its logger, message hub and visualizer by experiment name, i.e. config name plus a timestamp in
    seconds: two runs in one process within the same second share them, and the second logs to the first one's
    stream (closed once a ``capsys`` test ends) and continues its message hub. A default scope a test opened
    (e.g. ``mmaction``) would otherwise decide how the next test's registries resolve names.

    ``ManagerMixin`` has no public way to list or forget instances; mmengine's own test base class
    (``mmengine.testing.RunnerTestCase.tearDown``) clears the same ``_instance_dict`` tables, and so does this
    (only the instances the test created).
    """
    for cls in _mmengine_singletons():
        for name in [n for n in cls._instance_dict if n not in before.get(cls, ())]:
            inst = cls._instance_dict.pop(name)
            for handler in list(getattr(inst, 'handlers', ())):
                inst.removeHandler(handler)
                handler.close()


def mmengine_instance_names():
    return {cls: set(cls._instance_dict) for cls in _mmengine_singletons()}


@pytest.fixture(autouse=True)
def _fresh_mmengine_instances():
    """Every test starts without the per-run singletons an earlier in-process run left behind."""
    before = mmengine_instance_names()
    yield
    drop_new_mmengine_instances(before)
