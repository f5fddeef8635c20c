"""Loading pretrained/official weights loudly (issue 2/3: nothing half-loaded passes silently).

Shared by every backbone's ``init_weights`` and by ``tools/model_converters``.
"""
import contextlib
import difflib
import fnmatch
import os.path as osp
from typing import Callable, Dict, Iterable, Optional

import torch
from mmengine.logging import MMLogger, print_log

from mmposmlp.utils.compat import safe_torch_load
from mmposmlp.utils.download import DownloadError, fetch, is_url, manual_route
from mmposmlp.utils.pretrained import file_name
from mmposmlp.utils.safe_load import UnsafeCheckpointError

#: (weights key, EMA weights key) of the checkpoint wrappers the official training scripts write:
#: timm ``CheckpointSaver`` (PosMLP, Wave-MLP: ``state_dict`` / ``state_dict_ema``), DeiT-style
#: (Twins: ``model`` / ``model_ema``), SlowFast (PosMLP-Video: ``model_state``), mmengine and
#: mmdet / mmseg 2.x (``state_dict``; mmengine's EMAHook swaps the EMA weights in and the trained ones
#: out to :data:`MMENGINE_EMA_KEY`), and a plain ``{'module': ...}``.
WRAPPERS = (('state_dict', 'state_dict_ema'), ('model', 'model_ema'), ('model_state', None), ('module', None))
STATE_DICT_KEYS = tuple(k for pair in WRAPPERS for k in pair if k)
#: mmengine's EMAHook: the trained weights, swapped out of ``state_dict`` before saving
MMENGINE_EMA_KEY = 'ema_state_dict'


#: top-level parts of OpenMMLab classifiers / detectors / segmentors / recognisers other than the
#: backbone: what an upstream ``init_weights`` that loads a whole model non-strictly leaves unused.
OTHER_MODEL_PARTS = ('head.*', 'neck.*', 'decode_head.*', 'auxiliary_head.*', 'rpn_head.*', 'roi_head.*',
                     'bbox_head.*', 'mask_head.*', 'cls_head.*', 'data_preprocessor.*')


class CheckpointMismatchError(RuntimeError):
    """Raised when a checkpoint does not contain the weights a model needs."""


def _is_state_dict(obj) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def extract_state_dict(ckpt, prefer_ema: bool = True, source: str = 'checkpoint') -> Dict[str, torch.Tensor]:
    """The weights of a loaded checkpoint: a bare state dict, or the state dict inside one of
    :data:`WRAPPERS`.

    ``prefer_ema`` (default) takes the EMA weights when the file holds both (the official PosMLP
    and Twins evaluations use them); ``prefer_ema=False`` takes the trained weights. Which one was
    taken is logged. A DDP ``module.`` prefix is removed by :func:`load_checkpoint_file`.
    """
    if not isinstance(ckpt, dict):
        raise CheckpointMismatchError(f'{source}: expected a dict checkpoint, got {type(ckpt).__name__}')
    if 'state_dict' in ckpt and MMENGINE_EMA_KEY in ckpt:
        return _mmengine_ema_weights(ckpt, prefer_ema, source)
    for plain, ema in WRAPPERS:
        if plain not in ckpt and (ema is None or ema not in ckpt):
            continue
        use_ema = ema is not None and _is_state_dict(ckpt.get(ema)) and (prefer_ema or not _is_state_dict(
            ckpt.get(plain)))
        key = ema if use_ema else plain
        if not _is_state_dict(ckpt.get(key)):
            raise CheckpointMismatchError(f'{source}: its {key!r} entry is not a state dict (a dict of tensors)')
        other = plain if use_ema else ema
        if other is not None and other in ckpt:
            print_log(f'{source}: using {key!r} ({"EMA" if use_ema else "trained"} weights) over {other!r}; '
                      f'prefer_ema={not use_ema} would take the other', logger='current')
        return dict(ckpt[key])
    if _is_state_dict(ckpt):
        return dict(ckpt)
    raise CheckpointMismatchError(f'{source}: no state dict found (top-level keys: {sorted(ckpt)[:10]}); expected '
                                  f'a dict of tensors or one under {list(STATE_DICT_KEYS)}')


