from . import distillation  # noqa: F401  (registers DistillationClassifier, DeiTDistillationHead; mmpretrain on first use)
