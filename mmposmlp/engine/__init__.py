"""Training-loop additions used by our tools: atomic checkpoints, safe resume."""
from .hooks import RankWatchdogHook, SaveRankWeightsHook  # noqa: F401
from .resume_state import ExactResumeHook, ResumeStateError, add_exact_resume_hook  # noqa: F401
from .schedulers import (SlowFastCosineLR, SlowFastCosineParamScheduler, TimmCosineLR,  # noqa: F401
                         TimmCosineParamScheduler)
from .ema import TimmEMAHook, TimmModelEMA  # noqa: F401
from .preemption import PREEMPTED_EXIT_CODE, PreemptionHook  # noqa: F401
from .dataset_checks import NameUndecodableVideosHook  # noqa: F401
from .checkpoint import (AtomicCheckpointHook, CheckpointMismatchError, check_resume_compatible,
                         find_last_complete_checkpoint, patch_atomic_checkpoints, patch_resume_check)

__all__ = ['AtomicCheckpointHook', 'CheckpointMismatchError', 'check_resume_compatible',
           'find_last_complete_checkpoint', 'patch_atomic_checkpoints', 'patch_resume_check',
           'TimmCosineLR', 'TimmCosineParamScheduler', 'TimmEMAHook', 'TimmModelEMA',
           'SlowFastCosineLR', 'SlowFastCosineParamScheduler']
