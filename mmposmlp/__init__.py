"""mmposmlp: PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab.

Importing this package is light: it checks the versions of torch/mmengine/mmcv and
imports nothing from mmdet, mmseg, mmaction or mmpretrain. It makes mmengine's CheckpointLoader read
local and http(s) checkpoints as data (mmposmlp.utils.safe_load), so stock OpenMMLab APIs load
mmengine checkpoints under torch >= 2.6 without any global unpickling switch.
"""
from .utils.env import check_dependencies
from .utils.safe_load import register_mmengine_loaders
from .version import __version__, version_info

check_dependencies()
register_mmengine_loaders()

__all__ = ['__version__', 'version_info', 'check_dependencies']
