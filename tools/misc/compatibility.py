#!/usr/bin/env python
"""Which upstream detectors, segmentors, recognizers and classifier heads run with which of our backbones.

    python tools/misc/compatibility.py --write            # run the whole matrix, write docs/compatibility.md
    python tools/misc/compatibility.py --check            # run it and compare with docs/compatibility.md
    python tools/misc/compatibility.py --cases 'RetinaNet/*' --procs 1   # a subset, results printed

Every case loads a library's own config unmodified, puts a small instance of one of our backbones in place of
its backbone, sets the consumers' ``in_channels`` (and the settings listed in the table), and runs two training
steps and one inference at an odd input size (weights set by the model's ``init_weights()``, as mmengine's Runner
does), in one process and, for the PosMLP cases, in two (torch DDP over gloo,
``find_unused_parameters=False``). A case passes when the losses are finite, every trainable parameter received a
gradient in the first step, and inference returns one prediction per input. A case listed as refused must end
with the sentence shown in the table. ``tests/test_compatibility.py`` runs a representative set and checks the
document against it; the whole matrix is its ``slow`` test.
"""
import argparse
import fnmatch
import os
import os.path as osp
import sys
import tempfile
import traceback

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DOC = osp.join(ROOT, 'docs', 'compatibility.md')
IMAGE_SIZE = (67, 93)  # odd on purpose: every stage of every backbone sees a size that is not a multiple of 2
VIDEO_SIZE = (4, 45, 51)  # frames, height, width
SEGMENTS = 3  # frames of a 2-D recognizer's clip

# small instances of our backbones (4 stages; per-stage channels)
IMAGE_BACKBONES = {
    'PosMLP': (dict(arch=dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups=[2, 4, 8, 16],
                              mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7])), [16, 32, 64, 128]),
    'WaveMLP': (dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[16, 32, 48, 64], mlp_ratios=[2, 2, 2, 2])),
                [16, 32, 48, 64]),
    'PVTPEG': (dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[16, 32, 48, 64], num_heads=[1, 2, 3, 4],
                              mlp_ratios=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1])), [16, 32, 48, 64]),
}
VIDEO_BACKBONES = {
    'PosMLPVideo': (dict(arch=dict(embed_dims=[16, 32, 32, 64], depths=[1, 1, 1, 1], mlp_ratio=2,
                                   groups=[2, 2, 4, 4],
                                   window_sizes=[(2, 4, 4), (2, 4, 4), (2, 2, 2), (2, 2, 2)])), [16, 32, 32, 64]),
}


# ---------------------------------------------------------------------------------------------------------------
# consumers: (library, upstream config, adapter, backbones). An adapter edits the loaded config for backbone
# ``bb`` (a dict) with per-stage channels ``ch`` and returns the settings it chose (shown in the table).
# ---------------------------------------------------------------------------------------------------------------

def _small_det(m):
    if 'data_preprocessor' in m:
        m.data_preprocessor.pad_size_divisor = 1
        m.data_preprocessor.pop('batch_augments', None)


def fpn_all(cfg, bb, ch):
    """Two-stage detectors and Sparse R-CNN: the FPN reads all four stages."""
    m = cfg.model
    m.backbone = dict(bb, out_indices=(0, 1, 2, 3))
    m.neck.in_channels = list(ch)
    _small_det(m)
    return 'out_indices=(0, 1, 2, 3)'


def fpn_from_stage_1(cfg, bb, ch):
    """RetinaNet, FCOS, ATSS: their FPN starts at the stride-8 stage (``start_level=1``); as mmdet's Swin configs
    do, request stages 1-3 only and start the FPN at its first input."""
    m = cfg.model
    m.backbone = dict(bb, out_indices=(1, 2, 3))
    m.neck.in_channels = list(ch[1:])
    m.neck.start_level = 0
    _small_det(m)
    return 'out_indices=(1, 2, 3), neck start_level=0'


def channel_mapper(cfg, bb, ch):
    """DINO and Deformable DETR: a ChannelMapper over stages 1-3 (+ one extra level)."""
    m = cfg.model
    m.backbone = dict(bb, out_indices=(1, 2, 3))
    m.neck.in_channels = list(ch[1:])
    _small_det(m)
    return 'out_indices=(1, 2, 3)'


def dino(cfg, bb, ch):
    """DINO selects its queries among the encoder's tokens: a small image has fewer than its 900."""
    channel_mapper(cfg, bb, ch)
    cfg.model.num_queries = 100
    return 'out_indices=(1, 2, 3), num_queries=100'


