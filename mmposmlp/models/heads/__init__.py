"""Heads with their own losses."""
from . import deit_distillation  # noqa: F401  (registers DeiTDistillationHead; mmpretrain on first use)
from .lvt_head import LVTClassAttentionHead  # noqa: F401
