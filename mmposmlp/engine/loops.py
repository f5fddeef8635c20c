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

``mmposmlp.Runner.build_train_loop`` builds it wherever a config asks for mmengine's ``EpochBasedTrainLoop``
(``type='EpochBasedTrainLoop'`` or ``by_epoch=True``, as the mmdet, mmpretrain and mmaction2 base configs write
it); it can also be named as ``type='mmposmlp.ExactEpochBasedTrainLoop'``.
"""
from typing import Optional

from mmengine.runner import EpochBasedTrainLoop

from mmposmlp.engine.resume_state import capture_rng_state, restore_rng_state
from mmposmlp.registry import LOOPS

#: how configs name mmengine's loop that :class:`ExactEpochBasedTrainLoop` stands in for
MMENGINE_EPOCH_LOOP_NAMES = ('EpochBasedTrainLoop', 'mmengine.EpochBasedTrainLoop')


@LOOPS.register_module()
class ExactEpochBasedTrainLoop(EpochBasedTrainLoop):
    """mmengine's ``EpochBasedTrainLoop`` that continues a mid-epoch checkpoint at its batch (module docstring).
    Takes exactly mmengine's arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: this process's random states when the current epoch's data iterator was created
        self.epoch_start_rng_state: Optional[dict] = None
        self._resume_rng: Optional[tuple] = None

    def resume_in_epoch(self, epoch_start_rng: Optional[dict], stop_rng: dict) -> None:
        """Restore ``epoch_start_rng`` (if any) before the next epoch's data iterator is created and ``stop_rng``
        after the already-trained batches are skipped."""
        self._resume_rng = (epoch_start_rng, stop_rng)

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
        self.epoch_start_rng_state = capture_rng_state()
        batches = iter(self.dataloader) if skip < len(self.dataloader) else iter(())
        for _ in range(skip):
            next(batches, None)
        if resume is not None:
            restore_rng_state(resume[1])
            note = persistent_workers_note(self.dataloader, self.epoch)
            if note:
                self.runner.logger.warning(note)
        return enumerate(batches, start=skip)


def persistent_workers_note(dataloader, epoch: int) -> Optional[str]:
    """The sentence a resume in ``epoch`` logs when the data workers persist across epochs (their random streams
    then carry epochs the resumed run did not load), else None."""
    if epoch == 0 or not getattr(dataloader, 'persistent_workers', False) or not dataloader.num_workers:
        return None
    return (f'resuming in epoch {epoch + 1} with persistent data workers: their augmentations differ from the '
            'uninterrupted run\'s from here on (no batch is lost or trained twice); set '
            'train_dataloader.persistent_workers=False for a bit-identical resume.')


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


__all__ = ['ExactEpochBasedTrainLoop', 'exact_epoch_loop_cfg', 'persistent_workers_note']