def yolox(cfg, bb, ch):
    """YOLOX's PAFPN concatenates 2x-upsampled maps with the next level: inputs stay padded to 32."""
    m = cfg.model
    m.backbone = dict(bb, out_indices=(1, 2, 3))
    m.neck.in_channels = list(ch[1:])
    m.data_preprocessor.pop('batch_augments', None)
    return 'out_indices=(1, 2, 3), input padded to a multiple of 32'


def mask2former_det(cfg, bb, ch):
    m = cfg.model
    m.backbone = dict(bb, out_indices=(0, 1, 2, 3))
    m.panoptic_head.in_channels = list(ch)
    _small_det(m)
    return 'out_indices=(0, 1, 2, 3)'


def _seg(m, bb, out_indices):
    m.pretrained = None
    m.backbone = dict(bb, out_indices=out_indices)
    m.data_preprocessor.size = IMAGE_SIZE


def uper(cfg, bb, ch):
    m = cfg.model
    _seg(m, bb, (0, 1, 2, 3))
    m.decode_head.in_channels = list(ch)
    m.auxiliary_head.in_channels = ch[2]
    return 'out_indices=(0, 1, 2, 3)'


def decode_head_all(cfg, bb, ch):
    """A decode head reading all four stages itself: SegFormer's MLP head, Mask2Former's pixel decoder."""
    m = cfg.model
    _seg(m, bb, (0, 1, 2, 3))
    m.decode_head.in_channels = list(ch)
    return 'out_indices=(0, 1, 2, 3)'


def sem_fpn(cfg, bb, ch):
    m = cfg.model
    _seg(m, bb, (0, 1, 2, 3))
    m.neck.in_channels = list(ch)
    return 'out_indices=(0, 1, 2, 3)'


def deeplabv3plus(cfg, bb, ch):
    """DeepLabV3+ reads stage 0 (c1 branch) and stage 3, its auxiliary head stage 2: stage 1 is not requested."""
    m = cfg.model
    _seg(m, bb, (0, 2, 3))
    m.decode_head.update(in_channels=ch[3], in_index=2, c1_in_channels=ch[0])
    m.auxiliary_head.update(in_channels=ch[2], in_index=1)
    return 'out_indices=(0, 2, 3), decode_head in_index=2, auxiliary_head in_index=1'


def recognizer3d(cfg, bb, ch):
    m = cfg.model
    m.backbone = dict(bb, out_indices=(3, ))
    m.cls_head.in_channels = ch[3]
    m.cls_head.num_classes = 3
    return 'out_indices=(3,)'


def recognizer2d(cfg, bb, ch):
    m = cfg.model
    m.backbone = dict(type='mmposmlp.SingleTensorBackbone', backbone=dict(bb, out_indices=(3, )))
    m.cls_head.in_channels = ch[3]
    m.cls_head.num_classes = 3
    return 'SingleTensorBackbone, out_indices=(3,)'


def tsm(cfg, bb, ch):
    """TSM's optimizer constructor knows convolutions, BN and linear layers only (a LayerNorm is refused)."""
    recognizer2d(cfg, bb, ch)
    cfg.optim_wrapper.constructor = 'DefaultOptimWrapperConstructor'
    cfg.optim_wrapper.pop('paramwise_cfg', None)
    return 'SingleTensorBackbone, out_indices=(3,), optim_wrapper constructor=DefaultOptimWrapperConstructor'


def classifier(cfg, bb, ch):
    m = cfg.model
    m.backbone = dict(bb, out_indices=(3, ))
    m.head.in_channels = ch[3]
    m.head.num_classes = 3
    if m.get('neck') is None:
        m.neck = dict(type='GlobalAveragePooling')
    # the config's top-level data_preprocessor (mmpretrain's Runner puts it into the model); Mixup/CutMix in
    # the recipes need the number of classes
    m.data_preprocessor = dict(cfg.get('data_preprocessor') or {}, num_classes=3)
    return 'out_indices=(3,), GlobalAveragePooling neck'


