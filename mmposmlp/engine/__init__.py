"""mmengine extension points of mmposmlp: the Runner (``runner_type='mmposmlp.Runner'``), hooks and schedulers."""
from .hooks import RankWatchdogHook, SaveRankWeightsHook  # noqa: F401
from .resume_state import ExactResumeHook, ResumeStateError  # noqa: F401
from .schedulers import (SlowFastCosineLR, SlowFastCosineParamScheduler, TimmCosineLR,  # noqa: F401
                         TimmCosineParamScheduler)
from .ema import TimmEMAHook, TimmModelEMA  # noqa: F401
from .dataset_checks import NameUndecodableVideosHook  # noqa: F401
from .unused_outputs import UnusedOutputsHook  # noqa: F401
from .consumer_checks import ConsumerCheckHook  # noqa: F401
from .checkpoint import (AtomicCheckpointHook, CheckpointMismatchError, check_resume_compatible,
                         find_last_complete_checkpoint)
from .runner import PLUGIN_HOOKS, Runner

__all__ = ['AtomicCheckpointHook', 'CheckpointMismatchError', 'check_resume_compatible',
           'find_last_complete_checkpoint', 'PLUGIN_HOOKS', 'Runner',
           'TimmCosineLR', 'TimmCosineParamScheduler', 'TimmEMAHook', 'TimmModelEMA',
           'SlowFastCosineLR', 'SlowFastCosineParamScheduler']
