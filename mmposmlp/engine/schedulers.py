"""Learning-rate schedules of the official training scripts, as mmengine parameter schedulers."""
import math

from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler

from mmposmlp.registry import PARAM_SCHEDULERS


class TimmCosineParamScheduler(_ParamScheduler):
    r"""timm's ``CosineLRScheduler`` (one cycle) in closed form.

    The schedule of the official PosMLP, Wave-MLP, CPVT/Twins (DeiT ``main.py``), DeiT and PoolFormer
    trainers, all built by ``timm.scheduler.create_scheduler`` from their ``--sched cosine`` arguments:

    .. math::
        \eta_t = \begin{cases}
            \eta_{warmup} + t\,(\eta_{max} - \eta_{warmup}) / T_{warmup}, & t < T_{warmup} \\
            \eta_{min} + \tfrac12(\eta_{max} - \eta_{min})(1 + \cos(\pi t / T)), & T_{warmup} \le t < T \\
            \eta_{min}, & t \ge T \ (\text{timm's cool-down epochs})
        \end{cases}

    Unlike ``LinearLR`` followed by ``CosineAnnealingLR(begin=T_warmup)``, the cosine phase counts
    from step 0, not from the end of the warm-up: at ``t = T_warmup`` the value is already
    :math:`\eta_{min} + \frac12(\eta_{max}-\eta_{min})(1+\cos(\pi T_{warmup}/T))`. The official
    trainers step it once per epoch (``t_in_epochs=True``), so ``by_epoch=True`` without
    ``convert_to_iter_based`` reproduces them.

    With ``warmup_prefix=True`` (timm's ``warmup_prefix``, the official Swin trainer's default
    ``WARMUP_PREFIX``) the cosine starts at the end of the warm-up instead and lasts
    ``T - T_warmup``: :math:`\eta_{min} + \tfrac12(\eta_{max}-\eta_{min})(1+\cos(\pi (t - T_{warmup})
    / (T - T_{warmup})))`. Swin steps per iteration (``t_in_epochs=False``): use ``by_epoch=True`` with
    ``convert_to_iter_based=True`` and epochs for ``T_max`` / ``warmup_steps``. Swin's loop also calls
    ``step_update(g)`` after step ``g``, so step ``g`` runs with the value for ``g - 1`` (steps 0 and 1 both
    with the warm-up start): ``lag=1`` reproduces that.

    Args:
        T_max (int): timm's ``t_initial`` (``--epochs``), the length of the cosine.
        eta_min (float): timm's ``lr_min`` (``--min-lr``), the same for every parameter group.
        warmup_steps (int): timm's ``warmup_t`` (``--warmup-epochs``).
        warmup_value (float): timm's ``warmup_lr_init`` (``--warmup-lr``).
        warmup_prefix (bool): timm's ``warmup_prefix``: the cosine follows the warm-up. Default False.
        lag (int): step ``t`` uses the value of step ``max(t - lag, 0)`` (in scheduler steps, i.e.
            iterations when iteration based). Default 0.
    """

    def __init__(self, optimizer, param_name: str, T_max: int, eta_min: float = 0.,
                 warmup_steps: int = 0, warmup_value: float = 0., warmup_prefix: bool = False, lag: int = 0,
                 begin: int = 0, end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        if T_max <= 0 or warmup_steps < 0 or lag < 0 or (warmup_prefix and warmup_steps >= T_max):
            raise ValueError(f'TimmCosineLR needs T_max > 0, lag >= 0 and warmup_steps >= 0 (and < T_max '
                             f'with warmup_prefix), got T_max={T_max}, warmup_steps={warmup_steps} and '
                             f'lag={lag}; pass the official --epochs and --warmup-epochs.')
        if begin != 0:
            raise ValueError(f'TimmCosineLR counts its cosine from step 0 (timm), so begin must be 0, got '
                             f'{begin}; use warmup_steps for the warm-up instead of a separate scheduler.')
        self.T_max = T_max
        self.eta_min = eta_min
        self.warmup_steps = warmup_steps
        self.warmup_value = warmup_value
        self.warmup_prefix = warmup_prefix
        self.lag = lag
        super().__init__(optimizer, param_name=param_name, begin=begin, end=end, last_step=last_step,
                         by_epoch=by_epoch, verbose=verbose)

    @classmethod
    def build_iter_from_epoch(cls, *args, T_max, warmup_steps=0, begin=0, end=INF, by_epoch=True,
                              epoch_length=None, **kwargs):
        """Iteration-based variant (timm's ``sched_on_updates``); the official recipes step per epoch."""
        assert by_epoch and epoch_length, 'convert_to_iter_based needs an epoch-based config and epoch_length'
        return cls(*args, T_max=T_max * epoch_length, warmup_steps=warmup_steps * epoch_length,
                   begin=begin, end=end if end == INF else end * epoch_length, by_epoch=False, **kwargs)

    def _get_value(self):
        t = max(self.last_step - self.lag, 0)
        if t < self.warmup_steps:
            return [self.warmup_value + t * (base - self.warmup_value) / self.warmup_steps
                    for base in self.base_values]
        if self.warmup_prefix:
            t, length = t - self.warmup_steps, self.T_max - self.warmup_steps
        else:
            length = self.T_max
        if t >= length:
            return [self.eta_min for _ in self.base_values]
        cos = 1 + math.cos(math.pi * t / length)
        return [self.eta_min + 0.5 * (base - self.eta_min) * cos for base in self.base_values]


@PARAM_SCHEDULERS.register_module()
class TimmCosineLR(LRSchedulerMixin, TimmCosineParamScheduler):
    """:class:`TimmCosineParamScheduler` for the learning rate (``type='mmposmlp.TimmCosineLR'``)."""


class SlowFastCosineParamScheduler(_ParamScheduler):
    r"""PySlowFast's ``lr_policy`` ``cosine`` with linear warm-up, evaluated at the fractional epoch.

    PySlowFast (the PosMLP-Video trainer) sets the lr before every iteration ``i`` of epoch ``e`` to
    :math:`f(e + i / L)` with

    .. math::
        f(t) = \begin{cases}
            \eta_{warmup} + t\,(c(T_{warmup}) - \eta_{warmup}) / T_{warmup}, & t < T_{warmup} \\
            c(t) = \eta_{min} + \tfrac12(\eta_{max} - \eta_{min})(1 + \cos(\pi (t - o) / (T - o))), & t \ge T_{warmup}
        \end{cases}

    where ``o = T_warmup`` with ``COSINE_AFTER_WARMUP`` (else 0). mmengine's ``LinearLR`` reaches the full
    lr one iteration before its ``end`` (it divides by ``end - begin - 1``); this scheduler does not. Use it
    epoch-based with ``convert_to_iter_based=True`` (the iteration count per epoch gives ``L``).

    Args:
        T_max (float): ``SOLVER.MAX_EPOCH``.
        eta_min (float): ``SOLVER.COSINE_END_LR``.
        warmup_steps (float): ``SOLVER.WARMUP_EPOCHS``.
        warmup_value (float): ``SOLVER.WARMUP_START_LR``.
        cosine_after_warmup (bool): ``SOLVER.COSINE_AFTER_WARMUP``.
    """

    def __init__(self, optimizer, param_name: str, T_max: float, eta_min: float = 0., warmup_steps: float = 0.,
                 warmup_value: float = 0., cosine_after_warmup: bool = True, begin: int = 0, end: int = INF,
                 last_step: int = -1, by_epoch: bool = True, verbose: bool = False, steps_per_epoch: int = 1):
        if begin != 0:
            raise ValueError(f'SlowFastCosineLR evaluates the schedule from epoch 0, so begin must be 0, got {begin}.')
        self.T_max, self.eta_min = T_max, eta_min
        self.warmup_steps, self.warmup_value = warmup_steps, warmup_value
        self.cosine_after_warmup = cosine_after_warmup
        self.steps_per_epoch = steps_per_epoch
        super().__init__(optimizer, param_name=param_name, begin=begin, end=end, last_step=last_step,
                         by_epoch=by_epoch, verbose=verbose)

    @classmethod
    def build_iter_from_epoch(cls, *args, begin=0, end=INF, by_epoch=True, epoch_length=None, **kwargs):
        assert by_epoch and epoch_length, 'convert_to_iter_based needs an epoch-based config and epoch_length'
        return cls(*args, begin=begin, end=end if end == INF else end * epoch_length, by_epoch=False,
                   steps_per_epoch=epoch_length, **kwargs)

    def _cosine(self, base, t):
        off = self.warmup_steps if self.cosine_after_warmup else 0.
        return self.eta_min + (base - self.eta_min) * (math.cos(math.pi * (t - off) / (self.T_max - off)) + 1.) * 0.5

    def _get_value(self):
        t = self.last_step / self.steps_per_epoch
        out = []
        for base in self.base_values:
            if t < self.warmup_steps:
                end = self._cosine(base, self.warmup_steps)
                out.append(t * (end - self.warmup_value) / self.warmup_steps + self.warmup_value)
            else:
                out.append(self._cosine(base, t))
        return out


@PARAM_SCHEDULERS.register_module()
class SlowFastCosineLR(LRSchedulerMixin, SlowFastCosineParamScheduler):
    """:class:`SlowFastCosineParamScheduler` for the learning rate (``type='mmposmlp.SlowFastCosineLR'``)."""
