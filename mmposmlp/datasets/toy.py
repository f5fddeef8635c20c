"""Tiny generated datasets in the real on-disk formats (issue 2, item 5).

``make_toy_datasets(out_dir, seed=0)`` writes, in a few seconds and deterministically from ``seed``:

* ``coco/``: COCO instances (``annotations/instances_{train,val}2017.json``, ``train2017/``, ``val2017/``).
  Images of large, easy shapes on noisy backgrounds; each shape class is one REAL COCO category with its
  real id (circle = person(1), rectangle = bicycle(2), triangle = car(3)), so the default 80-class mmdet
  configs work unmodified. Annotations have boxes (xywh), polygon segmentations, areas and ``iscrowd=0``.
* ``ade/ADEChallengeData2016/``: ADE20K layout (``images/{training,validation}/*.jpg`` and
  ``annotations/{training,validation}/*.png``). Label 0 is "other/ignore" (ADE20K's reduce_zero_label
  convention); the classes used are in 1..150.
* ``kinetics400/``: Kinetics-400 style ``videos_{train,val}/*.mp4`` + ``kinetics400_{train,val}_list_videos.txt``
  (``relpath label`` lines, paths relative to the video folder). In every clip a blob moves in one of four
  directions and the CLASS IS THE DIRECTION (0 right, 1 left, 2 down, 3 up): the positions the blob visits
  have the same distribution in every class, so a single frame cannot tell the class; the order of frames does.
* ``imagenet/``: ``{train,val}/<wnid>/*.JPEG`` + ``meta/{train,val}.txt`` (mmpretrain ImageNet format, paths
  relative to the split folder). Four real ImageNet classes with their real indices 0..3. Also
  ``imagenet/toy_teacher_cpvt.pth``: the frozen teacher of the toy distillation config
  (``configs/cpvt/toy/cpvt-ti-distilled_toy-in1k.py``), an mmpretrain ``ImageClassifier`` state dict
  (:data:`TOY_TEACHER`) with seeded random weights: it exercises the distillation machinery, it teaches
  nothing.
"""
import json
import os
import os.path as osp
from typing import Dict, Iterable, Sequence, Tuple

import numpy as np

ALL_DATASETS = ('coco', 'ade20k', 'kinetics', 'imagenet')

# (shape, real COCO id, real COCO name, BGR colour)
COCO_CLASSES = (('circle', 1, 'person', (40, 40, 230)),
                ('rectangle', 2, 'bicycle', (40, 200, 40)),
                ('triangle', 3, 'car', (230, 120, 30)))
COCO_SUPERCATEGORY = {'person': 'person', 'bicycle': 'vehicle', 'car': 'vehicle'}
# All 80 COCO categories (real ids) are listed in the json, as in real COCO, so that a detector predicting
# any of the 80 classes is evaluated normally; the images only contain the three above.
COCO80_NAMES = (
    'person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus', 'train', 'truck', 'boat', 'traffic light',
    'fire hydrant', 'stop sign', 'parking meter', 'bench', 'bird', 'cat', 'dog', 'horse', 'sheep', 'cow',
    'elephant', 'bear', 'zebra', 'giraffe', 'backpack', 'umbrella', 'handbag', 'tie', 'suitcase', 'frisbee', 'skis',
    'snowboard', 'sports ball', 'kite', 'baseball bat', 'baseball glove', 'skateboard', 'surfboard',
    'tennis racket', 'bottle', 'wine glass', 'cup', 'fork', 'knife', 'spoon', 'bowl', 'banana', 'apple',
    'sandwich', 'orange', 'broccoli', 'carrot', 'hot dog', 'pizza', 'donut', 'cake', 'chair', 'couch',
    'potted plant', 'bed', 'dining table', 'toilet', 'tv', 'laptop', 'mouse', 'remote', 'keyboard', 'cell phone',
    'microwave', 'oven', 'toaster', 'sink', 'refrigerator', 'book', 'clock', 'vase', 'scissors', 'teddy bear',
    'hair drier', 'toothbrush')
COCO80_IDS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
              33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
              60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90)
COCO_IMG_HW = (320, 416)
COCO_SPLITS = (('train2017', 16), ('val2017', 8))

# ADE20K label ids (1-based as in the PNGs; reduce_zero_label maps them to 0..149):
# 1 wall (background of the scene), 3 sky (top band), 13 person (circles), 21 car (rectangles).
ADE_BACKGROUND = 1
ADE_SKY = 3
ADE_SHAPES = (('circle', 13, (60, 60, 220)), ('rectangle', 21, (220, 160, 40)))
ADE_IMG_HW = (128, 160)
ADE_SPLITS = (('training', 'train', 8), ('validation', 'val', 4))

