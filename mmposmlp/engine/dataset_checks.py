"""Pre-flight dataset checks of tools/train.py and tools/test.py: the data must fit the config.

Before the runner is built, every dataset a run reads is checked against the config, and the first problem
ends the run with one sentence naming the file, what was found and the fix:

* every path the config reads exists (data roots, ``ann_file`` and other ``*_file`` keys, ``data_prefix``
  folders, the evaluators' ``ann_file``, class-list files);
* annotation categories vs ``metainfo.classes`` vs the ``num_classes`` of every head (and of batch
  augmentations such as Mixup/CutMix);
* COCO files: not empty, valid JSON, every class name is a category of the file (the dataset and the
  evaluator map predictions through it);
* segmentation: label values within ``[0, num_classes)`` or the ignore index after ``reduce_zero_label``,
  ``reduce_zero_label`` agreeing between dataset and pipeline, label maps of the size of their image;
* video / classification lists: labels within ``[0, num_classes)``, non-empty lists; videos that exist
  and are not empty (every one, up to ``MAX_VIDEO_STATS``); ``SAMPLE_VIDEOS`` of them per list open and
  decode (decord: first and last frame). Videos outside that sample are not decoded before the run: the
  added :class:`NameUndecodableVideosHook` turns a failure while the run reads one into one sentence naming
  it (instead of the decoder's traceback).

Cost is bounded on large datasets (caps below): list files are read as text (linear, no decoding); COCO
files up to ``COCO_FULL_PARSE_BYTES`` are parsed, larger ones are only scanned for their top-level
``categories`` / ``images`` / ``annotations``; label maps, videos and images are sampled evenly over the
sorted dataset (the first and the last included), and image/label sizes are read from the file headers.
"""
import json
import os
import os.path as osp
import re
from typing import Dict, List, Optional, Sequence, Tuple

from mmengine.hooks import Hook

from mmposmlp.engine.errors import UserError, is_local_path
from mmposmlp.registry import HOOKS

TOY_HINT = ('generate toy data with `python tools/misc/make_toy_datasets.py --out data/toy` and point the config '
            'at it (configs/_base_/toy/, or --cfg-options ...data_root=data/toy/...)')
REAL_DATA_HINT = {
    'mmdet': 'put COCO at data/coco/ (annotations/, train2017/, val2017/)',
    'mmseg': 'put ADE20K at data/ade/ADEChallengeData2016/',
    'mmaction': 'put Kinetics-400 at data/kinetics400/ (videos_train/, videos_val/, list files)',
    'mmpretrain': 'put ImageNet at data/imagenet/ (train/, val/, meta/)',
}

SAMPLE_LABEL_MAPS = 64  # label maps decoded per dataset (sizes and values)
SAMPLE_VIDEOS = 32  # videos opened and partly decoded per dataset (the others: see NameUndecodableVideosHook)
MAX_VIDEO_STATS = 20000  # videos checked for existence / zero size per dataset (os.stat only)
SAMPLE_IMAGES = 64  # images checked for existence per dataset
COCO_FULL_PARSE_BYTES = 64 << 20  # COCO json files larger than this are scanned, not parsed
SCAN_CHUNK_BYTES = 16 << 20  # read size of that scan
FIX_TOOL = 'tools/misc/make_custom_config.py write a config that follows the data'
BACKGROUND_NAMES = ('background', 'bg', '_background_', 'unlabeled', 'unlabelled', 'void', 'other', 'others')


def _preview(items, n=6) -> str:
    items = list(items)
    text = ', '.join(repr(i) if isinstance(i, str) else str(i) for i in items[:n])
    return text + (f', ... ({len(items)} in all)' if len(items) > n else '')


def _dataset_cfgs(ds, where):
    """Yield (dataset cfg, location) for a dataset cfg and the ones it wraps."""
    if not isinstance(ds, dict):
        return
    yield ds, where
    if isinstance(ds.get('dataset'), dict):
        yield from _dataset_cfgs(ds['dataset'], where + '.dataset')
    for i, sub in enumerate(ds.get('datasets') or []):
        yield from _dataset_cfgs(sub, f'{where}.datasets[{i}]')


def _leaf_datasets(ds, where):
    for d, w in _dataset_cfgs(ds, where):
        if not isinstance(d.get('dataset'), dict) and not d.get('datasets'):
            yield d, w


def _join(root, p):
    return osp.join(root, p) if is_local_path(root) and is_local_path(p) and not osp.isabs(p) else p


def _evaluators(cfg, loader) -> List[Tuple[dict, str]]:
    key = loader.replace('_dataloader', '_evaluator')
    ev = cfg.get(key)
    if isinstance(ev, dict) and isinstance(ev.get('metrics'), (list, tuple)):  # Evaluator(metrics=[...])
        ev = ev['metrics']
    if isinstance(ev, dict):
        return [(ev, key)]
    if isinstance(ev, (list, tuple)):
        return [(e, f'{key}[{i}]') for i, e in enumerate(ev) if isinstance(e, dict)]
    return []


