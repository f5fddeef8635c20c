"""tools/dist_train.sh on CPU: 2 processes with gloo finish and agree; launch errors are one line (issues 2, 8)."""
import os
import socket
import subprocess
import sys

import pytest
import torch

from toolcfg import RESNET18_CLS, repo_path, write_cfg


def _sh(args, timeout=300, **env):
    e = dict(os.environ, OMP_NUM_THREADS='1')
    e['PATH'] = os.path.dirname(sys.executable) + os.pathsep + e.get('PATH', '')
    e.update(env)
    return subprocess.run(['bash'] + args, cwd=repo_path(), env=e, capture_output=True, text=True, timeout=timeout)


def test_dist_train_two_cpu_processes_agree(toy_data, tmp_path):
    cfg = write_cfg(tmp_path / 'cls.py', RESNET18_CLS, toy_data, iters=3,
                    extra="custom_hooks = [dict(type='mmposmlp.SaveRankWeightsHook')]\n")
    res = _sh([repo_path('tools', 'dist_train.sh'), cfg, '2', '--work-dir', str(tmp_path / 'w')])
    assert res.returncode == 0, res.stderr[-4000:]
    log = res.stdout + res.stderr
    assert "dist_cfg: {'backend': 'gloo'}" in log and 'Distributed launcher: pytorch' in log
    r0 = torch.load(tmp_path / 'w' / 'rank0_final.pth')
    r1 = torch.load(tmp_path / 'w' / 'rank1_final.pth')
    assert len(r0['params']) > 10
    for k, v in r0['params'].items():
        assert torch.equal(v, r1['params'][k]), k
    # the ranks really trained (weights moved away from the initialisation of rank 0's checkpoint 0)
    from mmposmlp.utils.compat import safe_torch_load
    ckpt = safe_torch_load(str(tmp_path / 'w' / 'iter_3.pth'))['state_dict']
    for k, v in r0['params'].items():
        assert torch.equal(v, ckpt[k]), k


def test_dist_train_world_size_not_dividing_batch(tmp_path):
    res = _sh([repo_path('tools', 'dist_train.sh'), 'any_config.py', '2', '--total-batch-size', '3'], timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip() == ('ERROR: --total-batch-size 3 is not divisible by the world size 2: use a multiple '
                                  'of 2 or change the number of processes.')


def test_total_batch_size_split_in_train_py(monkeypatch):
    from mmengine.config import Config

    from mmposmlp.engine.entry import UserError, apply_total_batch_size
    cfg = Config(dict(train_dataloader=dict(batch_size=2)))
    monkeypatch.setenv('WORLD_SIZE', '4')
    apply_total_batch_size(cfg, 32, 'pytorch')
    assert cfg.train_dataloader.batch_size == 8
    with pytest.raises(UserError, match='not divisible by the world size 4'):
        apply_total_batch_size(cfg, 30, 'pytorch')


def test_dist_train_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(('', 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = _sh([repo_path('tools', 'dist_train.sh'), 'any_config.py', '2'], timeout=60, PORT=str(port))
    assert res.returncode == 1
    assert f'PORT={port} is already in use' in res.stderr and 'Traceback' not in res.stderr


def test_slurm_port_derivation_and_busy_port(monkeypatch):
    from mmposmlp.utils.dist import LaunchError, prepare_slurm_env, slurm_master_port
    monkeypatch.delenv('MASTER_PORT', raising=False)
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('SLURM_JOB_ID', '4242')
    monkeypatch.setenv('SLURM_PROCID', '1')
    prepare_slurm_env()
    assert os.environ['MASTER_PORT'] == str(slurm_master_port(4242)) == '24242'
    with socket.socket() as s:
        s.bind(('', 0))
        s.listen(1)
        monkeypatch.setenv('MASTER_PORT', str(s.getsockname()[1]))
        monkeypatch.setenv('SLURM_PROCID', '0')
        with pytest.raises(LaunchError, match='already in use'):
            prepare_slurm_env()