UPSTREAM = 'own backbone'  # the control: the config's own backbone
IMAGE = tuple(IMAGE_BACKBONES)
DENSE = IMAGE + (UPSTREAM, )
VIDEO = tuple(VIDEO_BACKBONES)
CONSUMERS = {
    # name: (library, upstream config, adapter, backbones)
    'Cascade Mask R-CNN': ('mmdet', 'cascade_rcnn/cascade-mask-rcnn_r50_fpn_1x_coco.py', fpn_all, DENSE),
    'RetinaNet': ('mmdet', 'retinanet/retinanet_r50_fpn_1x_coco.py', fpn_from_stage_1, DENSE),
    'FCOS': ('mmdet', 'fcos/fcos_r50-caffe_fpn_gn-head_1x_coco.py', fpn_from_stage_1, DENSE),
    'ATSS': ('mmdet', 'atss/atss_r50_fpn_1x_coco.py', fpn_from_stage_1, DENSE),
    'DINO': ('mmdet', 'dino/dino-4scale_r50_8xb2-12e_coco.py', dino, DENSE),
    'Deformable DETR': ('mmdet', 'deformable_detr/deformable-detr_r50_16xb2-50e_coco.py', channel_mapper, DENSE),
    'Mask2Former (instance)': ('mmdet', 'mask2former/mask2former_r50_8xb2-lsj-50e_coco.py', mask2former_det,
                               DENSE),
    'YOLOX': ('mmdet', 'yolox/yolox_s_8xb8-300e_coco.py', yolox, DENSE),
    'Sparse R-CNN': ('mmdet', 'sparse_rcnn/sparse-rcnn_r50_fpn_1x_coco.py', fpn_all, DENSE),
    'UperNet': ('mmseg', 'upernet/upernet_r50_4xb4-80k_ade20k-512x512.py', uper, DENSE),
    'SegFormer head': ('mmseg', 'segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py', decode_head_all,
                       DENSE),
    'Semantic FPN': ('mmseg', 'sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py', sem_fpn, DENSE),
    'Mask2Former (semantic)': ('mmseg', 'mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py',
                               decode_head_all, DENSE),
    'DeepLabV3+': ('mmseg', 'deeplabv3plus/deeplabv3plus_r50-d8_4xb4-80k_ade20k-512x512.py', deeplabv3plus, DENSE),
    'I3D head': ('mmaction', 'recognition/i3d/i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb.py',
                 recognizer3d, VIDEO),
    'TimeSformer head': ('mmaction', 'recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py',
                         recognizer3d, VIDEO),
    'TSN': ('mmaction', 'recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py',
            recognizer2d, IMAGE),
    'TSM head': ('mmaction', 'recognition/tsm/tsm_imagenet-pretrained-r50_8xb16-1x1x8-50e_kinetics400-rgb.py',
                 tsm, IMAGE),
    'LinearClsHead (ResNet)': ('mmpretrain', 'resnet/resnet50_8xb32_in1k.py', classifier, IMAGE),
    'LinearClsHead (Swin)': ('mmpretrain', 'swin_transformer/swin-tiny_16xb64_in1k.py', classifier, IMAGE),
    'VisionTransformerClsHead (DeiT)': ('mmpretrain', 'deit/deit-tiny_4xb256_in1k.py', classifier, IMAGE),
    'LinearClsHead (Twins)': ('mmpretrain', 'twins/twins-pcpvt-small_8xb128_in1k.py', classifier, IMAGE),
}
LIBRARY_TITLES = {'mmdet': 'Detection and instance segmentation (mmdet)', 'mmseg': 'Semantic segmentation (mmseg)',
                  'mmaction': 'Video recognition (mmaction2)', 'mmpretrain': 'Image classification (mmpretrain)'}


def all_cases():
    """Case ids ``'<consumer>/<backbone>'`` in table order."""
    return [f'{c}/{b}' for c, (_, _, _, bbs) in CONSUMERS.items() for b in bbs]


def select(patterns):
    ids = all_cases()
    chosen = [i for i in ids if any(fnmatch.fnmatchcase(i, p) for p in patterns)]
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(i, p) for i in ids)]
    if unknown:
        raise SystemExit(f'no case matches {unknown}; cases are {ids}')
    return chosen


# ---------------------------------------------------------------------------------------------------------------
# running a case
# ---------------------------------------------------------------------------------------------------------------

def case_config(case_id):
    """``(cfg, settings)``: the library's own config with our backbone ``case_id`` names."""
    from mmengine.config import Config
    consumer, backbone = case_id.split('/')
    library, ref, adapt, _ = CONSUMERS[consumer]
    kwargs, channels = {**IMAGE_BACKBONES, **VIDEO_BACKBONES}.get(backbone, ({}, None))
    with tempfile.NamedTemporaryFile('w', suffix='.py', delete=False) as f:
        f.write(f"_base_ = '{library}::{ref}'\n")
    try:
        cfg = Config.fromfile(f.name)
    finally:
        os.unlink(f.name)
    if backbone == UPSTREAM:
        return cfg, upstream_control(cfg, adapt)
    settings = adapt(cfg, dict(type=f'mmposmlp.{backbone}', **kwargs), channels)
    return cfg, settings