def missing_dataset_paths(cfg, loaders):
    """[(path, cfg key)] of the dataset paths a run would read that do not exist: data roots, ``*_file``
    keys (annotation, split, proposal and label-map files), ``data_prefix`` folders, class-list files given
    as ``metainfo.classes``, and the ``ann_file`` of the loaders' evaluators."""
    missing = []
    for loader in loaders:
        lcfg = cfg.get(loader)
        if not isinstance(lcfg, dict):
            continue
        for ds, where in _dataset_cfgs(lcfg.get('dataset'), f'{loader}.dataset'):
            root = ds.get('data_root')
            if is_local_path(root) and not osp.exists(root):
                missing.append((root, f'{where}.data_root'))
                continue
            for key in sorted(k for k in ds if isinstance(k, str) and k.endswith('_file')):
                if is_local_path(ds[key]) and not osp.exists(_join(root, ds[key])):
                    missing.append((_join(root, ds[key]), f'{where}.{key}'))
            prefix = ds.get('data_prefix')
            items = prefix.items() if isinstance(prefix, dict) else [('', prefix)]
            for k, p in items:
                if is_local_path(p) and not osp.exists(_join(root, p)):
                    missing.append((_join(root, p), f'{where}.data_prefix{"." + k if k else ""}'))
            meta = ds.get('metainfo')
            classes = meta.get('classes') if isinstance(meta, dict) else None
            if is_local_path(classes) and not osp.exists(_join(root, classes)):
                missing.append((_join(root, classes), f'{where}.metainfo.classes'))
        for ev, where in _evaluators(cfg, loader):
            for key in sorted(k for k in ev if isinstance(k, str) and k.endswith('_file')):
                if is_local_path(ev[key]) and not osp.exists(ev[key]):
                    missing.append((ev[key], f'{where}.{key}'))
    return missing


# ------------------------------------------------------------------ the config's side: heads and classes
def num_classes_paths(cfg) -> List[Tuple[tuple, int]]:
    """[(path, value)] of every ``num_classes`` in ``model`` and ``data_preprocessor`` (heads, batch
    augmentations such as Mixup/CutMix), except the class-agnostic RPN head; a path is a tuple of keys
    and list indices, e.g. ``('model', 'roi_head', 'bbox_head', 'num_classes')``."""
    sites = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == 'rpn_head':
                    continue
                if k == 'num_classes' and isinstance(v, int) and not isinstance(v, bool):
                    sites.append((path + (k, ), v))
                else:
                    walk(v, path + (k, ))
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, path + (i, ))

    for top in ('model', 'data_preprocessor'):
        walk(cfg.get(top), (top, ))
    return sites


def _batch_augments(cfg) -> bool:
    """Whether the classifier mixes labels (Mixup/CutMix, one-hot targets): only then is the data
    preprocessor's ``num_classes`` used."""
    model = cfg.get('model') or {}
    pre = [cfg.get('data_preprocessor'), model.get('data_preprocessor')]
    train_cfg = model.get('train_cfg') if isinstance(model.get('train_cfg'), dict) else {}
    return bool(train_cfg.get('augments')) or any(
        isinstance(p, dict) and (p.get('batch_augments') or p.get('to_onehot')) for p in pre)


def used_num_classes_paths(cfg) -> List[Tuple[tuple, int]]:
    """:func:`num_classes_paths` less the data preprocessor's when no batch augmentation uses it."""
    sites = num_classes_paths(cfg)
    if _batch_augments(cfg):
        return sites
    return [(p, v) for p, v in sites if p not in (('data_preprocessor', 'num_classes'),
                                                 ('model', 'data_preprocessor', 'num_classes'))]


def cfg_key(path: tuple) -> str:
    """``('model', 'heads', 0, 'num_classes')`` -> ``'model.heads[0].num_classes'``."""
    return ''.join(f'[{p}]' if isinstance(p, int) else (f'.{p}' if i else p) for i, p in enumerate(path))


def num_classes_sites(cfg) -> List[Tuple[str, int]]:
    """[(key, value)] of :func:`used_num_classes_paths`, keys written as in ``--cfg-options``."""
    return [(cfg_key(p), v) for p, v in used_num_classes_paths(cfg)]


def _dataset_class(type_name):
    if not isinstance(type_name, str):
        return type_name if isinstance(type_name, type) else None
    from mmengine.registry import DATASETS
    try:
        with DATASETS.switch_scope_and_registry(None) as registry:
            return registry.get(type_name)
    except Exception:  # noqa: BLE001  (unknown types are reported when the runner is built)
        return None


def _mro_names(cls) -> set:
    return {c.__name__ for c in getattr(cls, '__mro__', ())}


