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


def _slurm_node_addr(node: str) -> str:
    """The address Slurm itself uses for ``node`` (its ``NodeAddr``, which defaults to the node name)."""
    try:
        out = subprocess.run(['scontrol', 'show', 'node', '-o', node], capture_output=True, text=True, timeout=30,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return node
    for field in out.split():
        if field.startswith('NodeAddr=') and len(field) > len('NodeAddr='):
            return field[len('NodeAddr='):]
    return node


def _slurm_master_addr() -> str:
    nodelist = os.environ.get('SLURM_NODELIST') or os.environ.get('SLURM_JOB_NODELIST')
    if not nodelist:
        return '127.0.0.1'
    try:
        first = subprocess.run(['scontrol', 'show', 'hostname', nodelist], capture_output=True, text=True,
                               timeout=30, check=True).stdout.split()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        first = nodelist.split(',')[0]
    first = _slurm_node_addr(first)
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


# ---- faults: a launcher that dies takes its ranks along; a rank that stops ends the job ---------------------
STALL_TIMEOUT_ENV = 'MMPOSMLP_STALL_TIMEOUT'
DEFAULT_STALL_TIMEOUT = 180.0
STALL_EXIT_CODE = 75
# a rank found stalled on another machine: '<rank> <host> <boot id> <pid>', for that machine's NodeGuard
STALLED_KEY = 'mmposmlp/stalled'
STALLED_ACK_KEY = 'mmposmlp/stalled-ack'
STALLED_ACK_WAIT = 5.0
# preemption (mmposmlp.engine.preemption): a job that stopped on a signal after saving exits with this code
# (Grid Engine's "requeue me"; Slurm sites can requeue on it with RequeueExit=99)
PREEMPTED_EXIT_CODE = 99
PREEMPT_KEY_PREFIX = 'mmposmlp/preempt'


def preempted_checkpoint(host: str, port: int, run_id: str, timeout: float = 5.0):
    """``(iteration, path)`` that the ranks of run ``run_id`` recorded in the rendezvous store after saving on a
    signal, or None (nothing recorded, or the store is gone)."""
    import datetime

    import torch.distributed as tdist
    try:
        store = tdist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                               timeout=datetime.timedelta(seconds=timeout))
        key = f'{PREEMPT_KEY_PREFIX}/{run_id}/saved'
        if not store.check([key]):
            return None
        iteration, path = store.get(key).decode().split(' ', 1)
        return int(iteration), path
    except Exception:  # noqa: BLE001  (no record: the caller reports the signal as before)
        return None


def end_with_parent(sig=None) -> bool:
    """Linux: this process gets ``sig`` (default SIGKILL) as soon as its parent process dies.

    torchrun starts every rank in its own session, so a SIGKILL to the launcher (or to its process
    group) would leave the ranks training on; with this each rank ends with the launcher. Returns
    False where ``prctl`` is not available.
    """
    import ctypes
    import signal
    import sys
    if not sys.platform.startswith('linux'):
        return False
    sig = signal.SIGKILL if sig is None else sig
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(sig), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), sig)
    return True


def stall_timeout() -> float:
    """Seconds without a heartbeat after which a rank counts as stalled (``MMPOSMLP_STALL_TIMEOUT``, 0 = off)."""
    raw = os.environ.get(STALL_TIMEOUT_ENV, '')
    if not raw:
        return DEFAULT_STALL_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise LaunchError(f'{STALL_TIMEOUT_ENV}={raw!r} is not a number of seconds: set it to e.g. 180, or 0 to '
                          'turn the stalled-rank check off.') from None
    if value < 0:
        raise LaunchError(f'{STALL_TIMEOUT_ENV}={raw!r} is negative: set it to e.g. 180, or 0 to turn the '
                          'stalled-rank check off.')
    return value


