"""Exact resume: every rank's random-number state travels in the checkpoint; validation a kill
interrupted runs again.

mmengine restores weights, optimizer, schedulers, the message hub and the iteration counter, and then
re-seeds. It does not restore the random streams that drop path, Mixup/CutMix and (with
``num_workers=0``) the data augmentations draw from, so a resumed run diverges from an uninterrupted
one at the first stochastic layer. :class:`ExactResumeHook` closes that gap:

* At every iteration (or epoch) after which a ``CheckpointHook`` saves, all ranks capture their torch
  (CPU and current CUDA device), numpy and python ``random`` states; rank 0 stores them, one entry per
  rank, under ``checkpoint['resume_state']``, with the world size and where they were taken. Every value
  is a plain type (tensors, ints, floats, str, tuples, lists, dicts), so the checkpoint loads with
  ``torch.load(weights_only=True)``.
* On ``--resume`` each rank restores its own states exactly where the uninterrupted run stood when it
  saved: after mmengine's loop has skipped the already-trained batches (the skip itself draws random
  numbers for the augmentations) and before the next batch is loaded. Worker processes need nothing:
  mmengine seeds them from ``(seed, rank, worker id)`` and the skip replays their streams.
* Validation neither draws from nor disturbs the training streams (the states are saved before it
  and put back after it), so a validation that is re-run changes nothing.
* Rank 0 records each finished validation in ``<work_dir>/validation_done`` (replaced atomically). A
  resumed run whose checkpoint was written just before a validation that never finished runs that
  validation first; this includes the final one, which mmengine would otherwise skip.
* A different world size is refused (the per-rank random streams cannot be mapped onto another number of
  processes) unless ``resume_allow_world_size_change=True`` is set (``tools/train.py
  --resume-world-size-change``); then the random states are not restored, and every process skips as many
  batches as it takes for all of them together to skip the samples the old processes consumed
  (:func:`batches_to_skip`), not mmengine's ``iter`` batches each.

* An epoch-based loop resumed from a checkpoint written inside an epoch (``mmposmlp.Runner`` builds
  :class:`~mmposmlp.engine.loops.ExactEpochBasedTrainLoop` for mmengine's ``EpochBasedTrainLoop``) gets the
  states of the moment that epoch's data iterator was created as well (``'epoch_start'`` in each rank's entry):
  the loop restores them before it creates the iterator, skips the trained batches, then restores the rest.

Exactness needs a fixed ``randomness.seed`` (otherwise mmengine seeds the data workers and the sampler
with a new random seed in every run). Persistent data workers (``persistent_workers=True``) carry their random
streams from epoch to epoch: with mmengine's epoch loop their states travel too, once, where the stopping point
needs them (inside an epoch in ``'epoch_start'``, once the epoch's batches are all trained as ``'workers'``); with
an iteration-based loop the skip loads every batch since the run's start with the same workers, so they replay
their streams.
"""
import os
import os.path as osp
import random
from typing import Optional

import numpy as np
import torch
from mmengine.hooks import CheckpointHook, Hook

from mmposmlp.engine.errors import UserError
from mmposmlp.registry import HOOKS

STATE_KEY = 'resume_state'
VALIDATION_DONE = 'validation_done'
ALLOW_WORLD_SIZE_CHANGE = 'resume_allow_world_size_change'


class ResumeStateError(UserError):
    """A checkpoint cannot be resumed exactly in this launch; the message names both sides and the fix."""


def capture_rng_state() -> dict:
    """This process's random states, as plain types (loadable with ``weights_only=True``)."""
    algorithm, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    state = dict(
        torch=torch.get_rng_state(),
        numpy=dict(algorithm=str(algorithm), keys=torch.from_numpy(keys.astype(np.int64)), pos=int(pos),
                   has_gauss=int(has_gauss), cached_gaussian=float(cached_gaussian)),
        python=_plain(random.getstate()))
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state()
    return state


def capture_train_rng_state(runner, position: int) -> dict:
    """:func:`capture_rng_state` after ``position`` trained iterations, with what the train loop needs to resume
    there (:meth:`~mmposmlp.engine.loops.ExactEpochBasedTrainLoop.rng_state_to_resume`: the states of the epoch's
    start as ``'epoch_start'`` inside an epoch, its persistent data workers' latest as ``'workers'`` at its end)."""
    state = capture_rng_state()
    to_resume = getattr(runner.train_loop, 'rng_state_to_resume', None)
    if to_resume is not None:
        state.update(to_resume(position))
    return state