def _default_arg(cls, name, fallback):
    import inspect
    for c in getattr(cls, '__mro__', ()):
        try:
            p = inspect.signature(c.__init__).parameters.get(name)
        except (TypeError, ValueError):
            continue
        if p is not None and p.default is not inspect.Parameter.empty:
            return p.default
    return fallback


def _read_names(path) -> List[str]:
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def _classes(ds, cls, root) -> Tuple[Optional[tuple], str]:
    """(class names, where they come from) of a dataset cfg: its metainfo, else the class's METAINFO."""
    meta = ds.get('metainfo')
    classes = meta.get('classes') if isinstance(meta, dict) else None
    if is_local_path(classes):
        return tuple(_read_names(_join(root, classes))), f'metainfo.classes ({_join(root, classes)})'
    if isinstance(classes, (list, tuple)):
        return tuple(classes), 'metainfo.classes'
    default = (getattr(cls, 'METAINFO', None) or {}).get('classes')
    if default:
        return tuple(default), f'{cls.__name__}.METAINFO (metainfo.classes is not set)'
    return None, ''


def _check_heads(n: int, what: str, cfg, where: str, strict: bool = True) -> None:
    """Every head must have ``n`` classes (``strict``) or at least ``n`` outputs."""
    sites = num_classes_sites(cfg)
    bad = [(k, v) for k, v in sites if (v != n if strict else v < n)]
    if bad:
        key, v = bad[0]
        all_keys = ', '.join(k for k, _ in sites)
        raise UserError(f'{where}: the data has {n} classes ({what}) but {key}={v}: set num_classes={n} in '
                        f'every head ({all_keys}), or let {FIX_TOOL}.')


def _check_heads_agree(cfg, where: str) -> Optional[Tuple[str, int]]:
    """The heads' ``num_classes`` must agree; returns (key, value) of the first, or None without heads."""
    sites = num_classes_sites(cfg)
    if len({v for _, v in sites}) > 1:
        listed = ', '.join(f'{k}={v}' for k, v in sites)
        raise UserError(f'{where}: the heads disagree on the number of classes ({listed}): set every one to the '
                        f'number of classes of the data, or let {FIX_TOOL}.')
    return sites[0] if sites else None


# ------------------------------------------------------------------ COCO (mmdet)
def _scan_json_top_level(path: str, keys=('categories', 'images', 'annotations')) -> Dict[str, object]:
    """Bounded look at a big COCO json: ``categories`` decoded, ``images``/``annotations`` only as
    'empty or not' (the first non-blank character after ``[``), reading the file once in 16 MB chunks."""
    found: Dict[str, object] = {}
    pats = {k: re.compile(rb'"' + k.encode() + rb'"\s*:\s*\[') for k in keys}
    chunk, overlap = SCAN_CHUNK_BYTES, 4096
    with open(path, 'rb') as f:
        offset, tail = 0, b''
        while len(found) < len(keys):
            data = f.read(chunk)
            eof = not data
            buf, base = tail + data, offset - len(tail)
            for k, pat in pats.items():
                m = None if k in found else pat.search(buf)
                if m is None or (not eof and m.end() + 64 > len(buf)):
                    continue  # not here, or too close to the end: the overlap brings it into the next chunk
                if k == 'categories':
                    with open(path, 'rb') as f2:
                        f2.seek(base + m.end() - 1)
                        text = f2.read(8 << 20).decode('utf-8', 'replace')
                    try:
                        found[k] = json.JSONDecoder().raw_decode(text)[0]
                    except ValueError:
                        found[k] = None
                else:
                    found[k] = not buf[m.end():m.end() + 64].lstrip().startswith(b']')  # True: not empty
            if eof:
                break
            offset += len(data)
            tail = buf[-overlap:]
    return found


def _load_coco(path: str) -> dict:
    """{'categories': [...], 'has_images': bool, 'has_annotations': bool, 'images': [...] or None,
    'annotations': [...] or None} of a COCO json, bounded by COCO_FULL_PARSE_BYTES."""
    size = os.path.getsize(path)
    if size == 0:
        raise UserError(f'{path} is an empty file (0 bytes): write the COCO annotations (images, annotations, '
                        'categories) into it, or point ann_file at the right file.')
    if size <= COCO_FULL_PARSE_BYTES:
        try:
            with open(path) as f:
                data = json.load(f)
        except ValueError as e:
            raise UserError(f'{path} is not valid JSON ({e}): write it as a COCO annotation file '
                            '(json.dump of dict(images=..., annotations=..., categories=...)).') from e
        if not isinstance(data, dict):
            raise UserError(f'{path} holds a JSON {type(data).__name__}, not a COCO dict: write '
                            'dict(images=..., annotations=..., categories=...).')
        images, anns = data.get('images') or [], data.get('annotations') or []
        return dict(categories=data.get('categories'), images=images, annotations=anns,
                    has_images=bool(images), has_annotations=bool(anns))
    scan = _scan_json_top_level(path)
    return dict(categories=scan.get('categories'), images=None, annotations=None,
                has_images=bool(scan.get('images')), has_annotations=bool(scan.get('annotations')))