class RankWatchdog:
    """Every rank publishes a heartbeat in the rendezvous store (MASTER_ADDR:MASTER_PORT) from a thread and
    watches everyone else's. When a rank's heartbeat has not changed for ``timeout`` seconds - its process
    is stopped (SIGSTOP), frozen, or cut off - the watcher prints one sentence naming that rank and exits
    with :data:`STALL_EXIT_CODE`, which makes the launcher (torchrun, srun --kill-on-bad-exit) end the job.
    Between the two it ends the stalled rank (:meth:`_end_stalled`): a stopped process cannot act on the
    launcher's SIGTERM, so torchrun would otherwise wait out its 30 s grace period before killing it.
    Same code for gloo and nccl: it does not use the process group at all.
    """

    def __init__(self, rank: int, world_size: int, timeout: float, host: str, port: int, period=None,
                 key_prefix: str = 'mmposmlp/heartbeat'):
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        self.host, self.port = host, port
        self.period = period or max(0.5, min(5.0, timeout / 6))
        run = os.environ.get('TORCHELASTIC_RUN_ID') or os.environ.get('SLURM_JOB_ID') or ''
        restart = os.environ.get('TORCHELASTIC_RESTART_COUNT') or os.environ.get('SLURM_RESTART_COUNT') or '0'
        self.prefix = f'{key_prefix}/{run}/{restart}'
        self._stop = None
        self._thread = None

    def start(self) -> None:
        import threading
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='mmposmlp-rank-watchdog', daemon=True)
        self._thread.start()

    def stop(self, done: bool = True) -> None:
        if self._stop is None:
            return
        self._stop.set()
        self._thread.join(timeout=2 * self.period + 5)
        if done:
            try:
                self._store().set(f'{self.prefix}/{self.rank}', 'done')
            except Exception:  # noqa: BLE001  (the job is ending anyway)
                pass

    def _store(self):
        import datetime

        import torch.distributed as tdist
        if getattr(self, '_client', None) is None:
            self._client = tdist.TCPStore(self.host, self.port, is_master=False, wait_for_workers=False,
                                          timeout=datetime.timedelta(seconds=max(5.0, min(60.0, self.timeout))))
        return self._client

    def _fail(self, message: str, before_exit=None) -> None:
        """Print ``message``, run ``before_exit`` (if any), end this process. The line comes first: ending a
        stalled rank closes its connections, and this rank's main thread may then die in a collective."""
        import sys
        print(f'ERROR: {message}', file=sys.stderr, flush=True)
        if before_exit is not None:
            before_exit()
        os._exit(STALL_EXIT_CODE)

    @staticmethod
    def _identity() -> str:
        """``host boot-id pid``: which process this rank is, and on which running machine."""
        import socket
        try:
            with open('/proc/sys/kernel/random/boot_id') as f:
                boot = f.read().strip()
        except OSError:
            boot = '-'
        return f'{socket.gethostname()} {boot} {os.getpid()}'

    def _end_stalled(self, store, rank: int) -> None:
        """End a stalled rank now rather than after the launcher's grace period (a stopped process cannot act
        on SIGTERM; a launcher on another node may not notice at all). On this machine (same host name and
        boot id): SIGKILL it. On another machine: ask that node's :class:`NodeGuard` (in its launcher) to,
        and wait up to :data:`STALLED_ACK_WAIT` seconds for it to confirm, since this rank's exit takes the
        store down with the job."""
        import signal
        import time
        try:
            identity = store.get(f'{self.prefix}/{rank}/process').decode()
            host, boot, pid = identity.split()
            mine = self._identity().split()
            if [host, boot] == mine[:2] and boot != '-':
                if int(pid) != os.getpid():
                    os.kill(int(pid), signal.SIGKILL)
                return
            request = f'{rank} {identity}'
            store.set(STALLED_KEY, request)
            deadline = time.monotonic() + STALLED_ACK_WAIT
            while time.monotonic() < deadline:
                if store.check([STALLED_ACK_KEY]) and store.get(STALLED_ACK_KEY).decode() == request:
                    return
                time.sleep(0.1)
        except Exception:  # noqa: BLE001  (best effort: the launcher still ends the job)
            pass

    def _run(self) -> None:
        import time
        beat = 0
        last, changed = {}, {}
        try:
            store = self._store()
            store.set(f'{self.prefix}/{self.rank}/process', self._identity())
            start = time.monotonic()
            while not self._stop.is_set():
                beat += 1
                store.set(f'{self.prefix}/{self.rank}', str(beat))
                now = time.monotonic()
                for r in range(self.world_size):
                    if r == self.rank:
                        continue
                    key = f'{self.prefix}/{r}'
                    value = store.get(key) if store.check([key]) else None
                    if value != last.get(r, ()):
                        last[r], changed[r] = value, now
                    if value == b'done':
                        continue
                    silent = now - changed.get(r, start)
                    if silent > self.timeout:
                        what = 'sent no heartbeat' if value is None else 'stopped sending heartbeats'
                        self._fail(f'rank {r} has {what} for {silent:.0f} s (its process is stopped, hung or cut '
                                   f'off): ending the job. {STALL_TIMEOUT_ENV} (now {self.timeout:g} s) sets this '
                                   'limit.', before_exit=lambda: self._end_stalled(store, r))
                self._stop.wait(self.period)
        except Exception as exc:  # noqa: BLE001  (a store that stops answering is a stall, too)
            if self._stop.is_set():
                return
            host_note = 'rank 0 hosts it under Slurm, the launcher under torchrun'
            self._fail(f'the rendezvous store at {self.host}:{self.port} stopped answering ({host_note}): '
                       f'ending the job ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ""}).')


