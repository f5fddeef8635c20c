"""mmposmlp's epoch-based training loop: mmengine's ``EpochBasedTrainLoop`` that resumes a checkpoint written in
the middle of an epoch exactly where it was written.

mmengine's loop resumes such a checkpoint (a ``PreemptionHook`` stop, or a ``CheckpointHook(by_epoch=False)``
interval) from the first batch of its epoch, training the batches already trained again. This loop instead:

* skips the batches of the epoch already trained: mmengine's ``DefaultSampler`` orders an epoch from
  ``seed + epoch`` alone, so the data loader yields the same batches in the same order; the skipped batches are
  loaded and dropped, which also advances the data workers' random streams as the uninterrupted run did;
* hands hooks the same ``batch_idx`` (and logs the same epoch and iteration numbers) as the uninterrupted run;
* with the random states the checkpoint carries (:class:`~mmposmlp.engine.resume_state.ExactResumeHook`,
  :class:`~mmposmlp.engine.preemption.PreemptionHook`), restores the main process's states of the moment the
  epoch's data iterator was created (the workers' base seed is drawn from it) before creating it, and the states
  of the stopping point after the skip.

With persistent data workers (``persistent_workers=True``, ``num_workers > 0``, as mmdet's base configs set), each
worker's random streams run on from epoch to epoch, which a resumed run's new workers would not have. The loop
therefore has each batch come back with the random states of the worker that made it
(:class:`WorkerStateCollate`) and keeps the latest per worker. A checkpoint inside an epoch stores those of the
epoch's start with the epoch-start states (the resumed run loads that epoch's trained batches again); one after
the epoch's last batch stores the latest. A resumed run's workers take them before they load anything
(:class:`ResumedWorkerInit`).

``mmposmlp.Runner.build_train_loop`` builds it wherever a config asks for mmengine's ``EpochBasedTrainLoop``
(``type='EpochBasedTrainLoop'`` or ``by_epoch=True``, as the mmdet, mmpretrain and mmaction2 base configs write
it); it can also be named as ``type='mmposmlp.ExactEpochBasedTrainLoop'``.
"""
from typing import Callable, Dict, Optional

from mmengine.runner import EpochBasedTrainLoop
from torch.utils.data import get_worker_info

from mmposmlp.engine.resume_state import capture_rng_state, restore_rng_state
from mmposmlp.registry import LOOPS

#: how configs name mmengine's loop that :class:`ExactEpochBasedTrainLoop` stands in for
MMENGINE_EPOCH_LOOP_NAMES = ('EpochBasedTrainLoop', 'mmengine.EpochBasedTrainLoop')


def _persistent_workers(dataloader) -> bool:
    return bool(getattr(dataloader, 'persistent_workers', False) and getattr(dataloader, 'num_workers', 0))


class WorkerStateCollate:
    """A data loader's ``collate_fn`` that returns ``(batch, worker id, the worker's random states after it)``."""

    def __init__(self, collate_fn: Callable):
        self.collate_fn = collate_fn

    def __call__(self, samples):
        info = get_worker_info()
        return self.collate_fn(samples), None if info is None else info.id, capture_rng_state()


class ResumedWorkerInit:
    """A data loader's ``worker_init_fn`` that, after the original one seeded the worker, gives it the random states
    in :attr:`states` (worker id as a string -> states) when there are any: set before the iterator starts."""

    def __init__(self, worker_init_fn: Optional[Callable]):
        self.worker_init_fn = worker_init_fn
        self.states: Dict[str, dict] = {}

    def __call__(self, worker_id: int) -> None:
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)
        if str(worker_id) in self.states:
            restore_rng_state(self.states[str(worker_id)])


