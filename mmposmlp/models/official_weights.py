"""Official whole-model files read converted by mmengine's ``CheckpointLoader``.

The classification configs that are the official models name the official file as their metafile ``Weights``
(``mim download`` fetches it); files without a direct URL are saved by hand under their official name. Once
:func:`register_official_classifiers` ran (our Runner and tools call it where they register the data-only
loaders, never on import), ``load_from`` / ``tools/test.py CONFIG <file>`` read those files as data and
converted to our keys: the URLs downloaded once into torch's hub cache and hash-checked
(:mod:`mmposmlp.utils.download`), the official names from the local path.
"""
import os.path as osp
import re
from typing import Callable, Dict

import torch

from mmposmlp.models.converters.posmlp import convert_official_posmlp
from mmposmlp.models.converters.posmlp_video import convert_official_posmlp_video
from mmposmlp.models.converters.pvt_peg import convert_pcpvt, convert_pcpvt_head
from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp
from mmposmlp.models.checkpoints import PretrainedDownloadError, load_checkpoint_file, strip_prefix


def _whole_wavemlp(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return convert_official_wavemlp(state)


def _whole_pcpvt(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    head = {k: v for k, v in state.items() if k.startswith('head.')}
    backbone = strip_prefix({k: v for k, v in state.items() if not k.startswith('head.')}, None)
    return {**{'backbone.' + k: v for k, v in convert_pcpvt(backbone).items()},
            **{'head.' + k: v for k, v in convert_pcpvt_head(head).items()}}


def _whole_posmlp(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {('head.fc.' + k[len('head.'):] if k.startswith('head.') else 'backbone.' + k): v
            for k, v in convert_official_posmlp(state).items()}


def _whole_posmlp_video(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {('cls_head.fc_cls.' + k[len('head.'):] if k.startswith('head.') else 'backbone.' + k): v
            for k, v in convert_official_posmlp_video(state).items()}


#: official files with no direct URL, read converted by mmengine's ``CheckpointLoader`` when a path ends in
#: their official name (``load_from``, ``tools/test.py CONFIG checkpoints/SSV1_S16.pyth``,
#: ``get_model(..., pretrained='checkpoints/PosMLP_T.pth')``): file name -> conversion to our whole-model keys
#: (mmpretrain ``ImageClassifier``, mmaction2 ``Recognizer3D``).
OFFICIAL_BY_NAME = {'PosMLP_T.pth': _whole_posmlp, 'SSV1_S16.pyth': _whole_posmlp_video}


def register_official_file_name(name: str, convert: Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]):
    """Make mmengine's ``CheckpointLoader`` read a local path ending in ``/<name>`` (or ``name`` itself)
    converted by ``convert``, as data (``CheckpointLoader.register_scheme`` with a pattern of that name)."""
    from mmengine.runner.checkpoint import CheckpointLoader

    def load(filename, map_location=None):
        return {'state_dict': convert(load_checkpoint_file(osp.expanduser(filename),
                                                           map_location=map_location or 'cpu'))}

    CheckpointLoader.register_scheme(prefixes=r'(?!https?://)(.*/)?' + re.escape(name) + '$', loader=load,
                                     force=True)


#: the official classifier files that are the ``Weights:`` of our metafiles (the classification configs that
#: are the official models), by file name -> the conversion of the whole file to the config's mmpretrain
#: ``ImageClassifier`` keys. Their URLs are read converted by mmengine's ``CheckpointLoader`` (mmpretrain's
#: ``get_model(..., pretrained=True)``, ``load_from=<URL>``), see :func:`register_official_classifier`.
OFFICIAL_CLASSIFIERS = {
    'WaveMLP_T.pth.tar': _whole_wavemlp, 'WaveMLP_T_dw.pth.tar': _whole_wavemlp, 'WaveMLP_S.pth.tar': _whole_wavemlp,
    'WaveMLP_M.pth.tar': _whole_wavemlp,
    'twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth': _whole_pcpvt,
    'twins-pcpvt-base_3rdparty_8xb128_in1k_20220126-f8c4b0d5.pth': _whole_pcpvt,
}


def register_official_classifier(url: str, convert: Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]):
    """Make mmengine's ``CheckpointLoader`` read ``url`` as our ``ImageClassifier`` checkpoint: downloaded once
    and hash-checked (:func:`mmposmlp.utils.download.fetch`), read as data, converted by ``convert``. Registered
    under the URL itself (``CheckpointLoader.register_scheme``; longer prefixes win), so other http(s) files
    keep their loader."""
    from mmengine.runner.checkpoint import CheckpointLoader

    def load(filename, map_location=None):
        def read(path):
            return {'state_dict': convert(load_checkpoint_file(path, map_location=map_location or 'cpu',
                                                               source=filename))}

        from mmposmlp.utils.download import DownloadError, fetch
        try:
            return fetch(filename, read)
        except DownloadError as e:
            raise PretrainedDownloadError(str(e)) from None

    CheckpointLoader.register_scheme(prefixes=re.escape(url), loader=load, force=True)


def register_official_classifiers() -> None:
    """:func:`register_official_classifier` for each URL of :data:`OFFICIAL_CLASSIFIERS` and
    :func:`register_official_file_name` for each name of :data:`OFFICIAL_BY_NAME` (idempotent). Called where
    the data-only loaders are registered (our Runner and tools), never on import."""
    from mmposmlp.utils.pretrained import OFFICIAL
    for name, convert in OFFICIAL_CLASSIFIERS.items():
        register_official_classifier(OFFICIAL[name][0], convert)
    for name, convert in OFFICIAL_BY_NAME.items():
        register_official_file_name(name, convert)