def upstream_control(cfg, adapt):
    """The config's own backbone (random weights) with the same input and consumer settings: a case that fails
    here too fails because of the consumer at this size, not because of our backbone."""
    m = cfg.model
    m.backbone.pop('init_cfg', None)
    m.backbone.pop('pretrained', None)
    if 'decode_head' in m:  # mmseg
        m.pretrained = None
        m.data_preprocessor.size = IMAGE_SIZE
    elif adapt is yolox:
        m.data_preprocessor.pop('batch_augments', None)
    else:
        _small_det(m)
    if adapt is dino:
        m.num_queries = 100
    return ''


def _batch(scope, consumer, model):
    from mmposmlp.testing import fake_batch
    if scope != 'mmaction':
        return fake_batch(scope, shape=IMAGE_SIZE)
    if CONSUMERS[consumer][2] in (recognizer2d, tsm):  # TSM's head reshapes by its own number of segments
        segments = getattr(model.cls_head, 'num_segments', SEGMENTS)
        return fake_batch(scope, shape=IMAGE_SIZE, clip_len=segments, video_format='NCHW')
    return fake_batch(scope, shape=VIDEO_SIZE[1:], clip_len=VIDEO_SIZE[0])


def _one_line(exc):
    text = str(exc).strip().splitlines()
    return clean(f'{type(exc).__name__}: {text[0] if text else ""}')


def clean(result):
    """A result as the document shows it: no build paths of the machine that ran it, at most 300 characters."""
    import re
    return re.sub(r' at "[^"]*"(:\d+)?', '', result)[:300]


def _optim_wrapper(model, cfg):
    """The config's own optimizer, learning rate and gradient clipping (mixed precision off: CPU)."""
    from mmengine.optim import build_optim_wrapper
    wrapper = dict(cfg.optim_wrapper)
    if wrapper.get('type') == 'AmpOptimWrapper':
        wrapper['type'] = 'OptimWrapper'
        wrapper.pop('loss_scale', None)
    return build_optim_wrapper(model, wrapper)


def case_model(case_id):
    """``(cfg, model, scope)`` of a case: built from torch's seed 0 and initialised by ``init_weights()`` as
    mmengine's Runner does (DINO's and Deformable DETR's ``level_embed`` are allocated without values and set only
    there), SyncBN as BN."""
    import torch
    from mmengine.model.utils import revert_sync_batchnorm

    from mmposmlp.testing import build_model_from_cfg
    torch.manual_seed(0)
    cfg, _ = case_config(case_id)
    model, scope = build_model_from_cfg(cfg)
    model.init_weights()
    return cfg, revert_sync_batchnorm(model), scope


def run_case(case_id, distributed=False):
    """``'passes'``, ``'refused: <sentence>'`` (our checks refused the combination) or ``'fails: <error>'``."""
    import torch
    from mmengine.model import MMDistributedDataParallel
    from mmengine.registry import DefaultScope

    from mmposmlp.engine.consumer_checks import ConsumerMismatchError, check_consumers
    from mmposmlp.engine.unused_outputs import GradientProbe, unused_message
    consumer = case_id.split('/')[0]
    try:
        cfg, model, scope = case_model(case_id)
        check_consumers(model)
        inner = model
        if distributed:
            model = MMDistributedDataParallel(module=model, broadcast_buffers=False, find_unused_parameters=False)
        data = _batch(scope, consumer, inner)
        with DefaultScope.overwrite_default_scope(scope):
            optim = _optim_wrapper(model, cfg)
            model.train()
            probe = GradientProbe(inner)
            try:
                losses = [model.train_step(data, optim)]
            finally:
                probe.close()
            unused = unused_message(inner, probe)
            if unused:
                return f'fails: {unused}'
            losses.append(model.train_step(data, optim))
            if not all(torch.isfinite(log['loss']).all() for log in losses):
                return f'fails: non-finite loss {[float(log["loss"]) for log in losses]}'
            model.eval()
            preds = model.test_step(data)
            if len(preds) != len(data['inputs']):
                return f'fails: {len(preds)} predictions for {len(data["inputs"])} inputs'
        return 'passes'
    except ConsumerMismatchError as exc:
        return f'refused: {exc}'
    except Exception as exc:  # noqa: BLE001  (the table records any failure)
        if os.environ.get('MMPOSMLP_TRACEBACK') == '1':
            traceback.print_exc()
        return f'fails: {_one_line(exc)}'


