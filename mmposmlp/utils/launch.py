"""torchrun with one-sentence failures (used by tools/dist_train.sh and tools/dist_test.sh).

    python -m mmposmlp.utils.launch [torchrun options] SCRIPT [script args]

Same options and behaviour as ``python -m torch.distributed.run``; what differs is how a failed job ends:

* a rank that dies: ``ERROR: rank R (local rank L on HOST, pid P) exited with code C (SIGNAL); the other
  ranks were stopped.`` and exit code 1 (torchrun stops the other ranks itself);
* SIGTERM/SIGINT/SIGHUP (and SIGUSR1 with ``--signals-to-handle``) to the launcher (``timeout``, Slurm,
  Ctrl-C): torchrun passes it to every rank. Ranks with :class:`mmposmlp.engine.preemption.PreemptionHook`
  save one checkpoint and exit 99: one line naming the iteration and the file, exit code 99. Otherwise every
  rank is stopped, one line, exit code 128 + signal;
* the port of the rendezvous store is taken: with ``MMPOSMLP_AUTO_PORT=1`` (the shell scripts set it
  when they picked the port themselves) another free port is tried, up to 3 times; otherwise one
  sentence naming the port and exit code 1.

* a rank found stalled (:class:`mmposmlp.utils.dist.RankWatchdog`) on another node: this node's launcher
  SIGKILLs it (:class:`mmposmlp.utils.dist.NodeGuard`), so every node's part of the job ends.

SIGKILL cannot be caught: the ranks end with the launcher because they ask the kernel for it
(:func:`mmposmlp.utils.dist.end_with_parent`).
"""
import os
import socket
import sys

PORT_TRIES = 3


def _port_in_use(exc: BaseException) -> bool:
    text = str(exc)
    return 'EADDRINUSE' in text or 'address already in use' in text.lower()


def _replace_port(argv, port: int):
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ('--master_port', '--master-port'):
            out += [a, str(port)]
            skip = True
        elif a.startswith('--master_port=') or a.startswith('--master-port='):
            out.append(f'{a.split("=")[0]}={port}')
        else:
            out.append(a)
    return out


def _option(argv, names, default):
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            return argv[i + 1]
        for n in names:
            if a.startswith(n + '='):
                return a.split('=', 1)[1]
    return default


def _master_port(argv):
    return _option(argv, ('--master_port', '--master-port'), '29500')


def _describe_exit(code: int, killed_as=None) -> str:
    import signal
    if killed_as == 'stalled':
        return f'{code} (SIGKILL: a rank on another node found it stalled and this node ended it)'
    if killed_as == 'store lost':
        return (f'{code} (SIGKILL: still running after the rendezvous store stopped answering, i.e. node 0 had '
                'ended the job)')
    if code < 0:
        try:
            return f'{code} ({signal.Signals(-code).name})'
        except ValueError:
            return str(code)
    if code == 75:
        return f'{code} (it found another rank stalled; see its message above)'
    return str(code)


def _run_id(argv) -> str:
    return _option(argv, ('--rdzv_id', '--rdzv-id', '--run_id', '--run-id'), 'none')


def _preempted(argv):
    """``(iteration, path)`` when the ranks saved on a signal (recorded in the rendezvous store), else None."""
    from mmposmlp.utils.dist import preempted_checkpoint
    host = _option(argv, ('--master_addr', '--master-addr'), '127.0.0.1')
    return preempted_checkpoint(host, int(_master_port(argv)), _run_id(argv))


def main(argv=None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    from mmposmlp.utils.dist import PREEMPTED_EXIT_CODE, LaunchError, NodeGuard, find_free_port, stall_timeout
    argv = list(sys.argv[1:] if argv is None else argv)
    auto_port = os.environ.get('MMPOSMLP_AUTO_PORT') == '1'
    try:
        timeout = stall_timeout()
    except LaunchError as exc:
        print(f'ERROR: {exc}', file=sys.stderr, flush=True)
        return 1
    for attempt in range(PORT_TRIES if auto_port else 1):
        guard = None
        if timeout:
            guard = NodeGuard(_option(argv, ('--master_addr', '--master-addr'), '127.0.0.1'),
                              int(_master_port(argv)), timeout).start()
        try:
            run(parse_args(argv))
            return 0
        except ChildFailedError as exc:
            rank, failure = exc.get_first_failure()
            saved = _preempted(argv) if failure.exitcode == PREEMPTED_EXIT_CODE else None
            if saved is not None:
                print(f'the ranks received a stop signal: every rank stopped after iteration {saved[0]} and '
                      f'{saved[1]} was saved (exit code {PREEMPTED_EXIT_CODE}: continue with --resume).',
                      file=sys.stderr, flush=True)
                return PREEMPTED_EXIT_CODE
            host = getattr(failure, 'hostname', None) or socket.gethostname()
            killed_as = guard.killed.get(failure.pid, (None, None))[1] if guard else None
            print(f'ERROR: rank {rank} (local rank {failure.local_rank} on {host}, pid {failure.pid}) exited with '
                  f'code {_describe_exit(failure.exitcode, killed_as)}; the other ranks were stopped.',
                  file=sys.stderr, flush=True)
            return 1
        except SignalException as exc:
            sig = exc.sigval
            saved = _preempted(argv)
            if saved is not None:
                print(f'the launcher received {sig.name}: every rank stopped after iteration {saved[0]} and '
                      f'{saved[1]} was saved (exit code {PREEMPTED_EXIT_CODE}: continue with --resume).',
                      file=sys.stderr, flush=True)
                return PREEMPTED_EXIT_CODE
            print(f'ERROR: the launcher received {sig.name}: every rank was stopped.', file=sys.stderr, flush=True)
            return 128 + int(sig)
        except Exception as exc:  # noqa: BLE001
            if not _port_in_use(exc):
                raise
            port = _master_port(argv)
            if auto_port and attempt + 1 < PORT_TRIES:
                argv = _replace_port(argv, find_free_port())
                continue
            print(f'ERROR: PORT={port} is already in use on {socket.gethostname()} (another job took it): choose '
                  'another PORT or unset it to pick a free one.', file=sys.stderr, flush=True)
            return 1
        finally:
            if guard is not None:
                guard.stop()
    return 1


if __name__ == '__main__':
    sys.exit(main())