KINETICS_DIRECTIONS = ('right', 'left', 'down', 'up')  # label = index
KINETICS_FRAMES = 16
KINETICS_HW = (64, 64)
KINETICS_SPLITS = (('train', 4), ('val', 2))  # clips per class

IMAGENET_CLASSES = (('n01440764', 'circle'), ('n01443537', 'square'), ('n01484850', 'triangle'),
                    ('n01491361', 'cross'))  # real wnids with their real indices 0..3
IMAGENET_HW = (64, 64)
IMAGENET_SPLITS = (('train', 6), ('val', 3))  # images per class


def _cv2():
    import cv2
    cv2.setNumThreads(1)
    return cv2


def _noisy_background(rng: np.random.Generator, hw: Tuple[int, int]) -> np.ndarray:
    base = rng.integers(90, 170, size=3)
    noise = rng.normal(0, 12, size=(*hw, 3))
    return np.clip(base[None, None, :] + noise, 0, 255).astype(np.uint8)


def _shape_polygon(rng: np.random.Generator, shape: str, cx: float, cy: float, r: float) -> np.ndarray:
    """Polygon (N, 2) in (x, y) pixels of a shape of 'radius' r centred at (cx, cy)."""
    if shape == 'circle':
        t = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        pts = np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], 1)
    elif shape in ('rectangle', 'square'):
        aspect = rng.uniform(0.6, 1.4) if shape == 'rectangle' else 1.0
        w, h = r * 1.6 * aspect, r * 1.6 / aspect
        w, h = min(w, 2 * r), min(h, 2 * r)
        pts = np.array([[cx - w / 2, cy - h / 2], [cx + w / 2, cy - h / 2], [cx + w / 2, cy + h / 2],
                        [cx - w / 2, cy + h / 2]])
    elif shape == 'triangle':
        t = np.array([-np.pi / 2, np.pi / 6, 5 * np.pi / 6])
        pts = np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], 1)
    elif shape == 'cross':
        a, b = r, r / 3
        pts = np.array([[-b, -a], [b, -a], [b, -b], [a, -b], [a, b], [b, b], [b, a], [-b, a], [-b, b], [-a, b],
                        [-a, -b], [-b, -b]]) + np.array([cx, cy])
    else:
        raise ValueError(f'unknown shape {shape!r}')
    return np.round(pts, 1)


