"""tools/slurm_train.sh / slurm_test.sh on a real (throw-away, single-node) Slurm cluster.

Marked ``slurm``: part of ``make test`` (one training job, its evaluation and the refusals before a job
starts; the cross-launcher comparison, the dead rank and the busy port are also ``slow``); alone with
``make test-slurm`` / ``pytest -m slurm tests/test_slurm.py`` (root; apt installs slurmctld slurmd slurm-client
munge if missing; skipped with the reason otherwise). The cluster is CPU-only, so the scripts pick CPU mode
(no --gres, gloo) by themselves from ``sinfo -o %G``.
"""
import os
import socket
import subprocess
import textwrap
import time

import pytest
import torch

from toolcfg import RETINANET_WAVEMLP, repo_path, write_cfg

pytestmark = pytest.mark.slurm

ITERS = 4


def _run(cmd, env_extra, timeout=420, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env.update(env_extra)
    return subprocess.run(cmd, cwd=cwd or repo_path(), env=env, capture_output=True, text=True, timeout=timeout)


def _slurm_env(cluster, **kw):
    env = dict(SLURM_CONF=cluster['SLURM_CONF'], PATH=cluster['PATH'], GPUS='2', GPUS_PER_NODE='2',
               CPUS_PER_TASK='1')
    env.update(kw)
    return env


@pytest.fixture(scope='module')
def retina_cfg(toy_data, tmp_path_factory):
    d = tmp_path_factory.mktemp('slurm_cfg')
    return write_cfg(d / 'retina_wavemlp.py', RETINANET_WAVEMLP, toy_data, iters=ITERS, val=True,
                     extra="custom_hooks = [dict(type='mmposmlp.SaveRankWeightsHook')]\n")


@pytest.fixture(scope='module')
def slurm_run(slurm_cluster, retina_cfg, tmp_path_factory):
    work = tmp_path_factory.mktemp('slurm_work')
    res = _run(['bash', 'tools/slurm_train.sh', 'debug', 'mmposmlp-train', retina_cfg, str(work)],
               _slurm_env(slurm_cluster))
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    return work, res


def test_slurm_train_two_tasks_ranks_agree(slurm_run):
    work, res = slurm_run
    log = res.stdout + res.stderr
    assert 'Distributed launcher: slurm' in log and "dist_cfg: {'backend': 'gloo'}" in log
    r0 = torch.load(work / 'rank0_final.pth')
    r1 = torch.load(work / 'rank1_final.pth')
    assert r0['params'].keys() == r1['params'].keys() and len(r0['params']) > 20
    assert any(k.startswith('backbone.stages') for k in r0['params'])  # the mmposmlp WaveMLP backbone
    for k in r0['params']:
        assert torch.equal(r0['params'][k], r1['params'][k]), k
    assert (work / f'iter_{ITERS}.pth').is_file()


def test_slurm_test_evaluates_checkpoint(slurm_run, slurm_cluster, retina_cfg, tmp_path):
    work, _ = slurm_run
    res = _run(['bash', 'tools/slurm_test.sh', 'debug', 'mmposmlp-test', retina_cfg, str(work / f'iter_{ITERS}.pth'),
                '--work-dir', str(tmp_path)], _slurm_env(slurm_cluster))
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    assert 'coco/bbox_mAP' in res.stdout + res.stderr


@pytest.mark.slow  # ~27 s: a second 2-process job (tools/dist_train.sh runs in the default suite in test_dist.py)
def test_dist_train_matches_slurm(slurm_run, retina_cfg, slurm_cluster, tmp_path):
    work, _ = slurm_run
    res = _run(['bash', 'tools/dist_train.sh', retina_cfg, '2', '--work-dir', str(tmp_path)],
               dict(PATH=slurm_cluster['PATH']))
    assert res.returncode == 0, res.stderr[-3000:]
    from mmposmlp.utils.compat import safe_torch_load
    a = safe_torch_load(str(work / f'iter_{ITERS}.pth'))['state_dict']
    b = safe_torch_load(str(tmp_path / f'iter_{ITERS}.pth'))['state_dict']
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


DIE_HOOK = '''
import os, time
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class DieOnRank1Hook(Hook):
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        from mmengine.dist import get_rank
        if get_rank() == 1 and runner.iter + 1 == 2:
            with open(os.environ['DIE_STAMP'], 'w') as f:
                f.write(repr(time.time()))
            os._exit(3)
'''


@pytest.mark.slow  # ~28 s: the dead-rank fault runs in the default suite through dist_train.sh (test_dist_faults.py)
def test_dead_rank_brings_job_down(slurm_cluster, toy_data, tmp_path):
    (tmp_path / 'die_hook.py').write_text(DIE_HOOK)
    cfg = write_cfg(tmp_path / 'die.py', RETINANET_WAVEMLP, toy_data, iters=50,
                    extra=textwrap.dedent("""
                        custom_imports = dict(imports=['die_hook'], allow_failed_imports=False)
                        custom_hooks = [dict(type='DieOnRank1Hook')]
                        """))
    stamp = tmp_path / 'died_at'
    env = _slurm_env(slurm_cluster, DIE_STAMP=str(stamp), PYTHONPATH=str(tmp_path))
    res = _run(['bash', 'tools/slurm_train.sh', 'debug', 'mmposmlp-die', cfg, str(tmp_path / 'work')], env,
               timeout=300)
    ended = time.time()
    assert res.returncode != 0
    assert stamp.is_file(), res.stderr[-3000:]
    waited = ended - float(stamp.read_text())
    assert waited < 30, f'the job took {waited:.1f} s to go down after rank 1 died'
    assert 'iter_50.pth' not in os.listdir(tmp_path / 'work')


def test_missing_partition_is_one_clear_error(slurm_cluster, retina_cfg, tmp_path):
    res = _run(['bash', 'tools/slurm_train.sh', 'nosuchpart', 'job', retina_cfg, str(tmp_path)],
               _slurm_env(slurm_cluster), timeout=60)
    assert res.returncode == 1
    assert "partition 'nosuchpart' does not exist (available: debug" in res.stderr
    assert 'Traceback' not in res.stderr


def test_too_many_cpus_is_refused_not_queued(slurm_cluster, retina_cfg, tmp_path):
    res = _run(['bash', 'tools/slurm_train.sh', 'debug', 'job', retina_cfg, str(tmp_path)],
               _slurm_env(slurm_cluster, CPUS_PER_TASK='64'), timeout=60)
    assert res.returncode == 1 and 'would wait forever' in res.stderr


@pytest.mark.slow  # ~27 s; default: test_dist.py::test_slurm_port_derivation_and_busy_port (the same check, unit)
def test_master_port_in_use_is_one_clear_error(slurm_cluster, retina_cfg, tmp_path):
    with socket.socket() as s:
        s.bind(('', 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = _run(['bash', 'tools/slurm_train.sh', 'debug', 'job', retina_cfg, str(tmp_path)],
                   _slurm_env(slurm_cluster, MASTER_PORT=str(port)), timeout=240)
    assert res.returncode != 0
    assert f'MASTER_PORT {port} is already in use' in res.stderr
    assert 'Traceback' not in res.stderr
