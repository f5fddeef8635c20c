"""A throw-away Slurm cluster for tests (.dev_scripts/slurm_cluster.sh): one node, or one slurmd per network
namespace with ``nodes=2``. Shared by the single-node fixture (conftest.py) and the 2-node one
(test_multinode.py)."""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port():
    with socket.socket() as s:
        s.bind(('', 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_slurm_cluster(nodes: int = 1):
    """Start the cluster, yield ``(base_dir, stdout of 'up')``, stop it by pid in a finally.

    Skips (needs root and Debian's slurm packages, installed with apt if missing; ``ip`` and ``nsenter`` for
    more than one node) with a one-line reason where it cannot run.
    """
    what = 'the Slurm cluster' if nodes == 1 else f'the {nodes}-node Slurm cluster'
    if os.geteuid() != 0:
        pytest.skip(f'{what} needs root (munged, slurmd{", network namespaces" if nodes > 1 else ""})')
    if nodes > 1 and (shutil.which('ip') is None or shutil.which('nsenter') is None):
        pytest.skip(f'{what} needs `ip` (iproute2) and `nsenter` (util-linux)')
    if shutil.which('slurmctld') is None and shutil.which('apt-get') is None:
        pytest.skip('Slurm is not installed and apt-get is not available')
    # munged needs o+x on every parent of its socket; pytest's tmp dirs are 0700
    base = tempfile.mkdtemp(prefix='mmposmlp-slurm-' if nodes == 1 else f'mmposmlp-slurm{nodes}n-', dir='/tmp')
    os.chmod(base, 0o755)
    recipe = os.path.join(ROOT, '.dev_scripts', 'slurm_cluster.sh')
    env = dict(os.environ, CTLD_PORT=str(_free_port()), SLURMD_PORT=str(_free_port()), FAKE_GPUS='0',
               PARTITION='debug')
    if nodes > 1:
        env['NODES'] = str(nodes)
    try:
        res = subprocess.run(['bash', recipe, 'up', base], env=env, capture_output=True, text=True, timeout=300)
        if res.returncode in (3, 4):
            pytest.skip(f'cannot start {what} here (rc={res.returncode}): {res.stderr.strip()[-300:]}')
        assert res.returncode == 0, res.stderr[-3000:]
        yield base, res.stdout
    finally:
        subprocess.run(['bash', recipe, 'down', base], env=env, capture_output=True, timeout=120)
