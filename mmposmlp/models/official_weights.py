"""Official whole-model files read converted by mmengine's ``CheckpointLoader``.

The classification configs that are the official models name the official file as their metafile ``Weights``
(``mim download`` fetches it); files without a direct URL are saved by hand under their official name. Once
:func:`register_official_classifiers` ran (our Runner and tools call it where they register the data-only
loaders, never on import), ``load_from``, ``tools/test.py CONFIG <file>`` and mmpretrain's
``get_model(<name>, pretrained=...)`` read those files as data and converted to our keys:

* a URL whose file name is an official classifier's (the published URL, a mirror, ``get_model``'s
  ``url_mapping``): downloaded once into torch's hub cache and hash-checked (:mod:`mmposmlp.utils.download`);
* a local file, whatever it is called, whose keys are an official layout (:data:`OFFICIAL_LAYOUTS`, the
  converters' knowledge of each release), or whose name is an official file's; a file under an official
  name that holds neither that release's weights nor a converted checkpoint is refused in one sentence.
  Any other file is read as it is (data only), as the data-only loaders read it.
"""
import re
from typing import Callable, Dict, Optional

import torch

from mmposmlp.models.converters.posmlp import convert_official_posmlp
from mmposmlp.models.converters.posmlp_video import convert_official_posmlp_video
from mmposmlp.models.converters.pvt_peg import convert_pcpvt, convert_pcpvt_head
from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp, is_official_wavemlp
from mmposmlp.models.checkpoints import (OTHER_MODEL_PARTS, STATE_DICT_KEYS, CheckpointMismatchError,
                                         PretrainedDownloadError, extract_state_dict, load_checkpoint_file,
                                         strip_prefix)
from mmposmlp.utils.pretrained import describe_official, file_name


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


#: official files with no direct URL, read converted when saved under their official name (``load_from``,
#: ``tools/test.py CONFIG checkpoints/SSV1_S16.pyth``, ``get_model(..., pretrained='checkpoints/PosMLP_T.pth')``):
#: file name -> conversion to our whole-model keys (mmpretrain ``ImageClassifier``, mmaction2 ``Recognizer3D``).
OFFICIAL_BY_NAME = {'PosMLP_T.pth': _whole_posmlp, 'SSV1_S16.pyth': _whole_posmlp_video}


def _root_keys(state: Dict[str, torch.Tensor], *markers: str) -> bool:
    """Keys of a bare official model (no ``backbone.`` part) with a key matching each regex of ``markers``."""
    return (not any(k.startswith('backbone.') for k in state)
            and all(any(re.match(m, k) for k in state) for m in markers))


#: the official whole-model layouts recognised by their keys, whatever the file is called: release ->
#: (test of a state dict, conversion to our whole-model keys). The markers are keys each family's
#: ``checkpoint_filter_fn`` converts from, down to the release's own layers (Wave-MLP's phase-aware token
#: mixing, the PosMLP gates), so no other model's file is taken for one (Twins as mmpretrain hosts it is
#: mmpretrain's own layout, which mmpretrain's PCPVT reads as it is: recognised by its official name only).
OFFICIAL_LAYOUTS = {
    'the official PosMLP (github.com/Zhicaiwww/PosMLP)': (
        lambda s: _root_keys(s, r'patch_embed\.projs\.', r'levels\.\d+\.encoder\.\d+\.gate_unit\.'),
        _whole_posmlp),
    'the official PosMLP-Video (github.com/zhouds1918/PosMLP_Video)': (
        lambda s: _root_keys(s, r'patch_embed1\.', r'blocks\d+\.\d+\.(t_)?fc\.encoder\.gate_unit\.'),
        _whole_posmlp_video),
    'the official Wave-MLP (github.com/huawei-noah/Efficient-AI-Backbones)': (
        lambda s: _root_keys(s, r'network\.\d+\.\d+\.attn\.fc_h\.', r'network\.\d+\.\d+\.attn\.tfc_h\.')
        and is_official_wavemlp(s), _whole_wavemlp),
}


def official_layout(state: Dict[str, torch.Tensor]) -> Optional[str]:
    """The release whose official whole-model layout ``state`` has (:data:`OFFICIAL_LAYOUTS`), or None."""
    return next((name for name, (test, _) in OFFICIAL_LAYOUTS.items() if test(state)), None)


def _is_whole_model(state: Dict[str, torch.Tensor]) -> bool:
    """Our (OpenMMLab) whole-model keys: ``backbone.*`` and the other model parts."""
    parts = ('backbone.', ) + tuple(p[:-1] for p in OTHER_MODEL_PARTS)
    return bool(state) and all(k.startswith(parts) for k in state)


def _peek(ckpt) -> Optional[Dict[str, torch.Tensor]]:
    """The weights of a loaded file as :func:`extract_state_dict` finds them, without choosing between trained
    and EMA weights (or logging): enough to recognise the layout; ``module.`` removed. None: no state dict."""
    if not isinstance(ckpt, dict):
        return None
    candidates = [ckpt.get(k) for k in STATE_DICT_KEYS] + [ckpt]
    state = next((c for c in candidates if isinstance(c, dict) and c and all(
        isinstance(v, torch.Tensor) for v in c.values())), None)
    return None if state is None else {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}


