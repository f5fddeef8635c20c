"""Save on the scheduler's signal: a job told to stop writes one checkpoint where it is and exits with
:data:`PREEMPTED_EXIT_CODE`; ``--resume`` then continues it bit-identically (:mod:`.resume_state`).

:class:`PreemptionHook`:

* **Signals** (``signals``, default SIGTERM and SIGUSR1): the handler only records the signal. A second one
  before the checkpoint is on disk ends the process at once (exit code ``128 + signal``); the previous
  checkpoint stays valid, since files are written to ``<name>.tmp`` and renamed. Data-loader workers ignore
  the signals (the training process decides; Slurm signals every process of a task).
* **One stopping point, no collective.** Distributed runs agree through the rendezvous store
  (``MASTER_ADDR:MASTER_PORT``, the store the rank watchdog uses; gloo and nccl alike). A signalled rank that has
  finished ``d`` training iterations proposes ``d + margin`` with an atomic compare-and-set (the first proposal
  wins); every rank reads the key after each training iteration and each validation batch. DDP's gradient
  all-reduce of iteration ``d + 1`` cannot complete before the proposer has written the key and joined it, so
  every rank sees the key at the end of iteration ``d + 1`` at the latest, and none can be past it
  (``margin`` = 1, or the config's ``optim_wrapper.accumulative_counts``: with gradient accumulation ranks
  synchronise only every that many iterations). A signal during the validation after iteration ``d``
  proposes ``d`` itself: no rank can leave that validation before the proposer (its metrics are gathered
  collectively), and to make sure none is blocked in that gather, ranks that have finished their validation
  batches wait for each other in the store instead.
* **One checkpoint.** At the agreed point every rank publishes its random states (taken at the training
  position: before the validation, when stopped inside one) in the store; rank 0 writes
  ``<work_dir>/iter_<d>.pth`` (atomically under ``mmposmlp.Runner``, with weights, optimizer, schedulers, EMA,
  message hub, every rank's random states), points ``last_checkpoint`` at it and records
  ``<work_dir>/preempted``; then every rank exits with :data:`PREEMPTED_EXIT_CODE`. A validation cut short runs
  again on resume.
* **Bounded.** ``grace_period`` seconds after the signal a rank that has not finished (a rank that never reaches
  the agreed point, a store that stopped answering) ends the job with one line naming what it waited for
  (exit code ``128 + signal``). A rank that dies instead ends the job as any dead rank does (the launcher
  names it).

Exact for iteration-based loops and, under ``mmposmlp.Runner``, for mmengine's epoch-based loop (built as
:class:`~mmposmlp.engine.loops.ExactEpochBasedTrainLoop`): the resumed run skips the batches already trained
and restores the random states. Another epoch-based loop resumes a mid-epoch checkpoint from the start of that
epoch (mmengine's behaviour): nothing is lost, but the run is not bit-identical; a warning says so.
"""
import io
import os
import os.path as osp
import signal
import sys
import threading
import time
from typing import Optional, Sequence

from mmengine.hooks import Hook

from mmposmlp.registry import HOOKS
from mmposmlp.utils.dist import PREEMPT_KEY_PREFIX as KEY_PREFIX
from mmposmlp.utils.dist import PREEMPTED_EXIT_CODE

DEFAULT_SIGNALS = ('SIGTERM', 'SIGUSR1')
DEFAULT_GRACE_PERIOD = 120.0
PREEMPTED_FILE = 'preempted'
POLL = 0.05


def run_key_prefix() -> str:
    """``mmposmlp/preempt/<run id>``: what rank 0 records for the launcher (``saved``), for this torchrun run
    or Slurm job."""
    run = os.environ.get('TORCHELASTIC_RUN_ID') or os.environ.get('SLURM_JOB_ID') or 'none'
    return f'{KEY_PREFIX}/{run}'


def _key_prefix() -> str:
    restart = os.environ.get('TORCHELASTIC_RESTART_COUNT') or os.environ.get('SLURM_RESTART_COUNT') or '0'
    return f'{run_key_prefix()}/{restart}'


