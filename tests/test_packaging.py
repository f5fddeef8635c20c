"""mmposmlp as an installed OpenMMLab package: the wheel's ``.mim`` files and ``mim`` commands, ``mmposmlp::``
config inheritance, mmpretrain's model hub, unknown-type messages, and metafiles checked against the configs."""
import glob
import os
import os.path as osp
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest
import yaml

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
ZOO = osp.join(ROOT, 'docs', 'model_zoo.md')


# ----------------------------------------------------------------------------------------------------------------
# metafiles: complete, and every derived figure equal to what the configs / the complexity tool say
# ----------------------------------------------------------------------------------------------------------------

# config type -> technique name (OpenMMLab metafile vocabulary)
TECHNIQUE_BY_TYPE = {
    'AdamW': 'AdamW', 'SGD': 'SGD', 'Adam': 'Adam',
    'Mixup': 'Mixup', 'MixupBlending': 'Mixup', 'CutMix': 'CutMix', 'CutmixBlending': 'CutMix',
    'RandAugment': 'RandAugment', 'AutoAugment': 'AutoAugment', 'RandomErasing': 'Random Erasing',
    'LabelSmoothLoss': 'Label Smoothing', 'EMAHook': 'EMA',
    'CosineAnnealingLR': 'Cosine Annealing', 'LinearLR': 'Warmup', 'PolyLR': 'Poly LR', 'MultiStepLR': 'Step LR',
    'RandomChoiceResize': 'Multi-Scale Training', 'RandomResize': 'Multi-Scale Training',
}
RESULT_FIELDS = ('Task', 'Dataset', 'Metrics')
COLLECTION_FIELDS = ('Training Data', 'Training Techniques', 'Training Resources', 'Architecture')
MODEL_FIELDS = ('Parameters', 'Training Data', 'Batch Size')


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def metafiles():
    return [osp.join(ROOT, p) for p in load_yaml(osp.join(ROOT, 'model-index.yml'))['Import']]


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
        assert int(m.group(2)) == per_gpu, f'{cfg_path}: name says {m.group(2)}/GPU, config {per_gpu}'
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


def zoo_rows() -> dict:
    """config stem -> (params M, GFLOPs or None) from docs/model_zoo.md (tools/analysis/complexity.py's output)."""
    rows = {}
    with open(ZOO) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            if len(cells) > 3 and re.fullmatch(r'[\d.]+', cells[1] or 'x'):
                rows[cells[0]] = (float(cells[1]), None if cells[2] == 'n/a' else float(cells[2]))
    return rows


def reported_lines(path) -> set:
    """(model name, field) whose metafile line carries a ``# reported`` comment (the papers' figure)."""
    out, name = set(), None
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*-\s+Name:\s*(\S+)', line)
            if m:
                name = m.group(1)
            m = re.match(r'\s*(Parameters|FLOPs):[^#\n]*#.*reported', line)
            if m and name:
                out.add((name, m.group(1)))
    return out


def test_metafiles_list_every_config_and_only_existing_ones():
    """Every shipped config (toy variants aside) has a model entry; every entry's config exists."""
    listed = []
    for path in metafiles():
        for model in load_yaml(path)['Models']:
            assert osp.isfile(osp.join(ROOT, model['Config'])), f"{path}: {model['Config']} does not exist"
            listed.append(osp.normpath(model['Config']))
    shipped = {osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '*', '*.py'))}
    shipped |= {osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '*', 'ablations', '*.py'))}
    missing = sorted(shipped - set(listed))
    assert not missing, f'configs without a metafile entry (add one to configs/<family>/metafile.yml): {missing}'
    dup = sorted({c for c in listed if listed.count(c) > 1})
    assert not dup, f'configs listed twice: {dup}'


