from .export_mode import ExportModeMixin, export_mode, set_export_mode  # noqa: F401
from .gating import GATE_TYPES, PositionalGatingUnit  # noqa: F401
from .windows import WindowLayout, window_partition, window_reverse  # noqa: F401
from .patm import PATM, WaveMLPFFN  # noqa: F401
from .peg import PEG  # noqa: F401
from .imlp import IMLP, AGeLU, ASoftPlus, ActivationSum, AdaptiveActivation  # noqa: F401
from .norms import LayerNorm2d  # noqa: F401
from .position_encoding import AbsolutePositionEmbedding, RelativePositionEncoding2d  # noqa: F401