def parse_signals(names) -> tuple:
    """Signal numbers for names like ``'SIGTERM'``, ``'USR1'`` or numbers; unknown names are refused."""
    if isinstance(names, (str, int)):
        names = [names]
    valid = ('SIGTERM', 'SIGUSR1', 'SIGUSR2', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGXCPU')
    out = []
    for n in names:
        if isinstance(n, int) or (isinstance(n, str) and n.isdigit()):
            out.append(signal.Signals(int(n)))
            continue
        name = str(n).upper()
        name = name if name.startswith('SIG') else 'SIG' + name
        if name not in valid:
            raise ValueError(f'PreemptionHook: unknown signal {n!r}; use some of {", ".join(valid)}.')
        out.append(signal.Signals[name])
    if not out:
        raise ValueError(f'PreemptionHook: signals is empty; use some of {", ".join(valid)}.')
    return tuple(out)


def _rng_bytes(state: dict) -> bytes:
    import torch
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _rng_from_bytes(data: bytes) -> dict:
    import torch
    return torch.load(io.BytesIO(data), weights_only=True)


class _Store:
    """The rendezvous store as a client with bounded waits (None in single-process runs)."""

    def __init__(self, rank: int, world: int, timeout: float):
        import datetime

        import torch.distributed as tdist
        self.rank, self.world, self.prefix = rank, world, _key_prefix()
        self.client = tdist.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), is_master=False,
                                     wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout))

    def key(self, name: str) -> str:
        return f'{self.prefix}/{name}'

    def propose(self, step: int, sig: signal.Signals) -> tuple:
        """``(step, signal name)`` agreed on: the first proposal written wins."""
        return _parse_stop(self.client.compare_set(self.key('stop'), '', f'{step} {sig.name}'))

    def agreed(self) -> Optional[tuple]:
        key = self.key('stop')
        return _parse_stop(self.client.get(key)) if self.client.check([key]) else None

    def wait_for(self, keys, stop_early=None, seconds: Optional[float] = None) -> list:
        """Poll until every key exists (or ``stop_early()`` is true, or ``seconds`` have passed); returns the
        missing ones."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            missing = [k for k in keys if not self.client.check([k])]
            if not missing or (stop_early is not None and stop_early()) or \
                    (deadline is not None and time.monotonic() > deadline):
                return missing
            time.sleep(POLL)


def _parse_stop(value: bytes) -> tuple:
    step, name = value.decode().split()
    return int(step), name


@HOOKS.register_module()
class PreemptionHook(Hook):
    """On SIGTERM/SIGUSR1 (``signals``) every rank stops at one agreed iteration, rank 0 writes one checkpoint,
    and the job exits with :data:`PREEMPTED_EXIT_CODE` within ``grace_period`` seconds (module docstring).

    ``custom_hooks = [dict(type='mmposmlp.PreemptionHook', signals=['SIGUSR1'], grace_period=60)]``.
    """

    priority = 'LOWEST'  # after EMA, the random-state capture and the interval checkpoint of the iteration

    def __init__(self, signals: Sequence = DEFAULT_SIGNALS, grace_period: float = DEFAULT_GRACE_PERIOD,
                 margin: Optional[int] = None):
        self.signals = parse_signals(signals)
        if not float(grace_period) > 0:
            raise ValueError(f'PreemptionHook: grace_period={grace_period!r} must be a positive number of seconds.')
        if margin is not None and int(margin) < 1:
            raise ValueError(f'PreemptionHook: margin={margin!r} must be at least 1 iteration.')
        self.grace_period = float(grace_period)
        self.margin = margin
        self._pid = os.getpid()
        self._received = None  # (signal, monotonic time): this rank's, or another's, learnt from the store
        self._own_signal = None
        self._signalled = threading.Event()
        self._finished = threading.Event()
        self._active = False
        self._saved = False
        self._proposed = False
        self._store = None
        self._states = None
        self._train_rng = None
        self._val_count = 0
        self._waiting_for = 'the end of the iteration in flight'
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            # now, before the train loop forks its first data workers (they inherit the handler and ignore)
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._on_signal)

    # ---- the signal ---------------------------------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        if os.getpid() != self._pid:
            return  # a data-loader worker: the training process saves and ends it
        sig = signal.Signals(signum)
        if not self._active and not self._saved:
            self._pass_on(sig, frame)
        elif self._own_signal is None:
            self._own_signal = sig
            if self._received is None:
                self._received = (sig, time.monotonic())
                self._signalled.set()
        elif self._saved:
            os._exit(PREEMPTED_EXIT_CODE)
        else:
            os.write(2, (f'ERROR: a second {sig.name} arrived before the checkpoint was written: ending now; the '
                         'last complete checkpoint in the work dir is still the one to resume from.\n').encode())
            os._exit(128 + signum)

    def _pass_on(self, sig, frame) -> None:
        """Outside training the signal does what it did before this hook existed."""
        previous = self._previous.get(sig, signal.SIG_DFL)
        if callable(previous):
            previous(int(sig), frame)
        elif previous != signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), int(sig))

    def _restore_handlers(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous.items():
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def _grace_timer(self) -> None:
        self._signalled.wait()
        if self._finished.wait(self.grace_period):
            return
        sig = self._received[0]
        rank = _rank()
        print(f'ERROR: rank {rank} could not stop and save within the grace period of {self.grace_period:g} s '
              f'after {sig.name} (it waited for {self._waiting_for}): ending the job; resume from the last complete '
              'checkpoint. PreemptionHook(grace_period=...) sets this limit.', file=sys.stderr, flush=True)
        os._exit(128 + int(sig))

    # ---- lifecycle ----------------------------------------------------------------------------
    def before_train(self, runner) -> None:
        from mmengine.dist import get_world_size
        world = get_world_size()
        if world > 1:
            self._store = _Store(_rank(), world, timeout=min(60.0, self.grace_period))
        if self.margin is None:
            optim = runner.cfg.get('optim_wrapper') or {}
            self.margin = int(optim.get('accumulative_counts', 1) or 1) if hasattr(optim, 'get') else 1
        from mmengine.runner import EpochBasedTrainLoop
        loop = runner.train_loop
        if isinstance(loop, EpochBasedTrainLoop) and not hasattr(loop, 'resume_in_epoch'):
            runner.logger.warning(f'PreemptionHook: with {type(loop).__name__} a checkpoint saved on a signal in '
                                  'the middle of an epoch resumes from the start of that epoch (nothing is lost, '
                                  'but the run is not bit-identical to an uninterrupted one); run with '
                                  "runner_type='mmposmlp.Runner' and mmengine's EpochBasedTrainLoop, or an "
                                  'iteration-based loop, for exact resume.')
        self._active = True
        threading.Thread(target=self._grace_timer, name='mmposmlp-preemption-grace', daemon=True).start()

    def after_train(self, runner) -> None:
        self._active = False

    def after_run(self, runner) -> None:
        self._active = False
        self._finished.set()
        self._restore_handlers()

    # ---- where ranks look for the stopping point ----------------------------------------------
    def _agreed(self, position: int) -> Optional[int]:
        """The agreed stopping position, proposing ``position`` first if this rank was signalled."""
        if self._received is not None and not self._proposed:
            self._proposed = True
            if self._store is None:
                return position
            agreed = self._store.propose(position, self._received[0])
        elif self._store is None:
            return None
        else:
            agreed = self._store.agreed()
        if agreed is None:
            return None
        if self._received is None:  # another rank was signalled: this one's grace period starts now
            self._received = (signal.Signals[agreed[1]], time.monotonic())
            self._signalled.set()
        return agreed[0]

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if not self._active:
            return
        done = runner.iter + 1
        margin = self.margin if self._store is not None else 0
        stop = self._agreed(done + margin)
        if stop is None:
            return
        if done < stop:
            self._waiting_for = f'the end of iteration {stop}, the agreed stopping point'
            return
        if done > stop:
            self._cannot_agree(done, stop)
        from mmposmlp.engine.resume_state import capture_train_rng_state
        self._stop(runner, done, capture_train_rng_state(runner, done))

    def before_val(self, runner) -> None:
        if self._active:
            from mmposmlp.engine.resume_state import capture_train_rng_state
            # the training position's states (validation draws its own)
            self._train_rng = capture_train_rng_state(runner, runner.iter)
            self._val_count += 1

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if not self._active or self._train_rng is None:
            return
        position = runner.iter
        self._check_in_validation(runner, position)
        if self._store is not None and batch_idx == len(runner.val_loop.dataloader) - 1:
            # wait for the others here, where the store is read, not in the gather of the metrics
            arrived = self._store.key(f'val/{self._val_count}/{_rank()}')
            self._store.client.set(arrived, '1')
            self._waiting_for = 'the other ranks to finish their validation batches'
            keys = [self._store.key(f'val/{self._val_count}/{r}') for r in range(self._store.world)]
            self._store.wait_for(keys, stop_early=lambda: self._stop_now(runner, position))
            self._check_in_validation(runner, position)

    def after_val(self, runner) -> None:
        self._train_rng = None

    def _stop_now(self, runner, position: int) -> bool:
        stop = self._agreed(position)
        return stop is not None and stop <= position

    def _check_in_validation(self, runner, position: int) -> None:
        stop = self._agreed(position)
        if stop is None or stop > position:
            return
        if stop < position:
            self._cannot_agree(position, stop)
        self._stop(runner, position, self._train_rng)

    def _cannot_agree(self, position: int, stop: int) -> None:
        print(f'ERROR: rank {_rank()} is past the agreed stopping iteration {stop} (it has finished {position}): '
              'the ranks cannot stop together, ending the job without a checkpoint; with gradient accumulation '
              'set PreemptionHook(margin=...) to at least accumulative_counts.', file=sys.stderr, flush=True)
        os._exit(128 + int(self._received[0] if self._received else signal.SIGTERM))

    # ---- the checkpoint -----------------------------------------------------------------------
    def _stop(self, runner, position: int, rng: dict) -> None:
        store, rank = self._store, _rank()
        if store is None:
            states = [rng]
        else:
            store.client.set(store.key(f'rng/{rank}'), _rng_bytes(rng))
            if rank != 0:
                self._waiting_for = f'rank 0 to write the checkpoint of iteration {position}'
                store.wait_for([store.key('saved')])
                store.client.set(store.key(f'left/{rank}'), '1')
                self._exit(runner, position, None)
            keys = [store.key(f'rng/{r}') for r in range(store.world)]
            self._waiting_for = f'every rank to reach iteration {position}'
            store.wait_for(keys)
            states = [_rng_from_bytes(store.client.get(k)) for k in keys]
        self._waiting_for = f'the checkpoint of iteration {position} to be written'
        path = self._save(runner, position, states)
        if store is not None:
            store.client.set(store.key('saved'), f'{position} {path}')
            store.client.set(f'{run_key_prefix()}/saved', f'{position} {path}')
            # under Slurm this process hosts the store: stay until every rank has read 'saved' (bounded)
            self._waiting_for = 'the other ranks to read that the checkpoint is written'
            store.wait_for([store.key(f'left/{r}') for r in range(1, store.world)], seconds=10.0)
        self._exit(runner, position, path)

    def _save(self, runner, position: int, states: list) -> str:
        from mmposmlp.engine.checkpoint import atomic_write_text
        name = f'iter_{position}.pth'
        self._states = dict(world_size=len(states), iter=position, epoch=runner.epoch,
                            at_epoch_end=_at_epoch_end(runner, position), rng=states)
        runner.save_checkpoint(runner.work_dir, name, save_optimizer=True, save_param_scheduler=True,
                               meta=dict(epoch=runner.epoch, iter=position), by_epoch=False)
        path = osp.join(runner.work_dir, name)
        atomic_write_text(osp.join(runner.work_dir, 'last_checkpoint'), path)
        sig = self._received[0].name
        atomic_write_text(osp.join(runner.work_dir, PREEMPTED_FILE),
                          f'iter={position} signal={sig} job={os.environ.get("SLURM_JOB_ID", "")} '
                          f'restart={os.environ.get("SLURM_RESTART_COUNT", "0")} checkpoint={path}\n')
        return path

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._states is not None:  # our save: every rank's states at the stopping point
            from mmposmlp.engine.resume_state import STATE_KEY
            checkpoint[STATE_KEY] = self._states
            if self._train_rng is not None:
                _undo_ema_validation_swap(runner, checkpoint)

    def _exit(self, runner, position: int, path: Optional[str]) -> None:
        self._saved = True
        self._finished.set()
        sig, t0 = self._received
        if path is not None:
            runner.logger.info(f'{sig.name}: saved {path} {time.monotonic() - t0:.2f} s after the signal; stopping '
                               f'after iteration {position} with exit code {PREEMPTED_EXIT_CODE} (continue with '
                               '--resume).')
        raise SystemExit(PREEMPTED_EXIT_CODE)


def _undo_ema_validation_swap(runner, checkpoint: dict) -> None:
    """mmengine's :class:`EMAHook` validates with the EMA weights by swapping them with the model's for the
    validation (parameters, and buffers with ``update_buffers``); a checkpoint written inside a validation
    finds them swapped: swap those entries back, so it holds what one written before the validation would."""
    from mmengine.hooks import EMAHook
    hooks = [h for h in runner.hooks if isinstance(h, EMAHook) and getattr(h, 'ema_model', None) is not None]
    if not hooks or 'ema_state_dict' not in checkpoint:
        return
    ema = hooks[0].ema_model
    names = [n for n, _ in ema.module.named_parameters()]
    if ema.update_buffers:
        names += [n for n, _ in ema.module.named_buffers()]
    model_state, ema_state = checkpoint['state_dict'], checkpoint['ema_state_dict']
    for n in names:
        if n in model_state and f'module.{n}' in ema_state:
            model_state[n], ema_state[f'module.{n}'] = ema_state[f'module.{n}'], model_state[n]


def _at_epoch_end(runner, position: int) -> bool:
    """Whether ``position`` iterations end an epoch whose end hooks have run (a stop inside the validation
    after it); a stop after an epoch's last iteration comes before them."""
    from mmengine.runner import EpochBasedTrainLoop
    loop = runner.train_loop
    return isinstance(loop, EpochBasedTrainLoop) and position == runner.epoch * len(loop.dataloader)


def _rank() -> int:
    from mmengine.dist import get_rank
    return get_rank()


__all__ = ['PreemptionHook', 'PREEMPTED_EXIT_CODE', 'PREEMPTED_FILE', 'parse_signals',
           'run_key_prefix']
