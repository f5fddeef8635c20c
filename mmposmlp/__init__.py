"""mmposmlp: PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab.

Importing this package is light: it checks the versions of torch/mmengine/mmcv and
imports nothing from mmdet, mmseg, mmaction or mmpretrain.
"""
from .utils.env import check_dependencies
from .version import __version__, version_info

check_dependencies()

__all__ = ['__version__', 'version_info', 'check_dependencies']