def start_rank_watchdog():
    """A started :class:`RankWatchdog` for this distributed run, or None (single process, or switched off)."""
    import torch.distributed as tdist
    if not (tdist.is_available() and tdist.is_initialized()) or tdist.get_world_size() < 2:
        return None
    timeout = stall_timeout()
    if timeout == 0 or 'MASTER_ADDR' not in os.environ or 'MASTER_PORT' not in os.environ:
        return None
    dog = RankWatchdog(tdist.get_rank(), tdist.get_world_size(), timeout, os.environ['MASTER_ADDR'],
                       int(os.environ['MASTER_PORT']))
    dog.start()
    return dog


def _child_pids() -> set:
    """Pids of this process's children (Linux ``/proc``; empty elsewhere)."""
    pids = set()
    try:
        for task in os.listdir('/proc/self/task'):
            with open(f'/proc/self/task/{task}/children') as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


class NodeGuard:
    """The launcher's half of the stalled-rank check, one per node (:mod:`mmposmlp.utils.launch`).

    torchrun's agent on a node whose only fault is a stopped or hung rank never notices that the job has
    ended elsewhere: with a static rendezvous it watches its own workers only. This thread follows the
    rendezvous store the ranks' :class:`RankWatchdog` s use and

    * SIGKILLs one of this launcher's workers when a watchdog on another machine found it stalled
      (:data:`STALLED_KEY`), and confirms (:data:`STALLED_ACK_KEY`);
    * SIGKILLs the workers still running ``timeout`` seconds after the store stopped answering (node 0's
      launcher, which hosts it, is gone: the job cannot go on).

    The agent then sees its worker end and ends this node's part of the job.
    """

    def __init__(self, host: str, port: int, timeout: float, period: float = 0.5):
        self.host, self.port, self.timeout, self.period = host, port, timeout, period
        self.killed = {}  # pid -> (rank or None, why)
        self._stop = None
        self._thread = None

    def start(self) -> 'NodeGuard':
        import threading
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='mmposmlp-node-guard', daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join(timeout=self.period + 5)

    def _kill(self, pid: int, rank, why: str) -> None:
        """SIGKILL ``pid``, recording why first: the launcher reads :attr:`killed` once it sees the worker end,
        which may be before this thread runs again."""
        import signal
        self.killed[pid] = (rank, why)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            del self.killed[pid]

    def _run(self) -> None:
        import datetime
        import time

        import torch.distributed as tdist
        mine = RankWatchdog._identity().split()[:2]
        store, lost_since = None, None
        while not self._stop.is_set():
            if store is None:
                try:  # node 0's launcher creates the store once it starts the agent
                    store = tdist.TCPStore(self.host, self.port, is_master=False, wait_for_workers=False,
                                           timeout=datetime.timedelta(seconds=2))
                except Exception:  # noqa: BLE001
                    self._stop.wait(self.period)
                    continue
            try:
                if store.check([STALLED_KEY]):
                    request = store.get(STALLED_KEY).decode()
                    rank, host, boot, pid = request.split()
                    if [host, boot] == mine and int(pid) in _child_pids() and int(pid) not in self.killed:
                        self._kill(int(pid), int(rank), 'stalled')
                        store.set(STALLED_ACK_KEY, request)
                lost_since = None
            except Exception:  # noqa: BLE001  (the store is gone or cut off)
                now = time.monotonic()
                lost_since = lost_since or now
                if now - lost_since > self.timeout:
                    for pid in _child_pids() - set(self.killed):
                        self._kill(pid, None, 'store lost')
            self._stop.wait(self.period)
