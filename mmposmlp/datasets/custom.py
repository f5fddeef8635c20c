"""Small generated datasets with their OWN category names, in the layouts a user's data comes in.

They are the worked examples of "Train on your own data" (README) and the test data of the dataset checks
and of ``tools/misc/make_custom_config.py``. Unlike :mod:`mmposmlp.datasets.toy` (real COCO / ADE20K /
Kinetics / ImageNet class ids, so the unmodified configs work), these use any number of made-up classes, so a
config only works once its classes and heads follow the data. Each class is a shape drawn in one colour
(detection, segmentation, classification) or a blob moving in one direction (video).

* ``coco``: ``annotations/{train,val}.json`` (COCO instances: boxes, polygons, categories with ids 1..K
  by default) and ``images/{train,val}/*.jpg``.
* ``ade``: ADE20K layout ``images/{training,validation}/*.jpg`` + ``annotations/{training,validation}/*.png``
  and ``classes.txt`` (one name per line). With ``zero_is_unlabelled=True`` (ADE20K's convention) label 0
  means "unlabelled" and class i is stored as i + 1; otherwise class i is stored as i and class 0 is the
  scene background.
* ``video``: ``videos/{train,val}/*.mp4`` + ``{train,val}_list.txt`` (``relpath label`` lines, mmaction2's
  VideoDataset format) and ``classes.txt``.
* ``imagenet``: ImageNet-style folders ``{train,val}/<class name>/*.jpg`` (mmpretrain CustomDataset folder
  mode); with ``ann_files=True`` also ``meta/{train,val}.txt`` (``relpath label`` lines, mmpretrain's
  ann-file mode) and ``meta/classes.txt``.

    python -m mmposmlp.datasets.custom --task coco --out data/fruit --classes kiwi,lemon,plum,fig
"""
import argparse
import json
import os
import os.path as osp
from typing import Optional, Sequence

import numpy as np

from .toy import _cv2, _fill, _noisy_background, _place_shapes, _polygon_area, _shape_polygon, _write_mp4

TASKS = ('coco', 'ade', 'video', 'imagenet')
DEFAULT_CLASSES = {
    'coco': ('kiwi', 'lemon', 'plum', 'fig', 'lime'),
    'ade': ('meadow', 'pond', 'rock', 'shrub', 'hut', 'cart'),
    'video': ('swipe_right', 'swipe_left', 'swipe_down', 'swipe_up', 'drag_right', 'drag_left'),
    'imagenet': ('kiwi', 'lemon', 'plum', 'fig', 'lime', 'pear', 'date'),
}
SHAPES = ('circle', 'rectangle', 'triangle', 'cross', 'square')
# BGR colours, far apart; class k is drawn as SHAPES[k % 5] in COLOURS[k % 7]
COLOURS = ((40, 40, 230), (40, 200, 40), (230, 120, 30), (200, 40, 200), (30, 220, 230), (240, 240, 240),
           (20, 20, 20))
DIRECTIONS = ('right', 'left', 'down', 'up')


def class_look(k: int):
    """(shape, BGR colour) of class k."""
    return SHAPES[k % len(SHAPES)], COLOURS[k % len(COLOURS)]


def _write_lines(path: str, lines: Sequence[str]) -> None:
    with open(path, 'w') as f:
        f.write(''.join(f'{line}\n' for line in lines))