def restore_rng_state(state: dict) -> None:
    """Inverse of :func:`capture_rng_state`. The state tensors may come back on a GPU (checkpoints are
    loaded onto the training device); the generators take CPU byte tensors."""
    torch.set_rng_state(state['torch'].cpu())
    np_state = state['numpy']
    np.random.set_state((np_state['algorithm'], np_state['keys'].cpu().numpy().astype(np.uint32), np_state['pos'],
                         np_state['has_gauss'], np_state['cached_gaussian']))
    random.setstate(_tuples(state['python']))
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state['cuda'].cpu())


def _plain(value):
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    return value


def _tuples(value):
    if isinstance(value, (tuple, list)):
        return tuple(_tuples(v) for v in value)
    return value


def _dist():
    from mmengine import dist
    return dist


def _checkpoint_hooks(runner):
    return [h for h in runner.hooks if isinstance(h, CheckpointHook)]


def _saves_after_iter(runner) -> bool:
    for h in _checkpoint_hooks(runner):
        if not h.by_epoch and (h.every_n_train_iters(runner, h.interval, h.save_begin)
                               or (h.save_last and h.is_last_train_iter(runner))):
            return True
    return False


def _saves_after_epoch(runner) -> bool:
    for h in _checkpoint_hooks(runner):
        if h.by_epoch and (h.every_n_epochs(runner, h.interval, h.save_begin)
                           or (h.save_last and h.is_last_train_epoch(runner))):
            return True
    return False


def _validation_due(loop, runner, step: int) -> bool:
    """Whether the train loop validates right after ``step`` iterations (or epochs) have finished."""
    if runner.val_loop is None or step <= 0:
        return False
    decide = getattr(loop, '_decide_current_val_interval', None)
    if decide is not None:
        decide()
    interval = getattr(loop, 'val_interval', None)
    begin = getattr(loop, 'val_begin', 1)
    last = loop.max_iters if _iteration_based(loop) else loop.max_epochs
    return bool(interval) and step >= begin and (step % interval == 0 or step == last)


def _iteration_based(loop) -> bool:
    return hasattr(loop, 'dataloader_iterator')


class _RestoreAfterSkip:
    """Wraps the loop's data iterator on resume. mmengine's loop skips the already-trained batches by calling
    ``next`` ``skip`` times; those calls are answered without loading anything, and at the first real batch
    ``real_skip`` batches are loaded and dropped instead (the same number unless the world size changed, see
    :func:`batches_to_skip`), then ``on_skipped`` runs once, right before the next batch is loaded."""

    def __init__(self, iterator, skip: int, on_skipped, real_skip: Optional[int] = None):
        self._iterator = iterator
        self._skip = skip
        self._real_skip = skip if real_skip is None else real_skip
        self._seen = 0
        self._on_skipped = on_skipped

    def __iter__(self):
        return self

    def __next__(self):
        if self._seen < self._skip:
            self._seen += 1
            return None  # mmengine's skip discards what it gets
        if self._real_skip is not None:
            for _ in range(self._real_skip):
                next(self._iterator)
            self._real_skip = None
            if self._on_skipped is not None:
                self._on_skipped()
                self._on_skipped = None
        return next(self._iterator)

    def __getattr__(self, name):
        return getattr(self._iterator, name)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def batches_to_skip(dataloader, iters_done: int, saved_world: int, world: int):
    """``(batches, exact, consumed)``: how many batches each of ``world`` processes skips so that together they
    skip the samples ``saved_world`` processes consumed in ``iters_done`` iterations (same per-process batch size).

    mmengine's :class:`DefaultSampler` and :class:`InfiniteSampler` draw one permutation per epoch (or one
    endless stream) from the seed alone and give rank ``r`` the positions ``r, r + world, ...`` of it, so
    ``n`` processes after ``k`` iterations of ``b`` samples have consumed the first ``n*k*b`` positions of the
    current epoch (``DefaultSampler``: after ``k // batches_per_epoch`` whole epochs, which map onto whole
    epochs). ``exact`` is False when that position is not a whole number of the new run's steps (it is rounded
    down: those samples train again), when ``drop_last`` drops a different tail of an epoch for the two sizes,
    or when the sampler is neither of the two."""
    from mmengine.dataset import DefaultSampler, InfiniteSampler
    sampler = getattr(dataloader, 'sampler', None)
    b = getattr(dataloader, 'batch_size', None)
    if not b or not isinstance(sampler, (DefaultSampler, InfiniteSampler)):
        return iters_done * saved_world // world, False, None
    step = b * world
    if isinstance(sampler, InfiniteSampler):
        consumed = iters_done * b * saved_world
        return consumed // step, consumed % step == 0, consumed
    n = len(sampler.dataset)
    drop_last = bool(getattr(dataloader, 'drop_last', False))

    def per_epoch(w):  # batches one rank (rank 0: the largest share) gets per epoch
        share = _ceil_div(n, w)  # rank 0 has the largest share, with or without round_up
        return share // b if drop_last else _ceil_div(share, b)

    def covered(w):  # positions of the permutation one epoch of w processes trains on
        return min(per_epoch(w) * b * w, n)

    epochs, in_epoch = divmod(iters_done, per_epoch(saved_world))
    consumed = min(in_epoch * b * saved_world, n)
    skip = epochs * per_epoch(world) + consumed // step
    # whole epochs map onto whole epochs; with drop_last they may drop different tails of the permutation
    exact = consumed % step == 0 and (epochs == 0 or covered(saved_world) == covered(world))
    return skip, exact, epochs * covered(saved_world) + consumed