def test_metafiles_are_complete_and_match_the_complexity_tool():
    """mmpretrain's fields are present; Parameters/FLOPs equal docs/model_zoo.md (tools/analysis/complexity.py)
    unless the line is marked ``# reported``; results carry task, dataset and metrics."""
    zoo = zoo_rows()
    problems = []
    for path in metafiles():
        meta = load_yaml(path)
        rel = osp.relpath(path, ROOT)
        reported = reported_lines(path)
        for coll in meta['Collections']:
            for field in COLLECTION_FIELDS:
                if not coll.get('Metadata', {}).get(field):
                    problems.append(f"{rel}: collection {coll['Name']} lacks Metadata.{field}")
            for field in ('Paper', 'README', 'Code'):
                if not coll.get(field):
                    problems.append(f"{rel}: collection {coll['Name']} lacks {field}")
            if coll.get('Paper') and not (coll['Paper'].get('URL') and coll['Paper'].get('Title')):
                problems.append(f"{rel}: collection {coll['Name']} Paper needs URL and Title")
        for model in meta['Models']:
            name, md = model['Name'], model.get('Metadata') or {}
            stem = osp.splitext(osp.basename(model['Config']))[0]
            if name != stem:
                problems.append(f'{rel}: model {name} should be named after its config {stem}')
            for field in MODEL_FIELDS:
                if md.get(field) in (None, ''):
                    problems.append(f'{rel}: {name} lacks Metadata.{field}')
            if ('Epochs' in md) == ('Iterations' in md):
                problems.append(f'{rel}: {name} needs exactly one of Metadata.Epochs / Metadata.Iterations')
            results = model.get('Results')
            if not results:
                problems.append(f'{rel}: {name} has no Results (Task/Dataset, and Metrics where the paper reports)')
            for r in results or []:
                if not all(k in r for k in RESULT_FIELDS):
                    problems.append(f'{rel}: {name} result {r} lacks one of {RESULT_FIELDS}')
            if 'Weights' not in model:
                problems.append(f'{rel}: {name} lacks Weights (null when none are hosted)')
            if stem not in zoo:
                problems.append(f'{rel}: {name} is not in docs/model_zoo.md: run tools/analysis/complexity.py')
                continue
            params_m, gflops = zoo[stem]
            if (name, 'Parameters') not in reported and md.get('Parameters') is not None and \
                    abs(md['Parameters'] / 1e6 - params_m) > 0.0051:
                problems.append(f"{rel}: {name} Parameters {md['Parameters']} but the complexity tool counts "
                                f'{params_m}M')
            if gflops is None:
                continue
            if md.get('FLOPs') in (None, ''):
                problems.append(f'{rel}: {name} lacks Metadata.FLOPs ({int(round(gflops * 1e9))} per the tool)')
            elif (name, 'FLOPs') not in reported and abs(md['FLOPs'] / 1e9 - gflops) > 0.0051:
                problems.append(f"{rel}: {name} FLOPs {md['FLOPs']} but the complexity tool counts {gflops}G")
    assert not problems, '\n'.join(problems)


@pytest.mark.slow
def test_metafile_training_metadata_matches_the_configs():
    """Batch Size, Epochs/Iterations, Training Resources and Training Techniques (collection's plus the
    model's own) are what each config sets (parses every config: ~1 min)."""
    from mmengine.config import Config
    problems = []
    for path in metafiles():
        meta = load_yaml(path)
        rel = osp.relpath(path, ROOT)
        colls = {c['Name']: c.get('Metadata') or {} for c in meta['Collections']}
        for model in meta['Models']:
            cfg = Config.fromfile(osp.join(ROOT, model['Config']))
            want = derived_metadata(model['Config'], cfg)
            md = dict(colls.get(model['In Collection'], {}))
            md.update(model.get('Metadata') or {})
            techs = set(colls.get(model['In Collection'], {}).get('Training Techniques') or []) | \
                set((model.get('Metadata') or {}).get('Training Techniques') or [])
            for key in ('Batch Size', 'Epochs', 'Iterations', 'Training Resources'):
                if md.get(key) != want.get(key):
                    problems.append(f"{rel}: {model['Name']} {key} is {md.get(key)!r}, config says {want.get(key)!r}")
            if techs != want['Training Techniques']:
                problems.append(f"{rel}: {model['Name']} Training Techniques {sorted(techs)}, config uses "
                                f"{sorted(want['Training Techniques'])}")
    assert not problems, '\n'.join(problems)