def _coco_categories(path: str, coco: dict) -> List[dict]:
    cats = coco['categories']
    if not isinstance(cats, list) or not cats or not all(isinstance(c, dict) and 'id' in c and 'name' in c
                                                         for c in cats):
        raise UserError(f'{path} has no usable "categories" list (found {_preview([cats], 1)[:80]}): add '
                        'categories=[dict(id=1, name="..."), ...] with one entry per class.')
    return sorted(cats, key=lambda c: c['id'])


def _check_names_in_categories(path: str, cats: List[dict], classes: tuple, source: str, cfg, where: str):
    names = [c['name'] for c in cats]
    absent = [c for c in classes if c not in names]
    if absent:
        sites = ', '.join(k for k, _ in num_classes_sites(cfg)) or 'the heads'
        listed = _preview(names, 8) + (',' if len(names) == 1 else '')
        raise UserError(
            f'{path}: {source} has {len(classes)} class names but {len(absent)} of them ({_preview(absent)}) '
            f'are not categories of this file, which has {len(names)} ({_preview(names)}), so predictions '
            f'cannot be mapped to its category ids: set metainfo=dict(classes=({listed})) on every dataset and '
            f'num_classes={len(names)} in {sites} ({where}), or let {FIX_TOOL}.')


def _check_coco(cfg, ds, cls, where, root, training):
    ann = _join(root, ds.get('ann_file'))
    if not is_local_path(ann) or not osp.isfile(ann):
        return
    classes, source = _classes(ds, cls, root)
    coco = _load_coco(ann)
    cats = _coco_categories(ann, coco)
    if not coco['has_images']:
        raise UserError(f'{ann} lists no images ("images" is empty): add the images and their annotations, '
                        f'or point {where}.ann_file at a non-empty file.')
    if training and not coco['has_annotations']:
        raise UserError(f'{ann} has no annotations ("annotations" is empty) and mmdet drops images without '
                        f'objects when training (filter_cfg.filter_empty_gt): annotate the objects, or point '
                        f'{where}.ann_file at the annotated file.')
    if classes is None:
        return
    _check_names_in_categories(ann, cats, classes, source, cfg, where)
    _check_heads(len(classes), source, cfg, where)
    if coco['annotations'] is not None:
        ids = {c['id'] for c in cats if c['name'] in classes}
        used = [a for a in coco['annotations'] if isinstance(a, dict) and a.get('category_id') in ids]
        if training and not used:
            raise UserError(f'{ann}: none of its {len(coco["annotations"])} annotations belongs to the '
                            f'{len(classes)} classes of {source} ({_preview(classes)}): set metainfo.classes '
                            f'to the categories the file uses, or let {FIX_TOOL}.')
        img_dir = ds.get('data_prefix', {}).get('img', '') if isinstance(ds.get('data_prefix'), dict) else ''
        img_dir = _join(root, img_dir) if img_dir else root
        for im in _evenly(coco['images'], SAMPLE_IMAGES):
            p = osp.join(img_dir or '', str(im.get('file_name', '')))
            if is_local_path(p) and not osp.isfile(p):
                raise UserError(f'{ann}: image {im.get("file_name")!r} (id {im.get("id")}) is not in {img_dir} '
                                f'(found {_count_files(img_dir)} files there): set {where}.data_prefix.img to '
                                'the folder the file_name entries are relative to.')


def _check_coco_evaluator(cfg, ev, where, classes, source):
    ann = ev.get('ann_file')
    if classes is None or not is_local_path(ann) or not osp.isfile(ann):
        return
    if str(ev.get('type', '')).split('.')[-1] not in ('CocoMetric', 'LVISMetric'):
        return
    coco = _load_coco(ann)
    _check_names_in_categories(ann, _coco_categories(ann, coco), classes, source, cfg, where)


def _count_files(d) -> int:
    try:
        return len(os.listdir(d))
    except OSError:
        return 0


def _image_size(path) -> Tuple[int, int]:
    """(width, height) from the image header."""
    from PIL import Image
    try:
        with Image.open(path) as im:
            return im.size
    except OSError as e:
        raise UserError(f'{path}: the image cannot be read ({e}): replace it with a valid image file.') from e


def _evenly(items: Sequence, cap: int) -> list:
    """At most ``cap`` items evenly spread over ``items`` (first and last included)."""
    n = len(items)
    if n <= cap:
        return list(items)
    if cap <= 1:
        return list(items[:cap])
    return [items[round(i * (n - 1) / (cap - 1))] for i in range(cap)]