def _worker(rank, world, port, case_ids, out_dir):
    import json

    import torch.distributed as dist
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    import torch
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world)
    results = {}
    try:
        for case_id in case_ids:
            results[case_id] = run_case(case_id, distributed=True)
            per_rank = [None] * world
            dist.all_gather_object(per_rank, results[case_id])
            if rank == 0:  # as the one-process lines, so that a stopped run still documents what it finished
                print(f'{case_id} [{world}p]: {next((r for r in per_rank if r != "passes"), "passes")}', flush=True)
    finally:
        with open(osp.join(out_dir, f'rank{rank}.json'), 'w') as f:
            json.dump(results, f)
        dist.destroy_process_group()


def _importable_worker():
    """:func:`_worker` as spawned processes find it: by this module's name (a test loads the tool from its file,
    outside ``sys.modules`` and ``sys.path``)."""
    if __name__ == '__main__':
        return _worker
    import importlib
    here = osp.dirname(osp.abspath(__file__))
    if here not in sys.path:
        sys.path.append(here)
    return importlib.import_module(__name__)._worker


def run_distributed(case_ids, world=2):
    """Results of ``case_ids`` in ``world`` processes (DDP over gloo); a case passes only if every rank passed."""
    import json

    import torch.multiprocessing as mp

    from mmposmlp.utils.dist import find_free_port
    with tempfile.TemporaryDirectory() as out:
        mp.start_processes(_importable_worker(), args=(world, find_free_port(), list(case_ids), out), nprocs=world,
                           start_method='spawn')
        ranks = []
        for r in range(world):
            with open(osp.join(out, f'rank{r}.json')) as f:
                ranks.append(json.load(f))
    return {c: next((r[c] for r in ranks if r[c] != 'passes'), 'passes') for c in case_ids}


def two_process_cases():
    """The cases also run in two processes: every consumer with PosMLP (PosMLPVideo for 3-D recognizers)."""
    return [c for c in all_cases() if c.split('/')[1] in ('PosMLP', 'PosMLPVideo')]


def run_matrix(case_ids, procs=(1, 2)):
    """``{case: {procs: result}}``: each case in one process, those of :func:`two_process_cases` also in two."""
    results = {c: {} for c in case_ids}
    if 1 in procs:
        for c in case_ids:
            results[c][1] = run_case(c)
            print(f'{c} [1p]: {results[c][1]}', flush=True)
    if 2 in procs:
        runnable = [c for c in case_ids if c in two_process_cases()
                    and not results[c].get(1, 'passes').startswith('refused')]
        for c, r in run_distributed(runnable).items():
            results[c][2] = r
    return results


# ---------------------------------------------------------------------------------------------------------------
# the document
# ---------------------------------------------------------------------------------------------------------------

BEGIN = '<!-- generated by tools/misc/compatibility.py: edit the tool, then run it with --write -->'
END = '<!-- end of the generated part -->'


def cell(per_procs):
    """``'1p ✓ · 2p ✓'``; a refusal or failure is a footnote mark resolved under the table."""
    marks = []
    for procs in sorted(per_procs):
        r = per_procs[procs]
        marks.append(f'{procs}p ' + ('✓' if r == 'passes' else 'refused' if r.startswith('refused') else '✗'))
    return ' · '.join(marks)


def render(results):
    """The generated part of docs/compatibility.md for ``results`` (``run_matrix``'s output)."""
    lines = [BEGIN, '']
    notes = []
    for library, title in LIBRARY_TITLES.items():
        consumers = [c for c, v in CONSUMERS.items() if v[0] == library
                     and any(f'{c}/{b}' in results for b in v[3])]
        if not consumers:
            continue
        backbones = [b for b in (*IMAGE, *VIDEO, UPSTREAM) if any(f'{c}/{b}' in results for c in consumers)]
        lines += [f'### {title}', '', '| upstream config | our settings | ' + ' | '.join(backbones) + ' |',
                  '|---|---|' + '---|' * len(backbones)]
        for c in consumers:
            _, ref, adapt, _ = CONSUMERS[c]
            row = []
            for b in backbones:
                per = results.get(f'{c}/{b}')
                if not per:
                    row.append('')
                    continue
                text = cell(per)
                per = {k: clean(v) for k, v in per.items()}
                for procs, r in sorted(per.items()):
                    if r != 'passes' and r not in notes:
                        notes.append(r)
                for r in dict.fromkeys(r for r in per.values() if r != 'passes'):
                    text += f' [{notes.index(r) + 1}]'
                row.append(text)
            settings = case_settings(c)
            lines.append(f'| {c} (`{library}::{ref}`) | {settings} | ' + ' | '.join(row) + ' |')
        lines.append('')
    if notes:
        lines += ['Refusals and failures:', '']
        lines += [f'[{i + 1}] {n}' + ('  ' if i + 1 < len(notes) else '') for i, n in enumerate(notes)]
        lines.append('')
    lines.append(END)
    return '\n'.join(lines) + '\n'


