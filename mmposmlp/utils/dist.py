"""Distributed launch helpers: CPU (gloo) fallback and port selection (issue 2 item 3, issue 8).

mmengine 0.10.7 never falls back to gloo: ``init_dist`` calls ``torch.cuda.set_device`` unconditionally
(``AttributeError: ... _cuda_setDevice`` on CPU torch) and ``Runner.wrap_model`` passes
``device_ids=[LOCAL_RANK]`` to DDP (a ``ValueError`` for CPU modules). :func:`setup_cpu_distributed`
fixes all three on machines without CUDA and leaves GPU machines untouched.
"""
import os
import socket
import subprocess

import torch


class LaunchError(RuntimeError):
    """A distributed launch cannot work; the message names the problem and the fix."""


def cuda_available() -> bool:
    try:
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001  (broken drivers count as "no GPU")
        return False


def _noop_set_device(*args, **kwargs):
    return None


def port_is_free(port: int, host: str = '') -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def find_free_port() -> int:
    """A TCP port the OS reports free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('', 0))
        return s.getsockname()[1]


def slurm_master_port(job_id, base: int = 20000, span: int = 20000) -> int:
    """A port all tasks of one Slurm job agree on and that differs between jobs sharing a node.

    Two concurrent jobs collide only if their ids differ by a multiple of ``span``.
    """
    return base + int(job_id) % span


def _slurm_master_addr() -> str:
    nodelist = os.environ.get('SLURM_NODELIST') or os.environ.get('SLURM_JOB_NODELIST')
    if not nodelist:
        return '127.0.0.1'
    try:
        first = subprocess.run(['scontrol', 'show', 'hostname', nodelist], capture_output=True, text=True,
                               timeout=30, check=True).stdout.split()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        first = nodelist.split(',')[0]
    try:
        socket.gethostbyname(first)
        return first
    except OSError:
        nnodes = int(os.environ.get('SLURM_NNODES', os.environ.get('SLURM_JOB_NUM_NODES', '1')))
        if nnodes == 1:
            return '127.0.0.1'  # single node: the name need not resolve
        raise LaunchError(f'the Slurm node name {first!r} does not resolve, so ranks on other nodes cannot reach '
                          'rank 0: fix the cluster DNS/hosts or export MASTER_ADDR=<address of the first node> '
                          'before slurm_train.sh.')


def prepare_slurm_env() -> None:
    """Set MASTER_ADDR/MASTER_PORT for ``launcher='slurm'`` before mmengine's ``init_dist``.

    MASTER_PORT: kept if set; else derived from SLURM_JOB_ID (collision-free between jobs on one node).
    Rank 0 checks that the port is free and fails with one clear sentence instead of a hang.
    """
    if 'MASTER_ADDR' not in os.environ:
        os.environ['MASTER_ADDR'] = _slurm_master_addr()
    if 'MASTER_PORT' not in os.environ:
        job_id = os.environ.get('SLURM_JOB_ID')
        os.environ['MASTER_PORT'] = str(slurm_master_port(job_id) if job_id else 29500)
    if os.environ.get('SLURM_PROCID', '0') == '0':
        port = int(os.environ['MASTER_PORT'])
        if not port_is_free(port):
            raise LaunchError(f'MASTER_PORT {port} is already in use on {socket.gethostname()}: export '
                              'MASTER_PORT=<free port> (or unset it to derive one from SLURM_JOB_ID) and resubmit.')


def setup_cpu_distributed(cfg, launcher: str) -> bool:
    """Adapt ``cfg`` (mmengine Config) for distributed training without CUDA.

    Returns True when the CPU path was taken: ``env_cfg.dist_cfg.backend='gloo'``,
    ``model_wrapper_cfg.device_ids=None`` and ``torch.cuda.set_device`` made a no-op for this process
    (mmengine 0.10.7 calls it unconditionally in ``init_dist``). On CUDA machines nothing changes.
    """
    if launcher == 'none' or cuda_available():
        return False
    env_cfg = cfg.get('env_cfg') or {}
    dist_cfg = dict(env_cfg.get('dist_cfg') or {})
    dist_cfg['backend'] = 'gloo'
    env_cfg = dict(env_cfg)
    env_cfg['dist_cfg'] = dist_cfg
    cfg.env_cfg = env_cfg
    wrapper = dict(cfg.get('model_wrapper_cfg') or dict(type='MMDistributedDataParallel'))
    wrapper['device_ids'] = None
    cfg.model_wrapper_cfg = wrapper
    torch.cuda.set_device = _noop_set_device
    return True


def world_size_from_env(launcher: str) -> int:
    if launcher == 'slurm':
        return int(os.environ.get('SLURM_NTASKS', '1'))
    if launcher == 'mpi':
        return int(os.environ.get('OMPI_COMM_WORLD_SIZE', '1'))
    if launcher == 'pytorch':
        return int(os.environ.get('WORLD_SIZE', '1'))
    return 1