def _polygon_area(pts: np.ndarray) -> float:
    x, y = pts[:, 0], pts[:, 1]
    return float(0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def _place_shapes(rng: np.random.Generator, n: int, hw: Tuple[int, int], r_range: Tuple[float, float],
                  tries: int = 200):
    """Non-overlapping circles (cx, cy, r) fully inside the image."""
    h, w = hw
    placed = []
    for _ in range(tries):
        if len(placed) == n:
            break
        r = rng.uniform(*r_range)
        cx, cy = rng.uniform(r + 2, w - r - 2), rng.uniform(r + 2, h - r - 2)
        if all((cx - px) ** 2 + (cy - py) ** 2 > (r + pr + 6) ** 2 for px, py, pr in placed):
            placed.append((cx, cy, r))
    return placed


def _fill(cv2, img: np.ndarray, pts: np.ndarray, colour) -> None:
    cv2.fillPoly(img, [np.round(pts).astype(np.int32)], tuple(int(c) for c in colour), lineType=cv2.LINE_8)


def make_toy_coco(out_dir: str, rng: np.random.Generator) -> str:
    cv2 = _cv2()
    root = osp.join(out_dir, 'coco')
    os.makedirs(osp.join(root, 'annotations'), exist_ok=True)
    categories = [dict(id=cid, name=name, supercategory=COCO_SUPERCATEGORY.get(name, 'object'))
                  for cid, name in zip(COCO80_IDS, COCO80_NAMES)]
    h, w = COCO_IMG_HW
    image_id, ann_id = 0, 0
    for split, num in COCO_SPLITS:
        os.makedirs(osp.join(root, split), exist_ok=True)
        images, anns = [], []
        for i in range(num):
            image_id += 1
            img = _noisy_background(rng, (h, w))
            # 2-3 shapes per image; classes cycle so that every split holds every class about equally
            n = int(rng.integers(2, 4))
            for cx, cy, r in _place_shapes(rng, n, (h, w), (42, 72)):
                shape, cid, _, colour = COCO_CLASSES[len(anns) % len(COCO_CLASSES)]
                pts = _shape_polygon(rng, shape, cx, cy, r)
                pts[:, 0] = np.clip(pts[:, 0], 0, w - 1)
                pts[:, 1] = np.clip(pts[:, 1], 0, h - 1)
                jitter = rng.integers(-20, 21, size=3)
                _fill(cv2, img, pts, np.clip(np.array(colour) + jitter, 0, 255))
                x0, y0 = pts.min(0)
                x1, y1 = pts.max(0)
                ann_id += 1
                anns.append(dict(id=ann_id, image_id=image_id, category_id=cid,
                                 bbox=[round(float(x0), 1), round(float(y0), 1), round(float(x1 - x0), 1),
                                       round(float(y1 - y0), 1)],
                                 segmentation=[[round(float(v), 1) for v in pts.reshape(-1)]],
                                 area=round(_polygon_area(pts), 1), iscrowd=0))
            name = f'{image_id:012d}.jpg'
            cv2.imwrite(osp.join(root, split, name), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            images.append(dict(id=image_id, file_name=name, height=h, width=w, license=1))
        ann = dict(info=dict(description=f'mmposmlp toy COCO ({split})', version='1.0', year=2017),
                   licenses=[dict(id=1, name='CC0', url='')], images=images, annotations=anns,
                   categories=categories)
        with open(osp.join(root, 'annotations', f'instances_{split}.json'), 'w') as f:
            json.dump(ann, f)
    return root


def make_toy_ade20k(out_dir: str, rng: np.random.Generator) -> str:
    cv2 = _cv2()
    root = osp.join(out_dir, 'ade', 'ADEChallengeData2016')
    h, w = ADE_IMG_HW
    for folder, prefix, num in ADE_SPLITS:
        os.makedirs(osp.join(root, 'images', folder), exist_ok=True)
        os.makedirs(osp.join(root, 'annotations', folder), exist_ok=True)
        for i in range(num):
            img = _noisy_background(rng, (h, w))
            label = np.full((h, w), ADE_BACKGROUND, np.uint8)
            sky = int(rng.integers(h // 6, h // 3))
            img[:sky] = np.clip(img[:sky].astype(int) + np.array([80, 30, -40]), 0, 255).astype(np.uint8)
            label[:sky] = ADE_SKY
            for cx, cy, r in _place_shapes(rng, int(rng.integers(1, 4)), (h, w), (16, 30)):
                shape, cls, colour = ADE_SHAPES[int(rng.integers(0, len(ADE_SHAPES)))]
                pts = _shape_polygon(rng, shape, cx, cy, r)
                _fill(cv2, img, pts, colour)
                _fill(cv2, label, pts, (cls,))
            label[:, :2] = 0  # a thin unlabelled border: 0 is ignored (reduce_zero_label -> 255)
            name = f'ADE_{prefix}_{i + 1:08d}'
            cv2.imwrite(osp.join(root, 'images', folder, name + '.jpg'), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            cv2.imwrite(osp.join(root, 'annotations', folder, name + '.png'), label)
    return root


def _write_mp4(path: str, frames: Sequence[np.ndarray], fps: int = 8) -> None:
    """Write RGB uint8 frames as an MPEG-4 part 2 .mp4 (readable by decord, PyAV and OpenCV)."""
    import av
    with av.open(path, mode='w', format='mp4') as container:
        stream = container.add_stream('mpeg4', rate=fps)
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = 'yuv420p'
        stream.bit_rate = 400_000
        stream.codec_context.thread_count = 1
        stream.codec_context.options = {'qscale': '2'}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def make_toy_kinetics(out_dir: str, rng: np.random.Generator) -> str:
    cv2 = _cv2()
    root = osp.join(out_dir, 'kinetics400')
    h, w = KINETICS_HW
    t = KINETICS_FRAMES
    travel = 32  # pixels over the clip, 2 px per frame
    r = 7
    for split, per_class in KINETICS_SPLITS:
        folder = osp.join(root, f'videos_{split}')
        os.makedirs(folder, exist_ok=True)
        lines = []
        k = 0
        for rep in range(per_class):
            for label, direction in enumerate(KINETICS_DIRECTIONS):
                bg = rng.integers(60, 120, size=3)
                colour = rng.integers(180, 256, size=3)
                # start so that the whole path stays inside; the visited positions are symmetric per class
                lo, hi = r + 2, w - r - 2 - travel
                a = rng.uniform(lo, hi)
                other = rng.uniform(r + 2, h - r - 2)
                steps = np.linspace(0, travel, t)
                if direction == 'right':
                    xs, ys = a + steps, np.full(t, other)
                elif direction == 'left':
                    xs, ys = a + travel - steps, np.full(t, other)
                elif direction == 'down':
                    xs, ys = np.full(t, other), a + steps
                else:
                    xs, ys = np.full(t, other), a + travel - steps
                noise = rng.normal(0, 6, size=(t, h, w, 3))
                frames = []
                for i in range(t):
                    f = np.clip(bg[None, None] + noise[i], 0, 255).astype(np.uint8)
                    cv2.circle(f, (int(round(xs[i])), int(round(ys[i]))), r, tuple(int(c) for c in colour), -1)
                    frames.append(f)
                name = f'{direction}_{k:04d}.mp4'
                k += 1
                _write_mp4(osp.join(folder, name), frames)
                lines.append(f'{name} {label}')
        with open(osp.join(root, f'kinetics400_{split}_list_videos.txt'), 'w') as f:
            f.write('\n'.join(lines) + '\n')
    return root


def make_toy_imagenet(out_dir: str, rng: np.random.Generator) -> str:
    cv2 = _cv2()
    root = osp.join(out_dir, 'imagenet')
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    h, w = IMAGENET_HW
    for split, per_class in IMAGENET_SPLITS:
        lines = []
        for label, (wnid, shape) in enumerate(IMAGENET_CLASSES):
            os.makedirs(osp.join(root, split, wnid), exist_ok=True)
            for i in range(per_class):
                img = _noisy_background(rng, (h, w))
                r = rng.uniform(16, 24)
                cx, cy = rng.uniform(r + 4, w - r - 4), rng.uniform(r + 4, h - r - 4)
                _fill(cv2, img, _shape_polygon(rng, shape, cx, cy, r), rng.integers(0, 256, size=3))
                name = f'{wnid}_{split}_{i:05d}.JPEG'
                cv2.imwrite(osp.join(root, split, wnid, name), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
                lines.append(f'{wnid}/{name} {label}')
        with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
            f.write('\n'.join(lines) + '\n')
    make_toy_teacher(osp.join(root, TOY_TEACHER['file']), seed=int(rng.integers(2**31)))
    return root


#: the toy distillation teacher: ``ImageClassifier(backbone=mmposmlp.CPVT(arch, peg_positions),
#: head=LinearClsHead(num_classes, in_channels=arch['embed_dims']))``, keys ``backbone.*`` / ``head.fc.*``
TOY_TEACHER = dict(file='toy_teacher_cpvt.pth',
                   arch=dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
                   peg_positions=(0, ), num_classes=1000)


def make_toy_teacher(path: str, seed: int = 0) -> str:
    """Write the :data:`TOY_TEACHER` state dict (random weights from ``seed``) to ``path``."""
    import torch

    from mmposmlp.models.backbones.cpvt import CPVT
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        backbone = CPVT(TOY_TEACHER['arch'], peg_positions=TOY_TEACHER['peg_positions'])
        fc = torch.nn.Linear(TOY_TEACHER['arch']['embed_dims'], TOY_TEACHER['num_classes'])
    state = {f'backbone.{k}': v for k, v in backbone.state_dict().items()}
    state.update({f'head.fc.{k}': v for k, v in fc.state_dict().items()})
    torch.save({'state_dict': state}, path)
    return path


_MAKERS = {'coco': make_toy_coco, 'ade20k': make_toy_ade20k, 'kinetics': make_toy_kinetics,
           'imagenet': make_toy_imagenet}
_ALIASES = {'ade': 'ade20k', 'kinetics400': 'kinetics', 'coco2017': 'coco'}


def make_toy_datasets(out_dir: str, seed: int = 0, which: Iterable[str] = ALL_DATASETS) -> Dict[str, str]:
    """Generate the toy datasets under ``out_dir``; returns ``{name: root}`` of what was written.

    Every dataset uses its own random stream derived from ``seed``, so ``which`` does not change the
    content of the others.
    """
    if isinstance(which, str):
        which = [w.strip() for w in which.split(',') if w.strip()]
    names = [_ALIASES.get(w, w) for w in which]
    unknown = [w for w in names if w not in _MAKERS]
    if unknown:
        raise ValueError(f'unknown toy dataset(s) {unknown}: choose from {list(ALL_DATASETS)}')
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for name in ALL_DATASETS:
        if name in names:
            rng = np.random.default_rng([seed, ALL_DATASETS.index(name)])
            out[name] = _MAKERS[name](out_dir, rng)
    return out
