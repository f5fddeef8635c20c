"""A config's ``param_scheduler`` built and stepped as mmengine's runner does (shared by the recipe-parity tests)."""
import copy


def build_param_schedulers(cfg, optim_wrapper, epoch_length, scope):
    """The schedulers of ``cfg.param_scheduler``; ``convert_to_iter_based`` ones with ``epoch_length`` iterations."""
    from mmengine.registry import PARAM_SCHEDULERS, DefaultScope
    out = []
    with DefaultScope.overwrite_default_scope(scope):
        for s in copy.deepcopy(cfg.param_scheduler):
            if s.pop('convert_to_iter_based', False):
                cls = PARAM_SCHEDULERS.get(s.pop('type'))
                out.append(cls.build_iter_from_epoch(optim_wrapper, epoch_length=epoch_length, **s))
            else:
                out.append(PARAM_SCHEDULERS.build(dict(s, optimizer=optim_wrapper)))
    return out


def step_param_schedulers(schedulers, it, epoch_length):
    """mmengine's ``ParamSchedulerHook`` after iteration ``it`` (0-based): iteration-based ones every iteration,
    epoch-based ones at the end of each epoch."""
    for s in schedulers:
        if not s.by_epoch:
            s.step()
    if (it + 1) % epoch_length == 0:
        for s in schedulers:
            if s.by_epoch:
                s.step()
