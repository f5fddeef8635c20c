"""Training-loop additions used by our tools: atomic checkpoints, safe resume."""
from .hooks import SaveRankWeightsHook  # noqa: F401
from .schedulers import (SlowFastCosineLR, SlowFastCosineParamScheduler, TimmCosineLR,
                         TimmCosineParamScheduler)
from .ema import TimmEMAHook, TimmModelEMA
from .checkpoint import (AtomicCheckpointHook, CheckpointMismatchError, check_resume_compatible,
                         find_last_complete_checkpoint, patch_atomic_checkpoints, patch_resume_check)

__all__ = ['AtomicCheckpointHook', 'CheckpointMismatchError', 'check_resume_compatible',
           'find_last_complete_checkpoint', 'patch_atomic_checkpoints', 'patch_resume_check',
           'TimmCosineLR', 'TimmCosineParamScheduler', 'TimmEMAHook', 'TimmModelEMA',
           'SlowFastCosineLR', 'SlowFastCosineParamScheduler']
