"""mmposmlp: PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab.

Importing this package is light: it checks the versions of torch/mmengine/mmcv and
imports nothing from mmdet, mmseg, mmaction or mmpretrain. It arranges two things for when
those are imported: mmengine resolves ``_base_ = 'mmposmlp::...'`` and mmpretrain's model hub
lists our classification models (``mmpretrain.list_models('*posmlp*')``).
"""
from .utils.env import check_dependencies
from .utils.import_hooks import install_config_package_hook, when_imported
from .utils.model_hub import register_classification_models
from .version import __version__, version_info

check_dependencies()
install_config_package_hook()
when_imported('mmpretrain.apis.model', register_classification_models)

__all__ = ['__version__', 'version_info', 'check_dependencies']
