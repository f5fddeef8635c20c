"""What a config says about its training, in OpenMMLab metafile terms (``Batch Size``, ``Epochs`` /
``Iterations``, ``Training Resources``, ``Training Techniques``), and the measured params/FLOPs of
``docs/model_zoo.md`` (written by ``tools/analysis/complexity.py``).

Used by the metafile generator of the paper-table configs (``tools/misc/paper_table_metafiles.py``) and
by the tests that check every metafile against its config.
"""
import os.path as osp
import re

# config type -> technique name (OpenMMLab metafile vocabulary)
TECHNIQUE_BY_TYPE = {
    'AdamW': 'AdamW', 'SGD': 'SGD', 'Adam': 'Adam',
    'Mixup': 'Mixup', 'MixupBlending': 'Mixup', 'CutMix': 'CutMix', 'CutmixBlending': 'CutMix',
    'RandAugment': 'RandAugment', 'AutoAugment': 'AutoAugment', 'RandomErasing': 'Random Erasing',
    'LabelSmoothLoss': 'Label Smoothing', 'EMAHook': 'EMA',
    'CosineAnnealingLR': 'Cosine Annealing', 'LinearLR': 'Warmup', 'PolyLR': 'Poly LR', 'MultiStepLR': 'Step LR',
    'RandomChoiceResize': 'Multi-Scale Training', 'RandomResize': 'Multi-Scale Training',
    'TimmEMAHook': 'EMA', 'TimmCosineLR': 'Cosine Annealing', 'SlowFastCosineLR': 'Cosine Annealing',
    'DistillationClassifier': 'Knowledge Distillation',
}
# schedulers whose warm-up is an option of their own (warmup_steps > 0) rather than a LinearLR before them
WARMUP_OPTION = ('TimmCosineLR', 'SlowFastCosineLR')


def _walk(obj):
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _walk(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v)


def techniques(cfg) -> set:
    """Training techniques a config uses, from the types and options of what training builds."""
    parts = [cfg.get(k) for k in ('model', 'optim_wrapper', 'param_scheduler', 'custom_hooks', 'train_dataloader')]
    found = set()
    for d in _walk(parts):
        t = d.get('type')
        if isinstance(t, str) and t.rpartition('.')[2] in TECHNIQUE_BY_TYPE:
            name = TECHNIQUE_BY_TYPE[t.rpartition('.')[2]]
            if name == 'Multi-Scale Training' and not (d.get('ratio_range') or isinstance(d.get('scales'), list)):
                continue
            found.add(name)
            if t.rpartition('.')[2] in WARMUP_OPTION and (d.get('warmup_steps') or 0) > 0:
                found.add('Warmup')
        if (d.get('drop_path_rate') or 0) > 0:
            found.add('Stochastic Depth')
        if (d.get('label_smooth_eps') or 0) > 0:
            found.add('Label Smoothing')
        if d.get('clip_grad'):
            found.add('Gradient Clipping')
    return found


def derived_metadata(cfg_path, cfg) -> dict:
    """Batch Size (total), GPUs, Epochs or Iterations and Training Techniques as the config sets them."""
    per_gpu = cfg.train_dataloader.batch_size
    m = re.search(r'_(\d+)xb(\d+)', osp.basename(cfg_path))
    if m:
        gpus = int(m.group(1))
        if int(m.group(2)) != per_gpu:
            raise ValueError(f'{cfg_path}: the name says {m.group(2)} per GPU, the config {per_gpu}; rename the '
                             'file or fix train_dataloader.batch_size.')
        total = gpus * per_gpu
    else:  # mmdet's names carry no NxbM: the recipe's total batch is auto_scale_lr.base_batch_size
        total = cfg.auto_scale_lr.base_batch_size
        gpus = total // per_gpu
    out = {'Batch Size': total, 'Training Resources': f'{gpus}x GPUs',
           'Training Techniques': techniques(cfg)}
    train_cfg = cfg.get('train_cfg') or {}
    if 'max_epochs' in train_cfg:
        out['Epochs'] = train_cfg['max_epochs']
    elif 'max_iters' in train_cfg:
        out['Iterations'] = train_cfg['max_iters']
    return out


def zoo_rows(path) -> dict:
    """config stem -> (params M, GFLOPs or None) from a model-zoo markdown (docs/model_zoo.md)."""
    rows = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            if len(cells) > 3 and re.fullmatch(r'[\d.]+', cells[1] or 'x'):
                rows[cells[0]] = (float(cells[1]), None if cells[2] == 'n/a' else float(cells[2]))
    return rows