def make_custom_coco(out_dir: str, classes: Sequence[str] = DEFAULT_CLASSES['coco'], seed: int = 0,
                     splits=(('train', 12), ('val', 6)), category_ids: Optional[Sequence[int]] = None,
                     hw=(192, 256)) -> str:
    """COCO instances with ``classes`` (ids ``category_ids``, default 1..K); the objects cycle through the
    classes, so each split holds them about equally."""
    cv2 = _cv2()
    rng = np.random.default_rng([seed, 101])
    ids = list(category_ids) if category_ids is not None else list(range(1, len(classes) + 1))
    assert len(ids) == len(classes), 'one category id per class'
    os.makedirs(osp.join(out_dir, 'annotations'), exist_ok=True)
    categories = [dict(id=cid, name=name, supercategory='object') for cid, name in zip(ids, classes)]
    h, w = hw
    image_id = ann_id = 0
    for split, num in splits:
        os.makedirs(osp.join(out_dir, 'images', split), exist_ok=True)
        images, anns = [], []
        for _ in range(num):
            image_id += 1
            img = _noisy_background(rng, (h, w))
            for cx, cy, r in _place_shapes(rng, int(rng.integers(1, 4)), (h, w), (24, 44)):
                k = ann_id % len(classes)  # the classes cycle
                shape, colour = class_look(k)
                pts = _shape_polygon(rng, shape, cx, cy, r)
                pts[:, 0] = np.clip(pts[:, 0], 0, w - 1)
                pts[:, 1] = np.clip(pts[:, 1], 0, h - 1)
                _fill(cv2, img, pts, colour)
                x0, y0 = pts.min(0)
                x1, y1 = pts.max(0)
                ann_id += 1
                anns.append(dict(id=ann_id, image_id=image_id, category_id=ids[k],
                                 bbox=[round(float(v), 1) for v in (x0, y0, x1 - x0, y1 - y0)],
                                 segmentation=[[round(float(v), 1) for v in pts.reshape(-1)]],
                                 area=round(_polygon_area(pts), 1), iscrowd=0))
            name = f'{split}_{image_id:05d}.jpg'
            cv2.imwrite(osp.join(out_dir, 'images', split, name), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            images.append(dict(id=image_id, file_name=name, height=h, width=w))
        with open(osp.join(out_dir, 'annotations', f'{split}.json'), 'w') as f:
            json.dump(dict(images=images, annotations=anns, categories=categories), f)
    return out_dir


def make_custom_ade(out_dir: str, classes: Sequence[str] = DEFAULT_CLASSES['ade'], seed: int = 0,
                    zero_is_unlabelled: bool = True, splits=(('training', 6), ('validation', 3)),
                    hw=(96, 128)) -> str:
    """ADE20K-layout semantic segmentation; class 0 fills the scene, the others are shapes on it."""
    cv2 = _cv2()
    rng = np.random.default_rng([seed, 102])
    shift = 1 if zero_is_unlabelled else 0
    h, w = hw
    for folder, num in splits:
        os.makedirs(osp.join(out_dir, 'images', folder), exist_ok=True)
        os.makedirs(osp.join(out_dir, 'annotations', folder), exist_ok=True)
        for i in range(num):
            img = _noisy_background(rng, (h, w))
            label = np.full((h, w), shift, np.uint8)  # class 0: the scene
            shapes = _place_shapes(rng, min(4, len(classes) - 1), (h, w), (12, 22))
            for j, (cx, cy, r) in enumerate(shapes):
                k = 1 + (i * 4 + j) % (len(classes) - 1)
                shape, colour = class_look(k)
                pts = _shape_polygon(rng, shape, cx, cy, r)
                _fill(cv2, img, pts, colour)
                _fill(cv2, label, pts, (k + shift,))
            if zero_is_unlabelled:
                label[:, :2] = 0  # a thin unlabelled border
            name = f'{folder}_{i + 1:05d}'
            cv2.imwrite(osp.join(out_dir, 'images', folder, name + '.jpg'), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            cv2.imwrite(osp.join(out_dir, 'annotations', folder, name + '.png'), label)
    _write_lines(osp.join(out_dir, 'classes.txt'), classes)
    return out_dir


def make_custom_video(out_dir: str, classes: Sequence[str] = DEFAULT_CLASSES['video'], seed: int = 0,
                      splits=(('train', 2), ('val', 1)), frames: int = 8, hw=(64, 64)) -> str:
    """Video lists: in class k a blob of colour group k // 4 moves in direction k % 4. (decord 0.6 cannot
    decode 48-pixel-wide mp4 frames: its frames come back with 4 channels.)"""
    cv2 = _cv2()
    rng = np.random.default_rng([seed, 103])
    h, w = hw
    r, travel = 5, 20
    for split, per_class in splits:
        folder = osp.join(out_dir, 'videos', split)
        os.makedirs(folder, exist_ok=True)
        lines = []
        for rep in range(per_class):
            for k in range(len(classes)):
                direction = DIRECTIONS[k % 4]
                colour = COLOURS[(k // 4) % len(COLOURS)]
                a = rng.uniform(r + 2, w - r - 2 - travel)
                other = rng.uniform(r + 2, h - r - 2)
                steps = np.linspace(0, travel, frames)
                along = a + steps if direction in ('right', 'down') else a + travel - steps
                xs, ys = (along, np.full(frames, other)) if direction in ('right', 'left') else \
                    (np.full(frames, other), along)
                bg = rng.integers(60, 120, size=3)
                clip = []
                for t in range(frames):
                    f = np.clip(bg[None, None] + rng.normal(0, 6, size=(h, w, 3)), 0, 255).astype(np.uint8)
                    cv2.circle(f, (int(round(xs[t])), int(round(ys[t]))), r, tuple(int(c) for c in colour), -1)
                    clip.append(f)
                name = f'{classes[k]}_{rep:03d}.mp4'
                _write_mp4(osp.join(folder, name), clip)
                lines.append(f'{name} {k}')
        _write_lines(osp.join(out_dir, f'{split}_list.txt'), lines)
    _write_lines(osp.join(out_dir, 'classes.txt'), classes)
    return out_dir


def make_custom_imagenet(out_dir: str, classes: Sequence[str] = DEFAULT_CLASSES['imagenet'], seed: int = 0,
                         ann_files: bool = False, splits=(('train', 4), ('val', 2)), hw=(48, 48)) -> str:
    """ImageNet-style ``{split}/<class>/*.jpg`` folders (and, with ``ann_files``, ``meta/*.txt`` lists)."""
    cv2 = _cv2()
    rng = np.random.default_rng([seed, 104])
    h, w = hw
    for split, per_class in splits:
        lines = []
        for k, name in enumerate(classes):
            os.makedirs(osp.join(out_dir, split, name), exist_ok=True)
            shape, colour = class_look(k)
            for i in range(per_class):
                img = _noisy_background(rng, (h, w))
                r = rng.uniform(12, 18)
                cx, cy = rng.uniform(r + 3, w - r - 3), rng.uniform(r + 3, h - r - 3)
                _fill(cv2, img, _shape_polygon(rng, shape, cx, cy, r), colour)
                fname = f'{name}_{i:04d}.jpg'
                cv2.imwrite(osp.join(out_dir, split, name, fname), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
                lines.append(f'{name}/{fname} {k}')
        if ann_files:
            os.makedirs(osp.join(out_dir, 'meta'), exist_ok=True)
            _write_lines(osp.join(out_dir, 'meta', f'{split}.txt'), lines)
    if ann_files:
        _write_lines(osp.join(out_dir, 'meta', 'classes.txt'), classes)
    return out_dir


MAKERS = {'coco': make_custom_coco, 'ade': make_custom_ade, 'video': make_custom_video,
          'imagenet': make_custom_imagenet}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--task', required=True, choices=TASKS)
    parser.add_argument('--out', required=True, help='dataset root to write')
    parser.add_argument('--classes', help='comma-separated class names (default: ' +
                        '; '.join(f'{t}: {",".join(c)}' for t, c in DEFAULT_CLASSES.items()) + ')')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--zero-based', action='store_true',
                        help='ade: store class i as label i (default: i + 1, with 0 = unlabelled as in ADE20K)')
    parser.add_argument('--ann-files', action='store_true',
                        help='imagenet: also write meta/{train,val}.txt and meta/classes.txt')
    args = parser.parse_args(argv)
    classes = tuple(c.strip() for c in args.classes.split(',') if c.strip()) if args.classes else \
        DEFAULT_CLASSES[args.task]
    if len(classes) < 2 or len(set(classes)) != len(classes):
        parser.error(f'--classes needs at least 2 distinct names, got {list(classes)}')
    kwargs = dict(seed=args.seed)
    if args.task == 'ade':
        kwargs['zero_is_unlabelled'] = not args.zero_based
    if args.task == 'imagenet':
        kwargs['ann_files'] = args.ann_files
    root = MAKERS[args.task](args.out, classes, **kwargs)
    print(f'{args.task}: {len(classes)} classes ({", ".join(classes)}) -> {root}')


if __name__ == '__main__':
    main()