# ------------------------------------------------------------------ segmentation (mmseg)
def _pipeline_reduce_zero_label(ds):
    for t in ds.get('pipeline') or []:
        if isinstance(t, dict) and str(t.get('type', '')).split('.')[-1] == 'LoadAnnotations' and \
                'reduce_zero_label' in t and t['reduce_zero_label'] is not None:
            return t['reduce_zero_label']
    return None


def _seg_samples(ds, cls, root, where) -> Tuple[List[Tuple[str, str]], str, str]:
    prefix = ds.get('data_prefix') if isinstance(ds.get('data_prefix'), dict) else {}
    img_dir = _join(root, prefix.get('img_path', '')) or root
    seg_dir = _join(root, prefix.get('seg_map_path', '')) or root
    img_suffix = ds.get('img_suffix', _default_arg(cls, 'img_suffix', '.jpg'))
    seg_suffix = ds.get('seg_map_suffix', _default_arg(cls, 'seg_map_suffix', '.png'))
    ann = _join(root, ds.get('ann_file'))
    if is_local_path(ann) and osp.isfile(ann):
        stems = _read_names(ann)
        if not stems:
            raise UserError(f'{ann} is empty: list one image name (without suffix) per line, or set '
                            f'{where}.ann_file=\'\' to use every image of {img_dir}.')
        return [(osp.join(img_dir, s + img_suffix), osp.join(seg_dir, s + seg_suffix)) for s in stems], \
            img_dir, ann
    names = []
    for d, _, files in os.walk(img_dir):
        names += [osp.relpath(osp.join(d, f), img_dir) for f in files if f.endswith(img_suffix)]
    if not names:
        raise UserError(f'{img_dir} holds no images ending in {img_suffix!r} (found {_count_files(img_dir)} '
                        f'entries): put the images there, or set {where}.img_suffix / data_prefix.img_path.')
    names.sort()
    return [(osp.join(img_dir, n), osp.join(seg_dir, n[:-len(img_suffix)] + seg_suffix)) for n in names], \
        img_dir, seg_dir


def _check_seg(cfg, ds, cls, where, root, training):
    import numpy as np
    from PIL import Image
    classes, source = _classes(ds, cls, root)
    rzl = ds.get('reduce_zero_label', _default_arg(cls, 'reduce_zero_label', False))
    pipe_rzl = _pipeline_reduce_zero_label(ds)
    if pipe_rzl is not None and bool(pipe_rzl) != bool(rzl):
        raise UserError(f'{where}: the dataset has reduce_zero_label={rzl} but its pipeline\'s LoadAnnotations '
                        f'has reduce_zero_label={pipe_rzl} (mmseg stops at the first batch): set both to the '
                        'same value (True when label 0 means "unlabelled" in the maps).')
    ignore = ds.get('ignore_index', _default_arg(cls, 'ignore_index', 255))
    if classes is None:
        return
    # classes that are a subset of the class's own METAINFO are remapped by mmseg (label_map)
    default = tuple((getattr(cls, 'METAINFO', None) or {}).get('classes') or ())
    n_values = len(default) if default and classes != default and set(classes) <= set(default) else len(classes)
    _check_heads(len(classes), source, cfg, where)
    if rzl and str(classes[0]).lower() in BACKGROUND_NAMES:
        raise UserError(f'{where}: reduce_zero_label=True turns label 0 into the ignore index, yet class 0 of '
                        f'{source} is {classes[0]!r}: set reduce_zero_label=False in the dataset and its '
                        'LoadAnnotations if label 0 is that class, or drop it from metainfo.classes.')
    pairs, img_dir, seg_dir = _seg_samples(ds, cls, root, where)
    for img_path, seg_path in _evenly(pairs, SAMPLE_LABEL_MAPS):
        if not osp.isfile(seg_path):
            raise UserError(f'{seg_path}: the label map of {img_path} does not exist: every image needs a label '
                            f'map of the same name ending in {osp.splitext(seg_path)[1]!r} in {osp.dirname(seg_path)}'
                            ' (set data_prefix.seg_map_path / seg_map_suffix).')
        img_size = _image_size(img_path)
        try:
            with Image.open(seg_path) as sm:
                seg_size = sm.size
                values = np.unique(np.asarray(sm))
        except OSError as e:
            raise UserError(f'{seg_path}: the label map cannot be read ({e}): write it as a single-channel PNG '
                            'of class indices.') from e
        if seg_size != img_size:
            raise UserError(f'{seg_path}: label map is {seg_size[0]}x{seg_size[1]} but its image {img_path} is '
                            f'{img_size[0]}x{img_size[1]} (width x height): write label maps of the size of '
                            'their images.')
        mapped = values.astype(np.int64)
        if rzl:
            mapped = np.where(mapped == 0, 255, mapped - 1)
            mapped = np.where(mapped == 254, 255, mapped)
        bad = sorted(int(v) for v, m in zip(values, mapped) if m != ignore and not 0 <= m < n_values)
        if bad:
            raw_max = int(values[values != ignore].max()) if (values != ignore).any() else int(values.max())
            if not rzl and 0 in values and raw_max == n_values:
                hint = ('if 0 means "unlabelled" in the maps, set reduce_zero_label=True in the dataset and its '
                        f'LoadAnnotations, else set {n_values + 1} classes')
            else:
                need = raw_max if rzl else raw_max + 1
                hint = (f'the maps hold {need} classes: set metainfo.classes to {need} names and num_classes='
                        f'{need} in every head')
            raise UserError(f'{seg_path}: label values {_preview(bad)} are outside [0, {n_values}) and not the '
                            f'ignore index {ignore} (reduce_zero_label={bool(rzl)}, {n_values} classes from '
                            f'{source}): {hint}, or let {FIX_TOOL}.')