def _mmengine_ema_weights(ckpt, prefer_ema: bool, source: str) -> Dict[str, torch.Tensor]:
    """The weights of a checkpoint written with mmengine's ``EMAHook``, which swaps before saving:
    ``state_dict`` holds the EMA weights and ``ema_state_dict`` the trained ones (``module.``-prefixed,
    plus the averaging ``steps``). ``prefer_ema=False`` swaps them back."""
    plain, swapped = ckpt['state_dict'], ckpt[MMENGINE_EMA_KEY]
    for key, value in ((MMENGINE_EMA_KEY, swapped), ('state_dict', plain)):
        if not _is_state_dict(value):
            raise CheckpointMismatchError(f'{source}: its {key!r} entry is not a state dict (a dict of tensors)')
    trained = {k[len('module.'):]: v for k, v in swapped.items() if k.startswith('module.')}
    stray = sorted(k for k in trained if k not in plain)
    if stray:
        raise CheckpointMismatchError(f'{source}: its {MMENGINE_EMA_KEY!r} holds {stray[:3]} that its '
                                      f"'state_dict' lacks, so it is not an mmengine EMAHook checkpoint: pass "
                                      'the weights you want as a plain state dict.')
    print_log(f"{source}: mmengine EMAHook checkpoint: using the {'EMA' if prefer_ema else 'trained'} weights "
              f"({'state_dict' if prefer_ema else MMENGINE_EMA_KEY!r}); prefer_ema={not prefer_ema} would take "
              'the other', logger='current')
    return dict(plain) if prefer_ema else {**plain, **trained}


def load_checkpoint_file(path: str, prefer_ema: bool = True, map_location='cpu',
                         source: Optional[str] = None) -> Dict[str, torch.Tensor]:
    """Read ``path`` and return its weights (:func:`extract_state_dict`), ``module.`` (DDP) removed.
    ``source`` names the file in messages (default ``path``; a download: its URL)."""
    if not osp.isfile(path):
        from mmposmlp.utils.pretrained import how_to_make
        raise FileNotFoundError(f'checkpoint {path} does not exist: {how_to_make(path)}.')
    source = source or path
    state = extract_state_dict(safe_torch_load(path, map_location=map_location), prefer_ema=prefer_ema,
                               source=source)
    return {k[7:] if k.startswith('module.') else k: v for k, v in state.items()}


def strip_prefix(state: Dict[str, torch.Tensor], prefix: Optional[str]) -> Dict[str, torch.Tensor]:
    """Keep keys under ``prefix`` (e.g. 'backbone.') without it. ``prefix=None``: auto.

    Auto mode strips 'backbone.' when any key has it (a whole-detector/classifier checkpoint).
    """
    if prefix is None:
        prefix = 'backbone.' if any(k.startswith('backbone.') for k in state) else ''
    if not prefix:
        return dict(state)
    out = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if not out:
        raise CheckpointMismatchError(f'no key of the checkpoint starts with {prefix!r}')
    return out


def backbone_of_whole_model(state: Dict[str, torch.Tensor], owner: str) -> Dict[str, torch.Tensor]:
    """``state`` itself, or, when it holds ``backbone.`` keys (a whole classifier / detector checkpoint), its
    backbone weights without the prefix; the other top-level parts left unused are logged by name."""
    if not any(k.startswith('backbone.') for k in state):
        return state
    others = sorted({k.split('.')[0] for k in state if not k.startswith('backbone.')})
    if others:
        print_log(f'{owner}: using the backbone.* weights of a whole-model checkpoint; its {others} parts '
                  'are left unused', logger='current')
    return {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}


def load_state_dict_checked(module: torch.nn.Module,
                            state: Dict[str, torch.Tensor],
                            allowed_missing: Iterable[str] = (),
                            allowed_unexpected: Iterable[str] = (),
                            source: str = 'checkpoint',
                            logger: Optional[MMLogger] = None):
    """``load_state_dict(strict=False)`` that reports and checks the mismatch.

    Args:
        allowed_missing: fnmatch patterns of module keys that may be absent (newly added
            layers such as dense-prediction output norms). Any other missing key raises.
        allowed_unexpected: fnmatch patterns of checkpoint keys that may be left unused (e.g.
            ``('head.*',)`` for a classification head loaded into a detector backbone). Default
            none: every other checkpoint key must have a place in ``module``, or this raises
            naming the keys and their closest module keys; the dropped keys are logged by name.
    Returns:
        The ``_IncompatibleKeys`` of ``load_state_dict``.
    """
    allowed_missing = tuple(allowed_missing)
    allowed_unexpected = tuple(allowed_unexpected)
    own = module.state_dict()
    shape_errors = [f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
                    for k, v in state.items() if k in own and own[k].shape != v.shape]
    if shape_errors:
        more = f' and {len(shape_errors) - 3} more' if len(shape_errors) > 3 else ''
        raise CheckpointMismatchError(
            f'{source} does not fit {type(module).__name__}: {len(shape_errors)} weight(s) have another shape '
            f'({"; ".join(shape_errors[:3])}{more}); build the model with the `arch` the checkpoint was trained '
            'with, and where weights follow the input (token-mixing matrices, position tables, windows) its '
            'input size and window sizes too.')
    result = module.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys
               if not any(fnmatch.fnmatchcase(k, p) for p in allowed_missing)]
    unexpected = [k for k in result.unexpected_keys
                  if not any(fnmatch.fnmatchcase(k, p) for p in allowed_unexpected)]
    msg = (f'loaded {source} into {type(module).__name__}: {len(state) - len(result.unexpected_keys)} keys '
           f'loaded, missing {len(result.missing_keys)} {result.missing_keys[:8]}'
           f'{"..." if len(result.missing_keys) > 8 else ""}, unexpected {len(result.unexpected_keys)} '
           f'{result.unexpected_keys[:8]}{"..." if len(result.unexpected_keys) > 8 else ""}')
    print_log(msg, logger=logger or 'current')
    if unexpected:
        lacking = (f' (and lacks {len(missing)} of its weights, e.g. {missing[:3]})' if missing else '')
        raise CheckpointMismatchError(unexpected_keys_message(source, module, unexpected, own, lacking))
    if missing:
        raise CheckpointMismatchError(
            f'{source} is missing {len(missing)} weights of {type(module).__name__} '
            f'(e.g. {missing[:5]}): convert official checkpoints with tools/model_converters/ first and '
            'check that `arch` matches the checkpoint.')
    dropped = list(result.unexpected_keys)
    if dropped:
        print_log(f'{source}: left {len(dropped)} checkpoint keys unused as allowed by allowed_unexpected: '
                  f'{dropped[:20]}{"..." if len(dropped) > 20 else ""}', logger=logger or 'current')
    return result


