"""The weight EMA of timm's trainers (``timm.utils.ModelEma`` / ``ModelEmaV2``) as an mmengine hook."""
from mmengine.hooks import EMAHook
from mmengine.model import ExponentialMovingAverage

from mmposmlp.registry import HOOKS, MODELS


@MODELS.register_module()
class TimmModelEMA(ExponentialMovingAverage):
    """``ema = decay * ema + (1 - decay) * model`` over every state entry, from the first step on.

    timm's ``ModelEma`` (used by the official PosMLP and Wave-MLP trainers, ``--model-ema``) differs
    from mmengine's :class:`ExponentialMovingAverage` in two ways, both reproduced here:

    * the average starts from the weights *before* the first optimizer step (mmengine copies the
      weights after the first step instead of averaging them in);
    * buffers (BatchNorm running statistics) are averaged like parameters (mmengine copies them
      unless ``update_buffers=True``); integer buffers get timm's truncated average.

    ``momentum`` is ``1 - decay`` as in mmengine (decay 0.99996 -> momentum 4e-5).
    """

    def __init__(self, model, momentum: float = 0.0002, interval: int = 1, device=None,
                 update_buffers: bool = True):
        if not update_buffers:
            raise ValueError('TimmModelEMA averages buffers like timm ModelEma; update_buffers=False is not '
                             'timm behaviour: use mmengine ExponentialMovingAverage for that.')
        if interval != 1:
            raise ValueError(f'TimmModelEMA updates after every step like timm ModelEma, got interval={interval}.')
        super().__init__(model, momentum=momentum, interval=1, device=device, update_buffers=True)

    def update_parameters(self, model) -> None:
        decay = 1. - self.momentum
        src = model.state_dict()
        for k, ema_v in self.avg_parameters.items():
            model_v = src[k].detach().to(ema_v.device)
            ema_v.copy_(ema_v * decay + (1. - decay) * model_v)
        self.steps += 1

    def reset_to(self, model) -> None:
        """Restart the average from ``model``'s current state (timm creates its EMA from the trained-from weights)."""
        src = model.state_dict()
        for k, ema_v in self.avg_parameters.items():
            ema_v.copy_(src[k].detach())


@HOOKS.register_module()
class TimmEMAHook(EMAHook):
    """:class:`EMAHook` with :class:`TimmModelEMA`: the EMA of the official timm trainers.

    mmengine builds the EMA copy in ``before_run``, before the weights are initialised or loaded, so the
    average is restarted from the model in ``before_train`` unless a checkpoint restored it (resume).
    Validation and checkpoints use the EMA weights as with :class:`EMAHook`.
    ``custom_hooks = [dict(type='mmposmlp.TimmEMAHook', momentum=1 - decay, priority='ABOVE_NORMAL')]``.
    """

    def __init__(self, momentum: float = 0.0002, **kwargs):
        for key in ('ema_type', 'update_buffers', 'interval'):
            if key in kwargs:
                raise TypeError(f'TimmEMAHook fixes {key} to timm ModelEma behaviour; remove {key}= or use '
                                'mmengine EMAHook.')
        super().__init__(ema_type='mmposmlp.TimmModelEMA', momentum=momentum, **kwargs)

    def before_train(self, runner) -> None:
        super().before_train(runner)
        if int(self.ema_model.steps) == 0:
            self.ema_model.reset_to(self.src_model)