def case_settings(consumer):
    from mmengine.config import Config
    cfg = Config(dict(model=dict(backbone=None, neck=dict(), decode_head=dict(), auxiliary_head=dict(),
                                 panoptic_head=dict(), cls_head=dict(), head=dict(),
                                 data_preprocessor=dict()), optim_wrapper=dict()))
    return CONSUMERS[consumer][2](cfg, {}, [1, 2, 3, 4])


def generated_part(text):
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        raise ValueError(f'{DOC} has no generated part ({BEGIN!r} ... {END!r})')
    return text[start:end + len(END)] + '\n'


def documented_cells(text=None):
    """``{case: {procs: mark}}`` as docs/compatibility.md states them (mark: '✓', '✗' or 'refused')."""
    import re
    if text is None:
        with open(DOC) as f:
            text = f.read()
    out = {}
    for block in generated_part(text).split('### ')[1:]:
        rows = [r for r in block.splitlines() if r.startswith('|')]
        backbones = [h.strip() for h in rows[0].strip('|').split('|')][2:]
        for row in rows[2:]:
            cols = [h.strip() for h in row.strip('|').split('|')]
            consumer = re.sub(r' \(`.*`\)$', '', cols[0])
            for b, text_ in zip(backbones, cols[2:]):
                marks = dict(re.findall(r'(\d)p (✓|✗|refused)', text_))
                if marks:
                    out[f'{consumer}/{b}'] = {int(k): v for k, v in marks.items()}
    return out


def load_results(path):
    """``{case: {procs: result}}`` from a ``--json`` file, or from the ``<case> [<n>p]: <result>`` lines a run
    prints (a run that was stopped still documents the cases it finished)."""
    import json
    import re
    with open(path) as f:
        text = f.read()
    if path.endswith('.json'):
        return {c: {int(k): v for k, v in per.items()} for c, per in json.loads(text).items()}
    out = {}
    for case, procs, result in re.findall(r'^(.+?/.+?) \[(\d)p\]: (.*)$', text, flags=re.M):
        if case in all_cases():
            out.setdefault(case, {})[int(procs)] = result
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--cases', nargs='+', default=['*'], help="case ids or patterns ('RetinaNet/*')")
    parser.add_argument('--procs', default='1,2', help='numbers of processes to run each case in (1,2)')
    parser.add_argument('--json', help='also write the results to this file')
    parser.add_argument('--from-json', nargs='+',
                        help='write the document from results saved with --json or printed by a run (no run; '
                        'several files merge)')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--write', action='store_true', help='run the whole matrix and write docs/compatibility.md')
    mode.add_argument('--check', action='store_true', help='run the whole matrix and compare with the document')
    args = parser.parse_args(argv)
    import json
    if args.from_json:
        results = {}
        for path in args.from_json:
            for c, per in load_results(path).items():
                results.setdefault(c, {}).update(per)
        results = {c: results[c] for c in all_cases() if c in results}
    else:
        cases = all_cases() if args.write or args.check else select(args.cases)
        results = run_matrix(cases, tuple(int(p) for p in args.procs.split(',')))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(results, f, indent=1)
    if not (args.write or args.check or args.from_json):
        for c, per in results.items():
            for procs, r in sorted(per.items()):
                print(f'{c} [{procs}p]: {r}')
        return 0
    with open(DOC) as f:
        text = f.read()
    new = render(results)
    if args.check:
        same = generated_part(text) == new
        print('docs/compatibility.md is up to date' if same else 'docs/compatibility.md differs from this run')
        return 0 if same else 1
    old = generated_part(text)
    with open(DOC, 'w') as f:
        f.write(text.replace(old, new))
    print(f'wrote {DOC}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
