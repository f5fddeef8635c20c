from .env import check_dependencies, check_mmcv_ops

__all__ = ['check_dependencies', 'check_mmcv_ops']
