"""mmposmlp: PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab.

Importing this package is light: it checks the versions of torch/mmengine/mmcv and imports nothing from mmdet,
mmseg, mmaction or mmpretrain. It changes nothing of mmengine beyond what registries hold: mmengine's table of
config packages gets ``mmposmlp`` (so ``_base_ = 'mmposmlp::...'`` resolves), and mmpretrain's model hub gets our
classification models if mmpretrain is already imported (an installed mmposmlp adds both when mmengine and
mmpretrain are imported, see :mod:`mmposmlp.utils.import_hooks`). Training behaviour (exact resume, atomic
checkpoints, data-only checkpoint loading, pre-flight checks) comes with ``runner_type = 'mmposmlp.Runner'``.
"""
import importlib
import sys

from .utils.env import check_dependencies
from .utils.import_hooks import CONFIG_MODULE, HUB_MODULE, register_config_packages
from .utils.model_hub import register_classification_models
from .version import __version__, version_info

check_dependencies()
register_config_packages(importlib.import_module(CONFIG_MODULE))
if HUB_MODULE in sys.modules:
    register_classification_models(sys.modules[HUB_MODULE])

__all__ = ['__version__', 'version_info', 'check_dependencies']