def unexpected_keys_message(source: str, module: torch.nn.Module, unexpected, expected, extra: str = '') -> str:
    """One sentence: the checkpoint keys with no place in ``module``, the closest expected key of
    each, and the options that accept them."""
    expected = list(expected)
    shown = []
    for k in list(unexpected)[:5]:
        close = difflib.get_close_matches(k, expected, n=1, cutoff=0.5)
        shown.append(f'{k!r} (closest: {close[0]!r})' if close else f'{k!r} (no close model key)')
    more = f' and {len(unexpected) - 5} more' if len(unexpected) > 5 else ''
    return (f'{source} has {len(unexpected)} key(s) with no place in {type(module).__name__}{extra}: '
            f'{", ".join(shown)}{more}; check `arch` and `prefix`, or leave them unused explicitly with '
            f'allowed_unexpected=[patterns] (init_cfg: ignore_keys=[patterns], converters: --ignore-keys).')


def load_pretrained(module: torch.nn.Module, checkpoint: str, prefix: Optional[str] = None,
                    converter: Optional[Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]] = None,
                    allowed_missing: Iterable[str] = (), allowed_unexpected: Iterable[str] = (),
                    prefer_ema: bool = True, logger=None, map_location='cpu'):
    """Load ``checkpoint`` (a path, or an http(s) URL) into ``module`` with prefix stripping and an optional
    official->ours ``converter``; raises :class:`CheckpointMismatchError` on missing keys and on
    checkpoint keys with no place in ``module`` (unless matched by ``allowed_unexpected``).

    A URL is downloaded once into torch's hub cache (:func:`mmposmlp.utils.download.fetch`) and kept there
    only after its published hash and this very load (keys and shapes, after conversion) accepted it; a
    failed download raises :class:`PretrainedDownloadError`."""
    def load(path):
        state = strip_prefix(load_checkpoint_file(path, prefer_ema=prefer_ema, map_location=map_location,
                                                  source=checkpoint), prefix)
        if converter is not None:
            state = converter(state)
        return load_state_dict_checked(module, state, allowed_missing, allowed_unexpected,
                                       source=checkpoint, logger=logger)

    if not is_url(checkpoint):
        return load(checkpoint)
    return load_from_url(checkpoint, load)


class PretrainedDownloadError(CheckpointMismatchError):
    """Pretrained weights named by URL could not be downloaded, or the download was not the published file."""


def load_from_url(url: str, load: Callable[[str], object]):
    """``load(path)`` on the verified download of ``url`` (:func:`mmposmlp.utils.download.fetch`). A file that
    ``load`` refuses is not kept: its one sentence says so and names the manual route."""
    def checked(path):
        try:
            return load(path)
        except (CheckpointMismatchError, UnsafeCheckpointError) as e:
            if osp.basename(path) == file_name(url):
                raise  # a file already in the cache (kept before, or put there by hand)
            text = str(e).replace(path, url).rstrip('.')
            raise type(e)(f'{text} (the download was not kept; a file that fits: {manual_route(url)}).') from None

    try:
        return fetch(url, checked)
    except DownloadError as e:
        raise PretrainedDownloadError(str(e)) from None