_FORKED_CHILDREN_END_WITH_PARENT = False


def forked_children_end_with_parent() -> None:
    """Every process this one forks from now on (the data loader's workers) gets SIGKILL when it dies.

    Without it, a SIGKILLed training process leaves its ``num_workers`` workers behind: they block forever
    writing prefetched batches into a full pipe whose read end a sibling still holds, and keep the job's
    output pipes (and memory) open."""
    global _FORKED_CHILDREN_END_WITH_PARENT
    if _FORKED_CHILDREN_END_WITH_PARENT or not hasattr(os, 'register_at_fork'):
        return
    from mmposmlp.utils.dist import end_with_parent
    os.register_at_fork(after_in_child=end_with_parent)
    _FORKED_CHILDREN_END_WITH_PARENT = True


@HOOKS.register_module()
class ExactResumeHook(Hook):
    """Saves and restores the per-rank random states and re-runs an interrupted validation (see the
    module docstring). ``mmposmlp.Runner`` adds it to every run (``PLUGIN_HOOKS``)."""

    # after EMA/optimizer hooks, before CheckpointHook (VERY_LOW) in after_train_iter/epoch
    priority = 'LOW'

    def __init__(self):
        forked_children_end_with_parent()  # before the train loop forks its first data workers
        self._pending: Optional[dict] = None
        self._resumed: Optional[dict] = None
        self._val_state: Optional[dict] = None
        self._validation_check = None
        self._world_change = None
        self._training = False

    # ---- saving -------------------------------------------------------------------------------
    def _capture_all(self, runner, iteration: int, epoch: int, at_epoch_end: bool) -> None:
        dist = _dist()
        state = capture_train_rng_state(runner, iteration)
        states = dist.all_gather_object(state) if dist.get_world_size() > 1 else [state]
        self._pending = dict(world_size=len(states), iter=iteration, epoch=epoch, at_epoch_end=at_epoch_end,
                             rng=list(states))

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if _saves_after_iter(runner):
            self._capture_all(runner, runner.iter + 1, runner.epoch, at_epoch_end=False)

    def after_train_epoch(self, runner) -> None:
        if _saves_after_epoch(runner):
            self._capture_all(runner, runner.iter, runner.epoch + 1, at_epoch_end=True)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        meta = checkpoint.get('meta', {})
        pending = self._pending
        if pending is None or pending['iter'] != meta.get('iter') or pending['epoch'] != meta.get('epoch'):
            # a checkpoint saved outside the hooks' schedule: this rank's own states only
            pending = dict(world_size=_dist().get_world_size(), iter=meta.get('iter'), epoch=meta.get('epoch'),
                           at_epoch_end=False, rng=[capture_rng_state()], partial=True)
        checkpoint[STATE_KEY] = pending

    # ---- validation isolation and its record --------------------------------------------------
    def before_val(self, runner) -> None:
        self._val_state = capture_rng_state()

    def after_val(self, runner) -> None:
        if self._val_state is not None:
            restore_rng_state(self._val_state)
            self._val_state = None
        if not self._training:
            return  # a validation-only run
        if _dist().is_main_process() and osp.isdir(runner.work_dir):
            from mmposmlp.engine.checkpoint import atomic_write_text
            atomic_write_text(osp.join(runner.work_dir, VALIDATION_DONE), f'iter={runner.iter} epoch={runner.epoch}\n')

    # ---- resuming -----------------------------------------------------------------------------
    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not _resuming(runner):
            return
        state = checkpoint.get(STATE_KEY)
        if not isinstance(state, dict):
            runner.logger.warning('the checkpoint has no random states (written without ExactResumeHook): the '
                                  'resumed run continues but is not bit-identical to an uninterrupted one.')
            return
        world = _dist().get_world_size()
        saved = state.get('world_size')
        if saved != world:
            if not runner.cfg.get(ALLOW_WORLD_SIZE_CHANGE, False):
                raise ResumeStateError(
                    f'the checkpoint was written by {saved} processes and this run has {world}: resume with '
                    f'{saved} processes, or pass --resume-world-size-change (config key '
                    f'{ALLOW_WORLD_SIZE_CHANGE}=True) to continue with {world} processes, not bit-identically.')
            self._world_change = (saved, world)
            return
        self._resumed = state

    def after_train(self, runner) -> None:
        self._training = False

    def before_train(self, runner) -> None:
        self._training = True
        state, self._resumed = self._resumed, None
        change, self._world_change = self._world_change, None
        if change is not None:
            self._skip_for_new_world_size(runner, *change)
        if state is None:
            return
        loop = runner.train_loop
        step = loop.iter if _iteration_based(loop) else loop.epoch
        if _iteration_based(loop) or state.get('at_epoch_end'):
            # in before_train_epoch: every hook's before_train (e.g. CheckpointHook's, which save_best needs)
            # has run by then
            self._validation_check = (loop, step)
        rng = state['rng'][_dist().get_rank()] if len(state['rng']) > _dist().get_rank() else None
        if rng is None:
            runner.logger.warning('the checkpoint holds no random states for this rank; continuing without them.')
            return
        if _iteration_based(loop):
            loop.dataloader_iterator = _RestoreAfterSkip(loop.dataloader_iterator, loop.iter,
                                                         lambda: restore_rng_state(rng))
        elif not state.get('at_epoch_end') and hasattr(loop, 'resume_in_epoch'):
            loop.resume_in_epoch(rng.get('epoch_start'), rng)  # mid-epoch (ExactEpochBasedTrainLoop)
        else:
            restore_rng_state(rng)
            if hasattr(loop, 'resume_workers'):
                loop.resume_workers(rng.get('workers'))  # persistent data workers (ExactEpochBasedTrainLoop)

    def _skip_for_new_world_size(self, runner, saved: int, world: int) -> None:
        loop = runner.train_loop
        note = (f'resuming a {saved}-process checkpoint with {world} processes: random states are not restored '
                '(the run is not bit-identical to an uninterrupted one)')
        if not _iteration_based(loop) or loop.iter == 0:
            runner.logger.warning(note + '; the data continue at the next epoch.')
            return
        skip, exact, consumed = batches_to_skip(loop.dataloader, loop.iter, saved, world)
        if consumed is None:
            what = f'{skip} batches per process ({loop.iter} x {saved} / {world}; the sampler is not mmengine\'s)'
        else:
            what = (f'{skip} batches per process, the {consumed} samples the {saved} processes consumed' if exact
                    else f'{skip} batches per process, rounded down from the {consumed} samples the {saved} '
                         'processes consumed (the rest train again)')
        runner.logger.warning(f'{note}; skipping {what}.')
        loop.dataloader_iterator = _RestoreAfterSkip(loop.dataloader_iterator, loop.iter, None, real_skip=skip)

    def before_train_epoch(self, runner) -> None:
        check, self._validation_check = getattr(self, '_validation_check', None), None
        if check is not None:
            self._rerun_interrupted_validation(runner, *check)

    def _rerun_interrupted_validation(self, runner, loop, step: int) -> None:
        if not _validation_due(loop, runner, step):
            return
        dist = _dist()
        done = [False]
        if dist.is_main_process():
            marker = osp.join(runner.work_dir, VALIDATION_DONE)
            if osp.isfile(marker):
                with open(marker) as f:
                    fields = dict(p.split('=') for p in f.read().split())
                done[0] = int(fields.get('iter', -1)) == runner.iter and int(fields.get('epoch', -1)) == runner.epoch
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(done)
        if done[0]:
            return
        runner.logger.info(f'the validation after {"iteration" if _iteration_based(loop) else "epoch"} {step} did '
                           'not finish before the run stopped: running it now.')
        runner.val_loop.run()
        runner.model.train()


def _resuming(runner) -> bool:
    """Whether ``runner`` is resuming (``mmposmlp.Runner`` says so; another runner resumes when its config does)."""
    if hasattr(runner, 'resuming_from'):
        return runner.resuming_from is not None
    return bool(runner.cfg.get('resume', False))


__all__ = ['ExactResumeHook', 'ResumeStateError', 'capture_rng_state', 'capture_train_rng_state',
           'restore_rng_state', 'STATE_KEY', 'VALIDATION_DONE']