# ------------------------------------------------------------------ lists: video (mmaction), images (mmpretrain)
def _parse_list(path, label_start, where, delimiter=None, last_only=False) -> List[Tuple[int, str, List[int]]]:
    """[(line number, first field, labels)] of a ``path [...] label [label ...]`` list file."""
    if os.path.getsize(path) == 0:
        raise UserError(f'{path} is empty (0 bytes): write one "relative/path label" line per sample, or point '
                        f'{where}.ann_file at the right list.')
    rows = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.rsplit(delimiter or ' ', 1) if last_only else line.split(delimiter)
            try:
                labels = [int(p) for p in parts[label_start:]]
            except ValueError as e:
                raise UserError(f'{path}: line {i} ({line[:80]!r}) has a label that is not an integer ({e}): '
                                'write "relative/path label" lines with integer labels.') from e
            rows.append((i, parts[0], labels))
    if not rows:
        raise UserError(f'{path} has no samples (only blank lines): write one "relative/path label" line per '
                        f'sample, or point {where}.ann_file at the right list.')
    return rows


def _check_labels(path, rows, n, what, where, cfg):
    for i, _, labels in rows:
        bad = [lab for lab in labels if not 0 <= lab < n]
        if bad:
            top = max(lab for _, _, ls in rows for lab in ls)
            raise UserError(f'{path}: line {i} has label {bad[0]}, outside [0, {n}) ({what}); the labels of the '
                            f'file go up to {top}: set num_classes={top + 1} in every head '
                            f'({", ".join(k for k, _ in num_classes_sites(cfg))}), or fix the list, or let '
                            f'{FIX_TOOL}.')


def _open_video(path, decoder) -> None:
    """Open ``path`` with the pipeline's decoder and decode what that decoder reads first: decord its first
    and last frame (one ``get_batch``, as DecordDecode calls it), PyAV and OpenCV their first frame."""
    if decoder == 'decord':
        import decord
        reader = decord.VideoReader(path, num_threads=1)
        if len(reader) == 0:
            raise OSError('no frames')
        reader.get_batch(sorted({0, len(reader) - 1})).asnumpy()
    elif decoder == 'opencv':
        import cv2
        cap = cv2.VideoCapture(path)
        try:
            if not cap.isOpened():
                raise OSError('OpenCV cannot open it')
            if not cap.read()[0]:
                raise OSError('OpenCV decodes no frame')
        finally:
            cap.release()
    else:
        import av
        with av.open(path) as c:
            if not c.streams.video:
                raise OSError('no video stream')
            next(c.decode(video=0))


def _first_line(exc: BaseException, limit=160) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def _video_decoder(ds) -> str:
    types = {str(t.get('type', '')).split('.')[-1] for t in ds.get('pipeline') or [] if isinstance(t, dict)}
    if 'DecordInit' in types:
        return 'decord'
    if 'OpenCVInit' in types:
        return 'opencv'
    return 'pyav'


def _check_video(cfg, ds, cls, where, root):
    ann = _join(root, ds.get('ann_file'))
    if not is_local_path(ann) or not osp.isfile(ann) or ann.endswith('.json'):
        return
    names = _mro_names(cls)
    rawframes = 'RawframeDataset' in names
    start = 1 if not rawframes else (3 if ds.get('with_offset') else 2)
    rows = _parse_list(ann, start, where, delimiter=ds.get('delimiter', ' '))
    head = _check_heads_agree(cfg, where)
    if head:
        _check_labels(ann, rows, head[1], f'{head[0]}={head[1]}', where, cfg)
    prefix = ds.get('data_prefix') if isinstance(ds.get('data_prefix'), dict) else {}
    folder = _join(root, prefix.get('img' if rawframes else 'video', '')) or ''
    paths = [(i, osp.join(folder, p) if folder else p) for i, p, _ in rows]
    for i, p in paths[:MAX_VIDEO_STATS]:
        try:
            size = os.stat(p).st_size if not rawframes else 1
            exists = osp.isdir(p) if rawframes else True
        except OSError:
            size, exists = None, False
        if not exists or size is None:
            kind = 'frames' if rawframes else 'video'
            raise UserError(f'{ann}: line {i} names {p}, which does not exist: put the {kind} there, or set '
                            f'{where}.data_prefix to the folder the list paths are relative to.')
        if size == 0:
            raise UserError(f'{p} (line {i} of {ann}) is an empty file (0 bytes): re-encode or re-download it, '
                            'or remove its line from the list.')
    if rawframes:
        return
    decoder = _video_decoder(ds)
    for i, p in _evenly(paths, SAMPLE_VIDEOS):
        try:
            _open_video(p, decoder)
        except ImportError:
            return
        except Exception as e:  # noqa: BLE001  (decoders raise their own error types)
            raise UserError(f'{p} (line {i} of {ann}) cannot be opened or decoded as a video by {decoder} '
                            f'({_first_line(e)}): re-encode or re-download it, or remove its line from the '
                            'list.') from e


