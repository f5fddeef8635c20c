from . import distillation  # noqa: F401  (registers DistillationClassifier; mmpretrain on first use)
