#!/usr/bin/env python
"""Write a config that trains BASE_CONFIG on your own dataset: classes, heads, palette and evaluator follow the data.

    python tools/misc/make_custom_config.py BASE_CONFIG DATA_ROOT [--out FILE] [--classes a,b,c]
        [--pretrained CKPT | --no-pretrained] [--reduce-zero-label {auto,true,false}] [--sample N]

The layout of DATA_ROOT is read according to the base config's library (its default_scope):

* mmdet (COCO format): ``annotations/*train*.json`` and ``*val*.json``; images in ``images/<split>/``,
  ``<split>/`` or ``<json stem without "instances_">/``. Classes = the train file's categories (by id).
* mmseg (ADE20K layout): ``images/{training,validation}`` (or ``{train,val}``) and ``annotations/...``
  label maps. Classes from ``--classes`` or ``classes.txt`` (one name per line), else ``class_0..`` from the
  label range; ``reduce_zero_label`` from the label range (label maps holding 0..K for K names: 0 is
  "unlabelled"). At most ``--sample`` label maps are read (evenly spread; default 500).
* mmaction (video lists): ``*train*.txt`` and ``*val*.txt`` (``relpath label`` lines) with the videos in
  ``videos/<split>/``, ``videos_<split>/``, ``<split>/`` or ``videos/``. Classes from ``--classes`` or
  ``classes.txt``, else ``class_0..`` up to the largest label.
* mmpretrain (ImageNet style): ``{train,val}/<class>/*`` folders, or ``meta/{train,val}.txt`` lists
  (``relpath label``) with ``meta/classes.txt``.

The written config inherits BASE_CONFIG and sets the dataset type/roots/files, ``metainfo.classes`` (and a
palette for detection/segmentation), ``num_classes`` of every head (and of Mixup/CutMix), the evaluators
(COCO annotation file, top-k no larger than the class count) and, with ``--pretrained``/``--no-pretrained``,
the backbone's initialisation. It then runs the dataset checks of tools/train.py on the result.
"""
import argparse
import colorsys
import copy
import json
import os
import os.path as osp
import re
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

IMG_EXTS = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
LOADERS = (('train_dataloader', 'train'), ('val_dataloader', 'val'), ('test_dataloader', 'val'))


class ToolError(Exception):
    """A one-sentence error naming the file, what was found and the fix."""


# ------------------------------------------------------------------ writing Python
class Raw(str):
    """Python source written as is (a variable name)."""


def py(value, indent=0) -> str:
    pad = ' ' * (indent + 4)
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        if not value:
            return 'dict()'
        if all(isinstance(k, str) and k.isidentifier() for k in value):
            items = [f'{k}={py(v, indent + 4)}' for k, v in value.items()]
            inner = ', '.join(items)
            if len(inner) + indent < 100 and '\n' not in inner:
                return f'dict({inner})'
            return 'dict(\n' + ',\n'.join(pad + i for i in items) + ')'
        items = [f'{py(k)}: {py(v, indent + 4)}' for k, v in value.items()]
        return '{' + ', '.join(items) + '}'
    if isinstance(value, (list, tuple)):
        items = [py(v, indent + 4) for v in value]
        open_, close = ('[', ']') if isinstance(value, list) else ('(', ')')
        trail = ',' if isinstance(value, tuple) and len(value) == 1 else ''
        inner = ', '.join(items)
        if len(inner) + indent < 100 and '\n' not in inner:
            return f'{open_}{inner}{trail}{close}'
        return open_ + '\n' + ',\n'.join(pad + i for i in items) + trail + close
    return repr(value)


def palette(n):
    """n distinct RGB colours (golden-ratio hues), deterministic."""
    out = []
    for i in range(n):
        r, g, b = colorsys.hsv_to_rgb((i * 0.618033988749895) % 1.0, 0.65 + 0.35 * (i % 2), 0.95 - 0.25 * (i % 3 == 2))
        out.append((int(r * 255), int(g * 255), int(b * 255)))
    return out


# ------------------------------------------------------------------ reading the data
def _split_names(split):
    return {'train': ('train', 'training'), 'val': ('val', 'validation', 'valid', 'test')}[split]


