from .posmlp import PosMLP  # noqa: F401
from .wrappers import SingleTensorBackbone  # noqa: F401
from .wave_mlp import WaveMLP  # noqa: F401
from .pvt_peg import PVTPEG, PVTMlp  # noqa: F401
from .cpvt import CPVT  # noqa: F401
from . import swin_peg  # noqa: F401  (registers SwinPEG; mmpretrain on first use)
from .imlp_variants import ADAPTERS as IMLP_ADAPTERS  # noqa: F401
from .posmlp_video import PosMLPVideo  # noqa: F401
from .gmlp import GMLP  # noqa: F401
from .lvt import LVT  # noqa: F401