# ---------------------------------------------------------------------------------------------- init_cfg
#: the keys of a ``dict(type='Pretrained', ...)`` ``init_cfg`` every mmposmlp backbone accepts, with what
#: each does: mmengine's ``PretrainedInit`` arguments (``checkpoint``, ``prefix``, ``map_location``) and the
#: options of :func:`load_pretrained`. A backbone may add its own (``PosMLPVideo``: ``inflate``).
PRETRAINED_INIT_KEYS = {
    'type': "'Pretrained'",
    'checkpoint': 'path of the weights file',
    'prefix': "keep only the keys under this prefix (default: 'backbone.' when the file has such keys)",
    'map_location': "where the file's tensors are loaded (default 'cpu')",
    'prefer_ema': 'take the EMA weights when the file holds both (default True)',
    'ignore_keys': 'fnmatch patterns of checkpoint keys left unused on purpose (default none)',
}


class InitCfgError(ValueError):
    """An ``init_cfg`` a backbone cannot follow as written (unknown key, value of the wrong type)."""


def pretrained_init_cfg(module: torch.nn.Module, extra_keys: Iterable[str] = ()) -> Optional[dict]:
    """``module.init_cfg`` when it asks for pretrained weights (``type='Pretrained'``), checked; else None.

    Refused in one sentence: a key outside :data:`PRETRAINED_INIT_KEYS` + ``extra_keys`` (naming the
    closest accepted key and all of them), a missing ``checkpoint``, ``ignore_keys`` given as one string,
    ``prefer_ema`` not a bool, and a ``Pretrained`` entry inside a list of init configs (mmengine would load
    it non-strictly, leaving missing weights unreported).
    """
    cfg = getattr(module, 'init_cfg', None)
    owner = type(module).__name__
    if isinstance(cfg, (list, tuple)):
        if any(isinstance(c, dict) and str(c.get('type', '')).rpartition('.')[2] == 'Pretrained' for c in cfg):
            raise InitCfgError(f"{owner}: init_cfg lists a 'Pretrained' entry among {len(cfg)} entries, which "
                               "mmengine would load without checking the keys; give it alone as "
                               "init_cfg=dict(type='Pretrained', checkpoint=...).")
        return None
    if not isinstance(cfg, dict) or str(cfg.get('type', '')).rpartition('.')[2] != 'Pretrained':
        return None
    accepted = list(PRETRAINED_INIT_KEYS) + [k for k in extra_keys if k not in PRETRAINED_INIT_KEYS]
    unknown = [k for k in cfg if k not in accepted]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), accepted, n=1, cutoff=0.5)
        hint = f'did you mean {close[0]!r}? ' if close else ''
        more = f' (and {len(unknown) - 1} more unknown: {unknown[1:]})' if len(unknown) > 1 else ''
        raise InitCfgError(f"{owner}: init_cfg of type 'Pretrained' has the unknown key {unknown[0]!r}{more}; "
                           f"{hint}the accepted keys are {', '.join(accepted)}.")
    if not cfg.get('checkpoint'):
        raise InitCfgError(f"{owner}: init_cfg of type 'Pretrained' names no checkpoint; add "
                           "checkpoint='<path of the weights file>' or set init_cfg=None.")
    if isinstance(cfg.get('ignore_keys'), str):
        raise InitCfgError(f"{owner}: init_cfg ignore_keys is the string {cfg['ignore_keys']!r}; give a list of "
                           f"patterns, e.g. ignore_keys=[{cfg['ignore_keys']!r}].")
    for key in ('prefer_ema', ) + tuple(k for k in extra_keys if k == 'inflate'):
        if key in cfg and not isinstance(cfg[key], bool):
            raise InitCfgError(f'{owner}: init_cfg {key}={cfg[key]!r} is not a bool; write {key}=True or '
                               f'{key}=False.')
    return cfg


@contextlib.contextmanager
def init_cfg_suspended(module: torch.nn.Module):
    """``module.init_cfg`` is None inside and restored after: an upstream ``init_weights`` run inside does its
    random init without its own (unchecked) pretrained loading, which the caller then does checked."""
    cfg = module.init_cfg
    module.init_cfg = None
    try:
        yield
    finally:
        module.init_cfg = cfg


def load_pretrained_init_cfg(module: torch.nn.Module, cfg: dict,
                             converter: Optional[Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]] = None,
                             allowed_missing: Iterable[str] = ()):
    """:func:`load_pretrained` with the options of a checked ``Pretrained`` init_cfg
    (:func:`pretrained_init_cfg`): ``ignore_keys`` become ``allowed_unexpected``."""
    return load_pretrained(module, cfg['checkpoint'], prefix=cfg.get('prefix'), converter=converter,
                           allowed_missing=allowed_missing, allowed_unexpected=tuple(cfg.get('ignore_keys', ())),
                           prefer_ema=cfg.get('prefer_ema', True), map_location=cfg.get('map_location', 'cpu'))