@LOOPS.register_module()
class ExactEpochBasedTrainLoop(EpochBasedTrainLoop):
    """mmengine's ``EpochBasedTrainLoop`` that continues a mid-epoch checkpoint at its batch (module docstring).
    Takes exactly mmengine's arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: this process's random states when the current epoch's data iterator was created (with persistent
        #: workers, theirs as ``'workers'``)
        self.epoch_start_rng_state: Optional[dict] = None
        #: persistent workers: each worker's random states after the last batch it gave (worker id as a string)
        self.worker_rng_states: Dict[str, dict] = {}
        self._resume_rng: Optional[tuple] = None
        self._workers_started = False
        if _persistent_workers(self.dataloader):
            self.dataloader.collate_fn = WorkerStateCollate(self.dataloader.collate_fn)
            self.dataloader.worker_init_fn = ResumedWorkerInit(self.dataloader.worker_init_fn)

    def resume_workers(self, states: Optional[Dict[str, dict]]) -> None:
        """Persistent workers started from now on take ``states`` (worker id -> states) after their seeding."""
        if states and isinstance(self.dataloader.worker_init_fn, ResumedWorkerInit):
            self.dataloader.worker_init_fn.states = dict(states)
            self.worker_rng_states = dict(states)

    def resume_in_epoch(self, epoch_start_rng: Optional[dict], stop_rng: dict) -> None:
        """Restore ``epoch_start_rng`` (if any) before the next epoch's data iterator is created and ``stop_rng``
        after the already-trained batches are skipped."""
        self._resume_rng = (epoch_start_rng, stop_rng)

    def rng_state_to_resume(self, position: int) -> dict:
        """What a checkpoint after ``position`` trained iterations needs of this loop's random states, besides the
        main process's: within an epoch with batches left, those of the epoch's start (``'epoch_start'``, with the
        persistent workers' of that moment; a resumed run creates that epoch's data iterator again); otherwise
        (the epoch's batches all trained) the persistent workers' latest (``'workers'``)."""
        in_epoch = position - self.epoch * len(self.dataloader)
        if 0 < in_epoch < len(self.dataloader) and self.epoch_start_rng_state is not None:
            return dict(epoch_start=self.epoch_start_rng_state)
        return dict(workers=dict(self.worker_rng_states)) if self.worker_rng_states else {}

    @property
    def batches_done_in_epoch(self) -> int:
        """Batches of the current epoch already trained (non-zero only after a mid-epoch resume)."""
        return self.iter - self.epoch * len(self.dataloader)

    def run_epoch(self) -> None:
        """mmengine's ``run_epoch``, starting at batch :attr:`batches_done_in_epoch`."""
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        for idx, data_batch in self._epoch_batches():
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1

    def _epoch_batches(self):
        """``(batch_idx, batch)`` of the rest of the epoch; random states restored as the module docstring says."""
        resume, self._resume_rng = self._resume_rng, None
        skip = self.batches_done_in_epoch
        if resume is not None and resume[0] is not None:
            restore_rng_state(resume[0])
            self.resume_workers(resume[0].get('workers'))
        if resume is not None and skip >= len(self.dataloader):  # no batch left: the workers go on from the stop
            self.resume_workers(resume[1].get('workers'))
        self.epoch_start_rng_state = capture_rng_state()
        if self.worker_rng_states:
            self.epoch_start_rng_state['workers'] = dict(self.worker_rng_states)
        batches = self._batches(self._iterator()) if skip < len(self.dataloader) else iter(())
        for _ in range(skip):
            next(batches, None)
        if resume is not None:
            restore_rng_state(resume[1])
        return enumerate(batches, start=skip)

    def _iterator(self):
        """``iter(dataloader)``. Persistent workers first started after the first epoch (in a resumed run) leave the
        main process's random states as they were: the uninterrupted run drew their seed in the first epoch."""
        late_start = self.epoch > 0 and _persistent_workers(self.dataloader) and not self._workers_started
        state = capture_rng_state() if late_start else None
        iterator = iter(self.dataloader)
        self._workers_started = True
        if state is not None:
            restore_rng_state(state)
        return iterator

    def _batches(self, iterator):
        """The epoch's batches; with persistent workers, their states recorded and the batches unwrapped."""
        if not isinstance(self.dataloader.collate_fn, WorkerStateCollate):
            yield from iterator
            return
        for batch, worker, states in iterator:
            self.worker_rng_states[str(worker)] = states
            yield batch


def exact_epoch_loop_cfg(loop_cfg: dict) -> dict:
    """``loop_cfg`` with mmengine's ``EpochBasedTrainLoop`` (by ``type`` or ``by_epoch=True``) replaced by
    :class:`ExactEpochBasedTrainLoop`; any other loop unchanged."""
    cfg = dict(loop_cfg)
    kind = cfg.get('type')
    if kind is None and cfg.get('by_epoch'):
        cfg.pop('by_epoch')
        cfg['type'] = ExactEpochBasedTrainLoop
    elif kind is EpochBasedTrainLoop or kind in MMENGINE_EPOCH_LOOP_NAMES:
        cfg['type'] = ExactEpochBasedTrainLoop
    return cfg


__all__ = ['ExactEpochBasedTrainLoop', 'ResumedWorkerInit', 'WorkerStateCollate', 'exact_epoch_loop_cfg']