def _check_classification(cfg, ds, cls, where, root):
    names = _mro_names(cls)
    prefix = ds.get('data_prefix', '')
    if isinstance(prefix, dict):
        prefix = prefix.get('img_path', '')
    ann = ds.get('ann_file', '')
    if 'ImageNet' in names and ds.get('split'):
        prefix = prefix or ds['split']
        if not ann and is_local_path(root) and osp.isfile(osp.join(root, 'meta', f'{ds["split"]}.txt')):
            ann = osp.join('meta', f'{ds["split"]}.txt')
    folder = _join(root, prefix) if prefix else (root or '')
    meta = ds.get('metainfo')
    given = meta.get('classes') if isinstance(meta, dict) else None
    classes = None
    if isinstance(given, (list, tuple)):
        classes, source = tuple(given), 'metainfo.classes'
    elif is_local_path(given):
        classes, source = tuple(_read_names(_join(root, given))), f'metainfo.classes ({_join(root, given)})'
    head = _check_heads_agree(cfg, where)
    if classes is not None:
        _check_heads(len(classes), source, cfg, where)
    ann_path = _join(root, ann) if ann else ''
    if is_local_path(ann_path) and osp.isfile(ann_path):
        if ds.get('with_label', True) is False:
            return
        rows = _parse_list(ann_path, 1, where, last_only=True)
        if classes is not None:
            _check_labels(ann_path, rows, len(classes), f'{len(classes)} classes in {source}', where, cfg)
        elif head:
            _check_labels(ann_path, rows, head[1], f'{head[0]}={head[1]}', where, cfg)
        for i, p, _ in _evenly(rows, SAMPLE_IMAGES):
            full = osp.join(folder, p) if folder else p
            if is_local_path(full) and not osp.isfile(full):
                raise UserError(f'{ann_path}: line {i} names {full}, which does not exist: set {where}.data_prefix '
                                'to the folder the list paths are relative to.')
        return
    if ann or not is_local_path(folder) or not osp.isdir(folder):
        return
    subdirs = sorted(d.name for d in os.scandir(folder) if d.is_dir())
    if not subdirs:
        raise UserError(f'{folder} has no class sub-folders (found {_count_files(folder)} files): put the images '
                        f'in one folder per class ({folder}/<class name>/*.jpg), or give {where}.ann_file.')
    if classes is not None and len(classes) != len(subdirs):
        raise UserError(f'{folder} has {len(subdirs)} class folders ({_preview(subdirs)}) but {source} names '
                        f'{len(classes)} classes: mmpretrain numbers the classes by the sorted folder names, so give '
                        f'one name per folder, in sorted order, or let {FIX_TOOL}.')
    if classes is None and head:
        _check_heads(len(subdirs), f'{len(subdirs)} class folders in {folder}: {_preview(subdirs)}', cfg, where,
                     strict=False)
        if head[1] > len(subdirs):
            print(f'note: {folder} has {len(subdirs)} class folders but {head[0]}={head[1]}: the extra '
                  f'outputs are never trained as targets (or let {FIX_TOOL}).', flush=True)


# ------------------------------------------------------------------ videos that fail while the run reads them
VIDEO_READERS = ('DecordInit', 'DecordDecode', 'PyAVInit', 'PyAVDecode', 'PyAVDecodeMotionVector', 'OpenCVInit',
                 'OpenCVDecode', 'PIMSInit', 'PIMSDecode')


class UndecodableVideoError(UserError):
    """A video the pipeline could not open or decode during the run, in one sentence naming it.

    torch's DataLoader re-raises a worker's exception as ``type(exc)('Caught ... Original Traceback ...')``;
    that text is cut back to the sentence raised in the worker."""

    def __init__(self, message: str):
        marker = f'{type(self).__name__}: '
        if '\nOriginal Traceback' in message and marker in message:
            message = message.rsplit(marker, 1)[1].strip()
        super().__init__(message)


