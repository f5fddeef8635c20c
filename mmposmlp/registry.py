"""mmposmlp's own registries (scope ``mmposmlp``), children of mmengine's roots.

Any downstream config (default scope mmdet, mmseg, mmaction or mmpretrain) builds our
modules as ``type='mmposmlp.X'``: mmengine imports ``mmposmlp.registry`` and then the
``locations`` below on first use, so not even ``custom_imports`` is required.
"""
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import Registry

MODELS = Registry('model', parent=MMENGINE_MODELS, scope='mmposmlp',
                  locations=['mmposmlp.models'])
TRANSFORMS = Registry('transform', parent=MMENGINE_TRANSFORMS, scope='mmposmlp',
                      locations=['mmposmlp.datasets'])
DATASETS = Registry('dataset', parent=MMENGINE_DATASETS, scope='mmposmlp',
                    locations=['mmposmlp.datasets'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope='mmposmlp',
                 locations=['mmposmlp.engine'])
PARAM_SCHEDULERS = Registry('parameter scheduler', parent=MMENGINE_PARAM_SCHEDULERS, scope='mmposmlp',
                            locations=['mmposmlp.engine'])