def _find_file(root, sub, split, ext, exclude=()):
    folder = osp.join(root, sub) if sub else root
    if not osp.isdir(folder):
        return None
    files = sorted(f for f in os.listdir(folder) if f.endswith(ext) and f not in exclude)
    for name in _split_names(split):
        hits = [f for f in files if re.search(rf'(^|[^a-z]){name}', f.lower())]
        if hits:
            return osp.join(sub, hits[0]) if sub else hits[0]
    return None


def _read_names(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def _first_dir(root, candidates, what):
    for c in candidates:
        if osp.isdir(osp.join(root, c)):
            return c
    raise ToolError(f'{root}: no {what} folder (looked for {", ".join(candidates)}): arrange the data in the '
                    'layout of the tool\'s help (python tools/misc/make_custom_config.py -h).')


def _given_classes(args, root, file_candidates):
    if args.classes:
        names = [c.strip() for c in args.classes.split(',') if c.strip()]
        return names, '--classes'
    for f in file_candidates:
        if osp.isfile(osp.join(root, f)):
            return _read_names(osp.join(root, f)), osp.join(root, f)
    return None, None


def _list_labels(path, last_only=False):
    labels = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.rsplit(' ', 1) if last_only else line.split()
            try:
                labels += [int(p) for p in parts[1:]]
            except ValueError:
                raise ToolError(f'{path}: line {i} ({line[:80]!r}) has no integer label: write "relpath label" '
                                'lines.') from None
    if not labels:
        raise ToolError(f'{path} has no "relpath label" lines: write one line per sample.')
    return labels


def _classes_for_labels(args, root, files, labels, where):
    names, source = _given_classes(args, root, files)
    top = max(labels)
    if names is None:
        return [f'class_{i}' for i in range(top + 1)], f'labels 0..{top} of {where} (no class names given)'
    if top >= len(names):
        raise ToolError(f'{where} has label {top} but {source} names {len(names)} classes: give one name per '
                        f'label (labels 0..{top}).')
    return names, source


def read_coco(args, root):
    train = args.train_ann or _find_file(root, 'annotations', 'train', '.json')
    val = args.val_ann or _find_file(root, 'annotations', 'val', '.json') or train
    if train is None:
        raise ToolError(f'{root}/annotations has no *train*.json: put the COCO annotation files there or give '
                        '--train-ann/--val-ann (relative to DATA_ROOT).')
    cats = {}
    for split, ann in (('train', train), ('val', val)):
        try:
            with open(osp.join(root, ann)) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise ToolError(f'{osp.join(root, ann)} cannot be read as COCO json ({e}).') from e
        if not data.get('categories'):
            raise ToolError(f'{osp.join(root, ann)} has no "categories": add one dict(id=..., name=...) per class.')
        cats[split] = [c['name'] for c in sorted(data['categories'], key=lambda c: c['id'])]
    if set(cats['train']) != set(cats['val']):
        raise ToolError(f'{osp.join(root, val)} has categories {cats["val"]} but {osp.join(root, train)} has '
                        f'{cats["train"]}: list the same categories in both files.')
    imgs = {}
    for split, ann in (('train', train), ('val', val)):
        stem = osp.splitext(osp.basename(ann))[0]
        short = stem.replace('instances_', '')
        imgs[split] = _first_dir(root, [f'images/{short}', short, f'images/{split}', split, 'images'],
                                 f'image ({split})')
    names = cats['train']
    return dict(classes=names, source=osp.join(root, train), ann={'train': train, 'val': val}, img=imgs)


def read_ade(args, root):
    img, seg = {}, {}
    for split in ('train', 'val'):
        img[split] = _first_dir(root, [f'images/{n}' for n in _split_names(split)], f'image ({split})')
        seg[split] = _first_dir(root, [f'annotations/{n}' for n in _split_names(split)], f'label map ({split})')
    import numpy as np
    from PIL import Image

    from mmposmlp.engine.dataset_checks import _evenly
    maps = []
    for split in ('train', 'val'):
        d = osp.join(root, seg[split])
        maps += [osp.join(d, f) for f in sorted(os.listdir(d)) if f.endswith('.png')]
    if not maps:
        raise ToolError(f'{osp.join(root, seg["train"])} has no .png label maps: write one per image.')
    values = set()
    for p in _evenly(maps, args.sample):
        with Image.open(p) as im:
            values |= {int(v) for v in np.unique(np.asarray(im))}
    values.discard(255)
    top = max(values)
    names, source = _given_classes(args, root, ('classes.txt', ))
    rzl = {'true': True, 'false': False}.get(args.reduce_zero_label)
    if rzl is None:
        rzl = names is not None and top == len(names) and 0 in values
    if names is None:
        n = top if rzl else top + 1
        names = [f'class_{i}' for i in range(n)]
        source = f'label values 0..{top} of {len(maps)} maps (no class names given)'
    n_needed = top if rzl else top + 1
    if n_needed > len(names):
        raise ToolError(f'{root}: the label maps hold values up to {top} (reduce_zero_label={rzl}) but {source} names '
                        f'{len(names)} classes: give {n_needed} names, or --reduce-zero-label true if 0 means '
                        '"unlabelled".')
    suffixes = [osp.splitext(f)[1] for f in os.listdir(osp.join(root, img['train']))]
    img_suffix = max(set(suffixes), key=suffixes.count) if suffixes else '.jpg'
    return dict(classes=names, source=source, img=img, seg=seg, reduce_zero_label=rzl, img_suffix=img_suffix,
                label_values=sorted(values))


def read_video(args, root):
    lists = {}
    for split in ('train', 'val'):
        lists[split] = _find_file(root, '', split, '.txt', exclude=('classes.txt', ))
    if lists['train'] is None:
        raise ToolError(f'{root} has no *train*.txt video list: write "relpath label" lines into train_list.txt.')
    lists['val'] = lists['val'] or lists['train']
    folders = {}
    for split in ('train', 'val'):
        with open(osp.join(root, lists[split])) as f:
            first = next((line.split()[0] for line in f if line.strip()), None)
        cands = [f'videos/{n}' for n in _split_names(split)] + [f'videos_{n}' for n in _split_names(split)] + \
            list(_split_names(split)) + ['videos', '']
        folders[split] = next((c for c in cands if first and osp.exists(osp.join(root, c, first))), None)
        if folders[split] is None:
            raise ToolError(f'{osp.join(root, lists[split])}: its first video {first!r} is in none of '
                            f'{", ".join(c or "." for c in cands)} under {root}: put the videos there.')
    labels = _list_labels(osp.join(root, lists['train'])) + _list_labels(osp.join(root, lists['val']))
    names, source = _classes_for_labels(args, root, ('classes.txt', ), labels, osp.join(root, lists['train']))
    return dict(classes=names, source=source, lists=lists, folders=folders)


def read_imagenet(args, root):
    meta = {s: osp.join('meta', f'{s}.txt') for s in ('train', 'val')}
    if osp.isfile(osp.join(root, meta['train'])):  # ann-file style
        if not osp.isfile(osp.join(root, meta['val'])):
            meta['val'] = meta['train']
        labels = _list_labels(osp.join(root, meta['train']), True) + _list_labels(osp.join(root, meta['val']), True)
        names, source = _classes_for_labels(args, root, ('meta/classes.txt', 'classes.txt'), labels,
                                            osp.join(root, meta['train']))
        prefix = {s: next((n for n in _split_names(s) if osp.isdir(osp.join(root, n))), '') for s in ('train', 'val')}
        return dict(classes=names, source=source, ann=meta, prefix=prefix)
    prefix = {s: _first_dir(root, list(_split_names(s)), f'{s} image') for s in ('train', 'val')}
    folders = {s: sorted(d.name for d in os.scandir(osp.join(root, prefix[s])) if d.is_dir()) for s in prefix}
    if not folders['train']:
        raise ToolError(f'{osp.join(root, prefix["train"])} has no class folders: put the images in '
                        '<split>/<class name>/ folders, or write meta/{train,val}.txt lists.')
    if folders['val'] != folders['train']:
        diff = sorted(set(folders['val']) ^ set(folders['train']))
        raise ToolError(f'{osp.join(root, prefix["val"])} and {osp.join(root, prefix["train"])} have different '
                        f'class folders (not in both: {diff}): mmpretrain numbers the classes by the sorted folder '
                        'names of each split, so use the same class folders in both splits.')
    names, source = _given_classes(args, root, ())
    if names is None:
        names, source = folders['train'], f'class folders of {osp.join(root, prefix["train"])}'
    return dict(classes=names, source=source, ann={'train': '', 'val': ''}, prefix=prefix)


READERS = {'mmdet': read_coco, 'mmseg': read_ade, 'mmaction': read_video, 'mmpretrain': read_imagenet}


# ------------------------------------------------------------------ the overlay
def _get(node, key):
    if isinstance(node, list):
        return node[key] if isinstance(key, int) and key < len(node) else None
    return node.get(key) if isinstance(node, dict) else None


def set_path(overlay, base, path, value):
    """overlay[path] = value; a list on the way is copied whole from ``base`` (configs replace lists)."""
    node, bnode = overlay, base
    for i, key in enumerate(path[:-1]):
        bchild = _get(bnode, key)
        if isinstance(path[i + 1], int):
            if not isinstance(_get(node, key), list):
                node[key] = copy.deepcopy(bchild)
        elif not isinstance(_get(node, key), dict):
            node[key] = {}
        node, bnode = node[key], bchild
    node[path[-1]] = value


def leaf_path(base, loader):
    path = [loader, 'dataset']
    ds = base[loader]['dataset']
    while isinstance(ds.get('dataset'), dict):
        path.append('dataset')
        ds = ds['dataset']
    if ds.get('datasets'):
        raise ToolError(f'{".".join(path)} of the base config combines several datasets: point each at your data '
                        'yourself, or start from a config with one dataset.')
    return tuple(path), ds


def _pipeline_with_rzl(pipeline, rzl):
    out = copy.deepcopy(pipeline)
    for t in out:
        if isinstance(t, dict) and str(t.get('type', '')).split('.')[-1] == 'LoadAnnotations':
            t['reduce_zero_label'] = rzl
    return out


def dataset_overlay(scope, info, split, ds, data_root):
    classes = tuple(info['classes'])
    if scope == 'mmdet':
        out = dict(data_root=data_root, ann_file=info['ann'][split], data_prefix=dict(img=info['img'][split] + '/'),
                   metainfo=dict(classes=classes, palette=palette(len(classes))))
        return out, False
    if scope == 'mmseg':
        out = dict(type='BaseSegDataset', data_root=data_root,
                   data_prefix=dict(img_path=info['img'][split], seg_map_path=info['seg'][split]),
                   img_suffix=info['img_suffix'], seg_map_suffix='.png', reduce_zero_label=info['reduce_zero_label'],
                   metainfo=dict(classes=classes, palette=palette(len(classes))))
        if ds.get('pipeline'):
            out['pipeline'] = _pipeline_with_rzl(ds['pipeline'], info['reduce_zero_label'])
        return out, False
    if scope == 'mmaction':
        if 'Rawframe' in str(ds.get('type', '')):
            raise ToolError('the base config reads raw frames (RawframeDataset): start from a config that reads '
                            'videos (VideoDataset); the tool writes video-list configs.')
        return dict(data_root=data_root, ann_file=info['lists'][split],
                    data_prefix=dict(video=info['folders'][split])), False
    # mmpretrain: CustomDataset (ImageNet's own arguments, e.g. split, do not apply)
    keep = {k: ds[k] for k in ('pipeline', 'test_mode', 'lazy_init', 'serialize_data', 'backend_args') if k in ds}
    out = dict(_delete_=True, type='CustomDataset', data_root=data_root, data_prefix=info['prefix'][split],
               ann_file=info['ann'][split], with_label=True, metainfo=dict(classes=classes), **keep)
    return out, True


def build_overlay(base, scope, info, data_root, args):
    overlay = {}
    n = len(info['classes'])
    for loader, split in LOADERS:
        if not isinstance(base.get(loader), dict) or not isinstance(base[loader].get('dataset'), dict):
            continue
        path, ds = leaf_path(base, loader)
        value, _ = dataset_overlay(scope, info, split, ds, data_root)
        for k, v in value.items():
            set_path(overlay, base, path + (k, ), v)
    from mmposmlp.engine.dataset_checks import num_classes_paths
    sites = num_classes_paths(base)
    if not sites:
        raise ToolError('the base config has no num_classes in model: start from a config of our model zoo.')
    for path, _ in sites:
        set_path(overlay, base, path, n)
    for key in ('val_evaluator', 'test_evaluator'):
        ev = base.get(key)
        evs = ev if isinstance(ev, list) else [ev]
        new = copy.deepcopy(evs)
        changed = False
        for e in new:
            if not isinstance(e, dict):
                continue
            if scope == 'mmdet' and 'ann_file' in e:
                e['ann_file'] = osp.join(data_root, info['ann']['val'])
                changed = True
            if isinstance(e.get('topk'), (list, tuple)) and max(e['topk']) > n:
                e['topk'] = tuple(sorted({min(k, n) for k in e['topk']}))
                changed = True
        if changed:
            if isinstance(ev, list):
                overlay[key] = new
            else:
                overlay[key] = {k: v for k, v in new[0].items() if k in ('ann_file', 'topk')}
    backbone = (base.get('model') or {}).get('backbone')
    if args.no_pretrained:
        set_path(overlay, base, ('model', 'backbone', 'init_cfg'), None)
    elif args.pretrained:
        old = backbone.get('init_cfg') if isinstance(backbone, dict) else None
        init = dict(type='Pretrained', checkpoint=args.pretrained)
        if isinstance(old, dict) and old.get('prefix'):
            init['prefix'] = old['prefix']
        set_path(overlay, base, ('model', 'backbone', 'init_cfg'), init)
    return overlay


def _hoist(overlay):
    """Shared values become variables (classes, metainfo, pipelines); test_dataloader = val_dataloader."""
    head = {}
    leaves = []
    for loader, _ in LOADERS:
        node = overlay.get(loader)
        while isinstance(node, dict) and isinstance(node.get('dataset'), dict):
            node = node['dataset']
        if isinstance(node, dict) and node is not overlay.get(loader):
            leaves.append((loader, node))
    metas = [leaf.get('metainfo') for _, leaf in leaves if isinstance(leaf.get('metainfo'), dict)]
    if metas and all(m == metas[0] for m in metas):
        head['classes'] = metas[0]['classes']
        head['metainfo'] = dict(metas[0], classes=Raw('classes'))
        for _, leaf in leaves:
            leaf['metainfo'] = Raw('metainfo')
    names = {}
    for loader, leaf in leaves:
        pipe = leaf.get('pipeline')
        if isinstance(pipe, list):
            name = 'train_pipeline' if loader == 'train_dataloader' else 'test_pipeline'
            if names.get(name, pipe) == pipe:
                names[name] = pipe
                head[name] = pipe
                leaf['pipeline'] = Raw(name)
    body = dict(overlay)
    if 'test_dataloader' in body and body.get('test_dataloader') == body.get('val_dataloader'):
        body['test_dataloader'] = Raw('val_dataloader')
    if 'test_evaluator' in body and body.get('test_evaluator') == body.get('val_evaluator'):
        body['test_evaluator'] = Raw('val_evaluator')
    return head, body


def render(base_ref, overlay, header):
    head, body = _hoist(copy.deepcopy(overlay))
    lines = [f'# {h}' for h in header] + [f'_base_ = {base_ref!r}', '']
    for key, value in list(head.items()) + list(body.items()):
        lines.append(f'{key} = {py(value)}')
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('base_config', help='config to start from (model, schedule, pipelines)')
    parser.add_argument('data_root', help='root of your dataset')
    parser.add_argument('--out', help='config to write (default: ./<base stem>_<data root name>.py)')
    parser.add_argument('--classes', help='comma-separated class names (segmentation, video, ann-file lists)')
    group = parser.add_mutually_exclusive_group()
    group.add_argument('--pretrained', help='backbone checkpoint (model.backbone.init_cfg)')
    group.add_argument('--no-pretrained', action='store_true', help='train the backbone from scratch')
    parser.add_argument('--reduce-zero-label', choices=('auto', 'true', 'false'), default='auto',
                        help='segmentation: label 0 is "unlabelled" (auto: from the label range and class names)')
    parser.add_argument('--train-ann', help='detection: train annotation file relative to DATA_ROOT')
    parser.add_argument('--val-ann', help='detection: val annotation file relative to DATA_ROOT')
    parser.add_argument('--sample', type=int, default=500, help='segmentation: label maps read (default 500)')
    args = parser.parse_args(argv)
    from mmposmlp.engine.entry import UserError
    try:
        cfg, out, info, scope = write_config(args)
    except (ToolError, UserError) as e:
        print(f'ERROR: {e}', file=sys.stderr)
        return 1
    print(f'{scope}: {len(info["classes"])} classes ({", ".join(info["classes"][:10])}'
          f'{", ..." if len(info["classes"]) > 10 else ""}) from {info["source"]}')
    backbone = (cfg.get('model') or {}).get('backbone') or {}
    init = backbone.get('init_cfg') if isinstance(backbone, dict) else None
    ckpt = init.get('checkpoint') if isinstance(init, dict) else None
    if ckpt:
        state = 'is downloaded on first use' if '://' in ckpt else 'exists' if osp.isfile(ckpt) else \
            'DOES NOT EXIST yet (see docs/checkpoints.md)'
        print(f'the backbone starts from {ckpt}, which {state}; change with --pretrained CKPT or --no-pretrained')
    else:
        print('the backbone starts from random weights (init_cfg=None); --pretrained CKPT to start from weights')
    print(f'wrote {out}; train with: python tools/train.py {out}')
    return 0


def write_config(args):
    from mmengine.config import Config
    if not osp.isfile(args.base_config):
        raise ToolError(f'base config {args.base_config} does not exist.')
    if not osp.isdir(args.data_root):
        raise ToolError(f'data root {args.data_root} is not a folder.')
    base_cfg = Config.fromfile(args.base_config)
    scope = base_cfg.get('default_scope')
    if scope not in READERS:
        raise ToolError(f'{args.base_config} has default_scope={scope!r}: start from a config of mmdet, mmseg, '
                        'mmaction or mmpretrain.')
    base = base_cfg.to_dict()
    data_root = args.data_root.rstrip('/')
    info = READERS[scope](args, data_root)
    overlay = build_overlay(base, scope, info, data_root, args)
    out = args.out or f'{osp.splitext(osp.basename(args.base_config))[0]}_{osp.basename(data_root)}.py'
    out_dir = osp.dirname(osp.abspath(out))
    base_ref = osp.relpath(osp.abspath(args.base_config), out_dir)
    header = [f'Written by tools/misc/make_custom_config.py from {args.base_config} and {data_root}:',
              f'{len(info["classes"])} classes from {info["source"]}.']
    if scope == 'mmseg':
        header.append(f'reduce_zero_label={info["reduce_zero_label"]} (label values seen: '
                      f'{info["label_values"][:12]}{" ..." if len(info["label_values"]) > 12 else ""})')
    text = render(base_ref, overlay, header)
    os.makedirs(out_dir, exist_ok=True)
    with open(out, 'w') as f:
        f.write(text)
    # the written config must pass the checks of tools/train.py
    from mmposmlp.engine.entry import setup_library
    from mmposmlp.engine.dataset_checks import check_datasets
    try:
        cfg = Config.fromfile(out)
        setup_library(cfg)
        loaders = [k for k, _ in LOADERS if isinstance(cfg.get(k), dict)]
        check_datasets(cfg, loaders, scope)
    except BaseException:
        os.remove(out)  # nothing half-right is left behind
        raise
    return cfg, out, info, scope


if __name__ == '__main__':
    sys.exit(main())