class NamedVideoTransform:
    """A video-reading transform of mmaction (``VIDEO_READERS``) whose failures name the file and its list."""

    def __init__(self, transform, ann_file: str):
        self.transform = transform
        self.ann_file = ann_file

    def __call__(self, results):
        try:
            return self.transform(results)
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001  (decoders raise their own error types)
            name = type(self.transform).__name__
            raise UndecodableVideoError(
                f'{results.get("filename")} (listed in {self.ann_file}) failed in {name} ({_first_line(e)}): '
                're-encode or re-download it, or remove its line from the list (before a run only '
                f'{SAMPLE_VIDEOS} videos per list, spread over it, are opened and decoded).') from e

    def __repr__(self):
        return repr(self.transform)


def name_undecodable_videos(dataset) -> int:
    """Wrap the video-reading transforms of ``dataset`` (and the datasets it wraps) in
    :class:`NamedVideoTransform`; returns how many were wrapped (already wrapped ones are left)."""
    count = 0
    for sub in [getattr(dataset, 'dataset', None)] + list(getattr(dataset, 'datasets', None) or []):
        if sub is not None and sub is not dataset:
            count += name_undecodable_videos(sub)
    transforms = getattr(getattr(dataset, 'pipeline', None), 'transforms', None)
    if isinstance(transforms, list):
        for i, t in enumerate(transforms):
            if type(t).__name__ in VIDEO_READERS:
                transforms[i] = NamedVideoTransform(t, str(getattr(dataset, 'ann_file', '')))
                count += 1
    return count


@HOOKS.register_module()
class NameUndecodableVideosHook(Hook):
    """Before the run reads data, make a video that fails to open or decode (anywhere in the lists, also
    past the pre-flight sample) stop the run with :class:`UndecodableVideoError` naming it."""
    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        for loop in getattr(runner, 'built_loops', {}).values():  # mmposmlp.Runner records the loops it built
            name_undecodable_videos(getattr(getattr(loop, 'dataloader', None), 'dataset', None))


def add_video_decode_guard(cfg, loaders) -> bool:
    """Add :class:`NameUndecodableVideosHook` to ``cfg.custom_hooks`` when a loader reads videos."""
    videos = False
    for loader in loaders:
        lcfg = cfg.get(loader)
        if not isinstance(lcfg, dict):
            continue
        for ds, _ in _leaf_datasets(lcfg.get('dataset'), loader):
            pipe = ds.get('pipeline') or []
            videos |= any(isinstance(t, dict) and str(t.get('type', '')).split('.')[-1] in VIDEO_READERS
                          for t in pipe)
    hooks = list(cfg.get('custom_hooks') or [])
    if not videos or any(isinstance(h, dict) and str(h.get('type', '')).split('.')[-1] == 'NameUndecodableVideosHook'
                         for h in hooks):
        return False
    cfg.custom_hooks = hooks + [dict(type='mmposmlp.NameUndecodableVideosHook')]
    return True


# ------------------------------------------------------------------ entry point
def check_dataset_contents(cfg, loaders) -> None:
    """Content checks (see the module docstring) of every leaf dataset and evaluator of ``loaders``."""
    for loader in loaders:
        lcfg = cfg.get(loader)
        if not isinstance(lcfg, dict):
            continue
        training = loader == 'train_dataloader'
        coco_classes = None
        for ds, where in _leaf_datasets(lcfg.get('dataset'), f'{loader}.dataset'):
            cls = _dataset_class(ds.get('type'))
            if cls is None:
                continue
            names = _mro_names(cls)
            root = ds.get('data_root')
            if 'CocoDataset' in names:
                _check_coco(cfg, ds, cls, where, root, training)
                coco_classes = _classes(ds, cls, root)
            elif 'BaseSegDataset' in names:
                _check_seg(cfg, ds, cls, where, root, training)
            elif 'BaseActionDataset' in names:
                _check_video(cfg, ds, cls, where, root)
            elif 'CustomDataset' in names:
                _check_classification(cfg, ds, cls, where, root)
        if coco_classes is not None:
            for ev, where in _evaluators(cfg, loader):
                _check_coco_evaluator(cfg, ev, where, *coco_classes)


def check_datasets(cfg, loaders, scope) -> None:
    """Every path exists, then the data fits the config; raises :class:`UserError` with one sentence. For
    video datasets it also adds :class:`NameUndecodableVideosHook` to ``cfg.custom_hooks``: the videos not in
    the pre-flight sample are checked as the run reads them."""
    missing = missing_dataset_paths(cfg, loaders)
    if missing:
        path, key = missing[0]
        more = f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''
        raise UserError(f'dataset not found: {path} does not exist ({key}){more}. '
                        f'{REAL_DATA_HINT.get(scope, "put the dataset there")}, or {TOY_HINT}.')
    check_dataset_contents(cfg, loaders)
    add_video_decode_guard(cfg, loaders)
