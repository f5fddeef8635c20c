"""Official checkpoints and official options -> ours, one module per backbone family.

Each module has one ``checkpoint_filter_fn`` (the backbone's ``init_cfg`` loading calls it; the scripts
of ``tools/model_converters/`` call the same functions) and maps the official constructor or config
options. The modules import layers and loading helpers, never the backbones, so a backbone imports its
converter without a circle.
"""
from . import cpvt, gmlp, lvt, official_options, posmlp, posmlp_video, pvt_peg, wave_mlp  # noqa: F401
