"""mmposmlp's Runner: mmengine's ``Runner`` through its public methods, chosen by ``runner_type = 'mmposmlp.Runner'``.

Every shipped config sets that ``runner_type``, and every library's stock ``tools/train.py`` / ``tools/test.py``
builds the runner with ``RUNNERS.build(cfg)`` when a config has one, so ours and theirs run the same code:

* plugin hooks: the hooks of :data:`PLUGIN_HOOKS` are added unless the config lists them already, and the
  ``CheckpointHook`` becomes :class:`~mmposmlp.engine.checkpoint.AtomicCheckpointHook`;
* atomic, plain-data checkpoints (:meth:`Runner.save_checkpoint`, :meth:`Runner.call_hook`);
* data-only loading: our ``CheckpointLoader`` schemes are registered when a runner is built, never at import;
* exact, checked resume (:meth:`Runner.resume`): the config text stored in the checkpoint is read as data (never
  executed), and a checkpoint of another model or another GPU count is refused in one sentence;
* mid-epoch exact resume: mmengine's ``EpochBasedTrainLoop`` (``type='EpochBasedTrainLoop'`` or
  ``by_epoch=True`` in the library base configs) is built as :class:`~mmposmlp.engine.loops.ExactEpochBasedTrainLoop`
  (:meth:`Runner.build_train_loop`); every loop built is recorded in :attr:`Runner.built_loops`;
* pre-flight checks before a loop starts (datasets, pretrained weights, a model-level ``pretrained`` left from an
  upstream config), and an unknown ``type`` answered with the closest registered names.
"""
import contextlib
import copy
import os.path as osp

from mmengine.dist import master_only
from mmengine.runner import Runner as MMEngineRunner

from mmposmlp.engine.errors import UnknownTypeError
from mmposmlp.engine.loops import exact_epoch_loop_cfg
from mmposmlp.registry import RUNNERS

#: hooks every run of ``mmposmlp.Runner`` gets (appended to ``custom_hooks`` unless the config lists them)
PLUGIN_HOOKS = (
    'mmposmlp.ExactResumeHook',
    'mmposmlp.RankWatchdogHook',
    'mmposmlp.UnusedOutputsHook',
    'mmposmlp.ConsumerCheckHook',
    'mmposmlp.PreemptionHook',
)

#: the data loaders each loop reads, in the order the pre-flight checks look at them
LOOP_LOADERS = {'train': ('train_dataloader', 'val_dataloader'), 'val': ('val_dataloader', ),
                'test': ('test_dataloader', )}


def _type_name(hook) -> str:
    kind = hook.get('type') if isinstance(hook, dict) else hook
    return (kind.__name__ if isinstance(kind, type) else str(kind or '')).rpartition('.')[2]


def add_plugin_hooks(cfg) -> None:
    """Append each hook of :data:`PLUGIN_HOOKS` to ``cfg.custom_hooks`` unless it is there (with or without
    the ``mmposmlp.`` prefix), and use :class:`AtomicCheckpointHook` for mmengine's ``CheckpointHook``."""
    hooks = list(cfg.get('custom_hooks') or [])
    present = {_type_name(h) for h in hooks}
    hooks += [dict(type=name) for name in PLUGIN_HOOKS if name.rpartition('.')[2] not in present]
    cfg['custom_hooks'] = hooks
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint')
    if isinstance(checkpoint, dict) and checkpoint.get('type') in ('CheckpointHook', 'mmengine.CheckpointHook'):
        checkpoint['type'] = 'mmposmlp.AtomicCheckpointHook'


def loop_loaders(cfg, loop: str) -> list:
    """The data loaders ``loop`` reads (training validates only with a ``val_cfg``)."""
    loaders = [name for name in LOOP_LOADERS[loop] if isinstance(cfg.get(name), dict)]
    if loop == 'train' and not cfg.get('val_cfg'):
        loaders = [name for name in loaders if name != 'val_dataloader']
    return loaders


def preflight(cfg, loop: str) -> None:
    """The checks before ``loop`` ('train', 'val' or 'test') starts: every dataset it reads fits the config,
    and (training) the pretrained weights are the right ones and exist. Raises a one-sentence ``UserError``."""
    from mmposmlp.engine.dataset_checks import check_datasets
    from mmposmlp.engine.preflight import check_pretrained
    check_datasets(cfg, loop_loaders(cfg, loop), cfg.get('default_scope'))
    if loop == 'train':
        check_pretrained(cfg)


@contextlib.contextmanager
def explained_unknown_types():
    """mmengine's ``KeyError`` for an unknown ``type`` becomes :class:`UnknownTypeError` (a ``KeyError`` too)
    naming the closest registered names, e.g. ``mmposmlp.PosMLP`` for ``type='PosMLP'``."""
    from mmposmlp.registry import unknown_type_in, unknown_type_message
    try:
        yield
    except UnknownTypeError:
        raise
    except KeyError as exc:
        unknown = unknown_type_in(exc)
        if unknown is None:
            raise
        raise UnknownTypeError(unknown_type_message(*unknown)) from exc