def official_conversion(ckpt, source: str) -> Optional[Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]]:
    """How the loaded file ``source`` converts to our whole-model keys: by its official layout, else by its
    official name; None for any other file. A file under an official name that holds neither that file's
    layout nor our whole-model keys is refused (:class:`CheckpointMismatchError`, one sentence)."""
    state = _peek(ckpt)
    layout = official_layout(state) if state else None
    if layout is not None:
        return OFFICIAL_LAYOUTS[layout][1]
    name = file_name(source)
    by_name = OFFICIAL_BY_NAME.get(name) or OFFICIAL_CLASSIFIERS.get(name)
    if by_name is None:
        return None
    if state and _is_whole_model(state):  # mmpretrain's own Twins layout converts; a converted copy is ours
        return by_name if name in OFFICIAL_CLASSIFIERS and by_name is _whole_pcpvt else None
    raise CheckpointMismatchError(
        f'{source} has the name of {describe_official(name) or name} but holds neither that file\'s weights '
        f'(its keys are {sorted(state)[:3] if state else "no state dict"}) nor converted whole-model weights '
        '(backbone.*); download the official file again or pass the right file.')


def load_from_local_file(filename: str, map_location=None):
    """mmengine ``CheckpointLoader`` scheme for local paths: the file read as data (the data-only loaders'
    :func:`~mmposmlp.utils.safe_load.load_local_checkpoint`, stored config text dropped), converted to our
    whole-model keys when it is an official file (:func:`official_conversion`)."""
    from mmposmlp.utils.safe_load import load_local_checkpoint
    ckpt = load_local_checkpoint(filename, map_location or 'cpu')
    convert = official_conversion(ckpt, filename)
    if convert is None:
        return ckpt
    state = extract_state_dict(ckpt, source=filename)  # the EMA weights where the file holds both
    try:
        return {'state_dict': convert({k[7:] if k.startswith('module.') else k: v for k, v in state.items()})}
    except (KeyError, ValueError, CheckpointMismatchError) as e:
        reason = str(e.args[0] if isinstance(e, KeyError) and e.args else e).rstrip('.')
        layout = official_layout(_peek(ckpt))
        what = f'{layout} weights' if layout else describe_official(filename) or 'an official file'
        raise CheckpointMismatchError(f'{filename} looks like {what} but does not convert ({reason}); pass the '
                                      'file as the release published it.') from None


#: a local path (no ``://``): sorted before the data-only loaders' ``''`` prefix, so it is chosen over it
LOCAL_PATH = r'(?!.*://)'


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


def _download_converted(url: str, convert: Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]],
                        map_location=None) -> dict:
    """``url`` downloaded once and hash-checked (:func:`mmposmlp.utils.download.fetch`), read as data and
    converted by ``convert``, as an mmengine checkpoint."""
    from mmposmlp.utils.download import DownloadError, fetch

    def read(path):
        return {'state_dict': convert(load_checkpoint_file(path, map_location=map_location or 'cpu', source=url))}

    try:
        return fetch(url, read)
    except DownloadError as e:
        raise PretrainedDownloadError(str(e)) from None


def register_official_classifier(url: str, convert: Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]):
    """Make mmengine's ``CheckpointLoader`` read ``url`` as our ``ImageClassifier`` checkpoint
    (:func:`_download_converted`). Registered under the URL itself (``CheckpointLoader.register_scheme``;
    longer prefixes win), so other http(s) files keep their loader."""
    from mmengine.runner.checkpoint import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes=re.escape(url), loader=lambda filename, map_location=None:
                                     _download_converted(filename, convert, map_location), force=True)


def load_from_official_url(filename: str, map_location=None) -> dict:
    """mmengine ``CheckpointLoader`` scheme for an http(s) URL whose file name is one of
    :data:`OFFICIAL_CLASSIFIERS` (the published URL, a mirror, ``get_model``'s ``url_mapping``)."""
    return _download_converted(filename, OFFICIAL_CLASSIFIERS[file_name(filename)], map_location)


#: an http(s) URL whose path ends in one of the official classifier file names
OFFICIAL_URL = (r'https?://[^?#]*/(?:' + '|'.join(re.escape(n) for n in OFFICIAL_CLASSIFIERS) + r')(?:[?#]|$)')


def register_official_classifiers() -> None:
    """Make mmengine's ``CheckpointLoader`` read the official files converted (idempotent): URLs named like
    an official classifier (:func:`load_from_official_url`) and local paths (:func:`load_from_local_file`:
    official layouts and names converted, every other file read as data). Called where the data-only loaders
    are registered (our Runner and tools), never on import."""
    from mmengine.runner.checkpoint import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes=OFFICIAL_URL, loader=load_from_official_url, force=True)
    CheckpointLoader.register_scheme(prefixes=LOCAL_PATH, loader=load_from_local_file, force=True)
