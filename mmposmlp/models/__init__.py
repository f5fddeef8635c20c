"""Importing this registers every mmposmlp model in ``mmposmlp.registry.MODELS``."""
from . import backbones, classifiers, heads, layers  # noqa: F401
from .backbones import *  # noqa: F401,F403
from .heads import *  # noqa: F401,F403
from .checkpoints import load_pretrained, load_state_dict_checked  # noqa: F401
from .layers import *  # noqa: F401,F403