@RUNNERS.register_module()
class Runner(MMEngineRunner):
    """mmengine's Runner with exact resume, atomic plain-data checkpoints, data-only loading and pre-flight
    checks (see the module docstring). Takes exactly mmengine's arguments."""

    @classmethod
    def from_cfg(cls, cfg) -> 'Runner':
        from mmposmlp.engine.dataset_checks import add_video_decode_guard
        from mmposmlp.engine.preflight import check_model_level_pretrained
        check_model_level_pretrained(cfg)  # the library would pass it to our backbone while building the model
        cfg = copy.deepcopy(cfg)
        add_plugin_hooks(cfg)
        add_video_decode_guard(cfg, [name for names in LOOP_LOADERS.values() for name in names])
        with explained_unknown_types():
            return super().from_cfg(cfg)

    def __init__(self, *args, **kwargs):
        from mmposmlp.models.official_weights import register_official_classifiers
        from mmposmlp.utils.safe_load import register_mmengine_loaders
        register_mmengine_loaders()
        register_official_classifiers()
        #: loops whose pre-flight checks already ran (our tools run them before building the runner)
        self.preflight_done = set()
        #: the checkpoint :meth:`resume` is reading, else None
        self.resuming_from = None
        #: the loops built so far, by kind ('train', 'val', 'test'); hooks read which loops this run has
        self.built_loops = {}
        with explained_unknown_types():
            super().__init__(*args, **kwargs)

    # ---- loops: built, recorded; pre-flight checks first -------------------------------------------------
    def _before_loop(self, loop: str) -> None:
        if loop not in self.preflight_done:
            preflight(self.cfg, loop)
            self.preflight_done.add(loop)

    def build_train_loop(self, loop):
        """mmengine's ``build_train_loop``, with mmengine's ``EpochBasedTrainLoop`` (named by ``type`` or by
        ``by_epoch=True``, as the library base configs write it) built as
        :class:`~mmposmlp.engine.loops.ExactEpochBasedTrainLoop`, which resumes a mid-epoch checkpoint at its
        batch; configs keep mmengine's name. Any other loop is built as mmengine builds it."""
        if isinstance(loop, dict):
            loop = exact_epoch_loop_cfg(loop)
        return self._record('train', super().build_train_loop(loop))

    def build_val_loop(self, loop):
        """mmengine's ``build_val_loop``; the loop is recorded in :attr:`built_loops`."""
        return self._record('val', super().build_val_loop(loop))

    def build_test_loop(self, loop):
        """mmengine's ``build_test_loop``; the loop is recorded in :attr:`built_loops`."""
        return self._record('test', super().build_test_loop(loop))

    def _record(self, kind: str, loop):
        self.built_loops[kind] = loop
        return loop

    def train(self):
        self._before_loop('train')
        with explained_unknown_types():
            return super().train()

    def val(self):
        self._before_loop('val')
        with explained_unknown_types():
            return super().val()

    def test(self):
        self._before_loop('test')
        with explained_unknown_types():
            return super().test()

    # ---- checkpoints -------------------------------------------------------------------------------------
    @master_only  # as mmengine's: other ranks write nothing (and have no temporary file to rename)
    def save_checkpoint(self, out_dir, filename, file_client_args=None, save_optimizer=True,
                        save_param_scheduler=True, meta=None, by_epoch=True, backend_args=None):
        """mmengine's ``save_checkpoint``, written to ``<filename>.tmp`` and renamed when complete (local files;
        remote backends keep their own semantics). The file holds plain data (see :meth:`call_hook`)."""
        from mmposmlp.engine.checkpoint import atomic_file
        args = dict(file_client_args=file_client_args, save_optimizer=save_optimizer,
                    save_param_scheduler=save_param_scheduler, meta=meta, by_epoch=by_epoch,
                    backend_args=backend_args)
        local = file_client_args is None and (backend_args or {}).get('backend', 'local') == 'local'
        if not local or '://' in str(out_dir):
            return super().save_checkpoint(out_dir, filename, **args)
        with atomic_file(osp.join(out_dir, filename)) as tmp:
            super().save_checkpoint(out_dir, osp.basename(tmp), **args)

    def resume(self, filename, resume_optimizer=True, resume_param_scheduler=True, map_location='default'):
        """mmengine's ``resume``; the loaded checkpoint is checked and made data-only first (:meth:`call_hook`)."""
        from mmposmlp.utils.safe_load import keep_config_text
        self.resuming_from = filename
        try:
            with keep_config_text():  # read as data below (the GPU count), then removed
                return super().resume(filename, resume_optimizer, resume_param_scheduler, map_location)
        finally:
            self.resuming_from = None

    def call_hook(self, fn_name: str, **kwargs) -> None:
        """mmengine's ``call_hook``, plus what checkpoints need around the hooks: a checkpoint being resumed is
        checked and its config text taken out before any hook sees it; a checkpoint about to be saved becomes
        plain data after every hook has added to it (it loads with ``torch.load(weights_only=True)``)."""
        if fn_name == 'after_load_checkpoint' and self.resuming_from is not None:
            self._prepare_resume(kwargs['checkpoint'])
        super().call_hook(fn_name, **kwargs)
        if fn_name == 'before_save_checkpoint':
            from mmposmlp.engine.checkpoint import make_plain
            make_plain(kwargs['checkpoint'])

    def _prepare_resume(self, checkpoint: dict) -> None:
        """In place: refuse a checkpoint of another model or GPU count; take out the config text (mmengine would
        execute it) and rebuild the message hub's history buffers."""
        from mmposmlp.engine.checkpoint import (check_resume_compatible, check_resume_gpu_count,
                                                prepare_resume_checkpoint)
        filename = self.resuming_from
        prepared, config_text = prepare_resume_checkpoint(checkpoint, filename)
        check_resume_compatible(self.model, prepared, filename)
        check_resume_gpu_count(config_text, self.world_size, filename, self.auto_scale_lr)
        checkpoint.clear()  # mmengine's resume goes on with this very dict
        checkpoint.update(prepared)
