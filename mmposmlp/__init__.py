"""mmposmlp: PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab.

Importing this package is light: it checks the versions of torch/mmengine/mmcv and
imports nothing from mmdet, mmseg, mmaction or mmpretrain. It arranges three things:
mmengine resolves ``_base_ = 'mmposmlp::...'``; mmpretrain's model hub lists our
classification models once mmpretrain is imported (``mmpretrain.list_models('*posmlp*')``);
and mmengine's CheckpointLoader reads local and http(s) checkpoints as data
(mmposmlp.utils.safe_load), so stock OpenMMLab APIs load mmengine checkpoints under
torch >= 2.6 without any global unpickling switch.
"""
from .utils.env import check_dependencies
from .utils.import_hooks import install_config_package_hook, when_imported
from .utils.model_hub import register_classification_models
from .utils.safe_load import register_mmengine_loaders
from .version import __version__, version_info

check_dependencies()
install_config_package_hook()
register_mmengine_loaders()
when_imported('mmpretrain.apis.model', register_classification_models)

__all__ = ['__version__', 'version_info', 'check_dependencies']
