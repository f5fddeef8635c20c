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

from toolcfg import load_tool

METAFILE_RULES = load_tool('.dev_scripts', 'metafile_rules.py')
derived_metadata = METAFILE_RULES.derived_metadata
_zoo_rows = METAFILE_RULES.zoo_rows

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
ZOO = osp.join(ROOT, 'docs', 'model_zoo.md')


# ----------------------------------------------------------------------------------------------------------------
# metafiles: complete, and every derived figure equal to what the configs / the complexity tool say
# ----------------------------------------------------------------------------------------------------------------

RESULT_FIELDS = ('Task', 'Dataset', 'Metrics')
COLLECTION_FIELDS = ('Training Data', 'Training Techniques', 'Training Resources', 'Architecture')
MODEL_FIELDS = ('Parameters', 'Training Data', 'Batch Size')


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        dup = sorted({k for k in keys if keys.count(k) > 1}, key=str)
        if dup:
            raise yaml.constructor.ConstructorError(None, None, f'duplicate keys {dup}', node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path):
    with open(path) as f:
        return yaml.load(f, Loader=_UniqueKeyLoader)


def metafiles():
    return [osp.join(ROOT, p) for p in load_yaml(osp.join(ROOT, 'model-index.yml'))['Import']]


def zoo_rows() -> dict:
    """config stem -> (params M, GFLOPs or None) from docs/model_zoo.md (tools/analysis/complexity.py's output)."""
    return _zoo_rows(ZOO)


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


def shipped_configs() -> list:
    """Every config under configs/, at any depth, but the bases and the toy variants."""
    out = []
    for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True):
        rel = osp.relpath(p, ROOT)
        if not {'_base_', 'toy'} & set(rel.split(osp.sep)):
            out.append(rel)
    return sorted(out)


def test_model_index_imports_every_metafile():
    on_disk = sorted(osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '**', 'metafile.yml'),
                                                             recursive=True))
    imported = sorted(load_yaml(osp.join(ROOT, 'model-index.yml'))['Import'])
    assert imported == on_disk, f'model-index.yml Import {imported} but the metafiles are {on_disk}'


def test_metafiles_list_every_config_and_only_existing_ones():
    """Every shipped config (any depth, bases and toy variants aside) has a model entry; every entry's config
    exists."""
    listed = []
    for path in metafiles():
        for model in load_yaml(path)['Models']:
            assert osp.isfile(osp.join(ROOT, model['Config'])), f"{path}: {model['Config']} does not exist"
            listed.append(osp.normpath(model['Config']))
    shipped = set(shipped_configs())
    missing = sorted(shipped - set(listed))
    assert not missing, ('configs without a metafile entry (add one to configs/<family>/metafile.yml; for '
                         f'configs/<family>/paper_tables/, one row to .dev_scripts/paper_table_metafiles.py): {missing}')
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
                problems.append(f'{rel}: {name} is not in docs/model_zoo.md: run python tools/analysis/complexity.py '
                                f"--configs {osp.dirname(model['Config'])} --pattern {osp.basename(model['Config'])} "
                                '--merge')
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
    """Batch Size, Epochs/Iterations, Training Resources and Training Techniques (the model's, else its
    collection's: modelindex lets a model's field replace the collection's) are what each config sets
    (parses every config: ~1 min)."""
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
            techs = set(md.get('Training Techniques') or [])  # the model's own list replaces the collection's
            for key in ('Batch Size', 'Epochs', 'Iterations', 'Training Resources'):
                if md.get(key) != want.get(key):
                    problems.append(f"{rel}: {model['Name']} {key} is {md.get(key)!r}, config says {want.get(key)!r}")
            if techs != want['Training Techniques']:
                problems.append(f"{rel}: {model['Name']} Training Techniques {sorted(techs)}, config uses "
                                f"{sorted(want['Training Techniques'])}")
    assert not problems, '\n'.join(problems)


def _paper_table_generator():
    return load_tool('.dev_scripts', 'paper_table_metafiles.py')


def test_paper_table_metafiles_carry_their_rows_as_reported():
    """Each paper-table config has one row in the generator and one entry in its family's
    paper_tables/metafile.yml, whose metrics and Paper Parameters/FLOPs are that row's, marked ``# reported``."""
    gen = _paper_table_generator()
    stems = {osp.splitext(osp.basename(c))[0] for c in gen.paper_table_configs()}
    assert stems and stems == set(gen.ROWS), sorted(stems ^ set(gen.ROWS))
    seen = set()
    for path in glob.glob(osp.join(ROOT, 'configs', '*', 'paper_tables', 'metafile.yml')):
        text = open(path).read()
        assert text.startswith(gen.HEADER), path
        for model in load_yaml(path)['Models']:
            name = model['Name']
            seen.add(name)
            source, metrics, paper_params, paper_gflops = gen.ROWS[name]
            got = {k: v for r in model['Results'] for k, v in (r.get('Metrics') or {}).items()}
            assert got == metrics, (name, got, metrics)
            md = model['Metadata']
            assert md.get('Paper Parameters') == (None if paper_params is None else int(round(paper_params * 1e6)))
            assert md.get('Paper FLOPs') == (None if paper_gflops is None else int(round(paper_gflops * 1e9)))
        for key, value in re.findall(r'^\s*(box AP|mask AP|Top 1 Accuracy|Paper Parameters|Paper FLOPs): (.*)$', text,
                                     re.M):
            assert '# reported (' in value, (path, key, value)
    assert seen == stems


@pytest.mark.slow
def test_paper_table_metafiles_are_what_the_generator_writes():
    """The generated files are up to date with the rows, the configs and docs/model_zoo.md (parses the 62
    configs: ~40 s)."""
    stale = _paper_table_generator().write_metafiles(check=True)
    assert not stale, f'out of date: {stale}; run python .dev_scripts/paper_table_metafiles.py'


ZOO_SAMPLE = ('configs/cpvt/paper_tables/cpvt-ti-posnone_8xb128_in1k.py',
              'configs/wavemlp/paper_tables/wavemlp-t-dw-w3_8xb128_in1k.py')


def _zoo_disagreements(configs, flops=()):
    from mmengine.config import Config

    from tools.analysis import params_flops as C
    from mmposmlp.testing import build_model_from_cfg
    zoo, problems = zoo_rows(), []
    for rel in configs:
        stem = osp.splitext(osp.basename(rel))[0]
        model, scope = build_model_from_cfg(Config.fromfile(osp.join(ROOT, rel)))
        params_m = C.count_params(model) / 1e6
        if abs(params_m - zoo[stem][0]) > 0.0051:
            problems.append(f'{stem}: the model has {params_m:.4f}M parameters, docs/model_zoo.md says {zoo[stem][0]}M')
        if rel in flops and zoo[stem][1] is not None:
            gflops = C.count_flops(model, C.input_shape_for(rel, scope), scope)[0] / 1e9
            if abs(gflops - zoo[stem][1]) > 0.0051:
                problems.append(f'{stem}: the model has {gflops:.4f} GFLOPs, docs/model_zoo.md says {zoo[stem][1]}')
    return problems


def test_model_zoo_figures_are_the_models():
    """docs/model_zoo.md (which the metafiles are checked against) holds what the models count: params and
    two small paper-table models of two families recounted, and the FLOPs of the smaller (the slow test
    below recounts every config's params)."""
    problems = _zoo_disagreements(ZOO_SAMPLE, flops=ZOO_SAMPLE[:1])
    assert not problems, '\n'.join(problems)


@pytest.mark.slow
def test_model_zoo_params_are_every_models():
    """Params of every shipped config recounted against docs/model_zoo.md (builds ~180 models: minutes)."""
    problems = _zoo_disagreements(shipped_configs())
    assert not problems, '\n'.join(problems)


# ----------------------------------------------------------------------------------------------------------------
# in the clone: config prefix hook, model hub, messages
# ----------------------------------------------------------------------------------------------------------------

def _pth_line():
    import ast
    tree = ast.parse(open(osp.join(ROOT, 'setup.py')).read())
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], 'id', None) == 'CONFIG_PTH_LINE')


def test_config_prefix_hook_registers_mmposmlp_before_any_import_of_ours():
    """The wheel's .pth line, run as site.py runs it, makes mmengine accept ``mmposmlp::`` without importing
    mmposmlp (nor torch); importing mmposmlp does the same."""
    code = (_pth_line() + textwrap.dedent('''
        import sys
        assert 'mmposmlp' not in sys.modules and 'torch' not in sys.modules
        from mmengine.config.utils import MODULE2PACKAGE, _get_package_and_cfg_path
        assert 'mmposmlp' not in sys.modules
        print(_get_package_and_cfg_path('mmposmlp::posmlp/posmlp-t_8xb120_in1k.py'))
        '''))
    res = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "('mmposmlp', 'posmlp/posmlp-t_8xb120_in1k.py')" in res.stdout
    # without the hook (-S: site-packages on the path but its .pth files, ours included, not run) mmengine refuses
    import sysconfig
    site_dirs = os.pathsep.join([ROOT, sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']])
    res = subprocess.run([sys.executable, '-S', '-c', 'from mmengine.config.utils import _get_package_and_cfg_path as g\n'
                          'g("mmposmlp::posmlp/x.py")'], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=site_dirs))
    assert res.returncode != 0 and 'does not support to load mmposmlp' in res.stderr  # the hook is what does it
    res = subprocess.run([sys.executable, '-c', 'import mmposmlp\nfrom mmengine.config.utils import MODULE2PACKAGE\n'
                          'assert MODULE2PACKAGE["mmposmlp"] == "mmposmlp"'], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0, res.stderr[-3000:]


def test_clone_has_the_mim_layout():
    """``mmposmlp/.mim`` in a clone points at the top-level configs, tools and model index (what mim and
    mmengine read in an editable install)."""
    mim = osp.join(ROOT, 'mmposmlp', '.mim')
    for name in ('configs', 'tools', 'model-index.yml'):
        assert osp.samefile(osp.join(mim, name), osp.join(ROOT, name)), name


def test_user_config_inherits_mmposmlp_prefix_and_builds_under_mmpretrain(monkeypatch):
    """``_base_ = 'mmposmlp::...'`` resolves in ``mmposmlp/.mim/configs``; the top-level dicts then carry
    ``_scope_='mmposmlp'`` (mmengine's rule) and still build the library's own types (ImageClassifier, ...)."""
    import mmengine.config.config as mcc
    from mmengine.config import Config
    import mmposmlp  # noqa: F401  (registers the prefix)
    # the clone under test, not whatever mmposmlp the project venv has installed
    real = mcc.get_installed_path
    monkeypatch.setattr(mcc, 'get_installed_path', lambda p: osp.join(ROOT, 'mmposmlp') if p == 'mmposmlp'
                        else real(p))
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = osp.join(d, 'mine.py')
        with open(path, 'w') as f:
            f.write(USER_CFG)
        cfg = Config.fromfile(path)
    assert cfg.model.backbone.type == 'mmposmlp.PosMLP' and cfg.model.head.in_channels == 128
    assert cfg.model.get('_scope_') == 'mmposmlp'
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    from mmpretrain.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg.model)
    assert type(model).__name__ == 'ImageClassifier' and type(model.backbone).__name__ == 'PosMLP'
    assert type(model.neck).__name__ == 'GlobalAveragePooling'


@pytest.mark.parametrize('scope,base', [
    ('mmdet', 'posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py'),
    ('mmseg', 'posmlp/toy/fpn_posmlp-t_toy-ade20k.py'),
    ('mmaction', 'posmlp_video/posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'),
])
def test_mmposmlp_prefix_builds_models_and_pipelines_of_each_library(scope, base, monkeypatch, tmp_path):
    """A user config inheriting ``mmposmlp::`` builds its model and training pipeline with each library's own
    registries (what the library's tools/train.py does), although mmengine scopes those dicts to mmposmlp."""
    import importlib
    import mmengine.config.config as mcc
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    import mmposmlp  # noqa: F401
    real = mcc.get_installed_path
    monkeypatch.setattr(mcc, 'get_installed_path', lambda p: osp.join(ROOT, 'mmposmlp') if p == 'mmposmlp'
                        else real(p))
    path = tmp_path / 'mine.py'
    path.write_text(f"_base_ = 'mmposmlp::{base}'\nmodel = dict(backbone=dict(init_cfg=None))\n")
    cfg = Config.fromfile(str(path))
    assert cfg.default_scope == scope
    importlib.import_module(f'{scope}.utils').register_all_modules(init_default_scope=False)
    registry = importlib.import_module(f'{scope}.registry')
    with DefaultScope.overwrite_default_scope(scope):
        model = registry.MODELS.build(cfg.model)
        pipeline = [registry.TRANSFORMS.build(t) for t in cfg.train_dataloader.dataset.pipeline]
    assert type(model.backbone).__name__ in ('PosMLP', 'PosMLPVideo')
    assert type(pipeline[0]).__module__.split('.')[0] in (scope, 'mmcv')


def test_model_hub_lists_builds_and_loads_our_classification_models(tmp_path):
    import numpy as np
    import torch
    import mmposmlp  # noqa: F401
    from mmpretrain import ImageClassificationInferencer, get_model, list_models
    names = list_models('*posmlp*')
    assert 'posmlp-t_8xb120_in1k' in names and 'pvt-peg-t-gap_8xb128_in1k' in list_models('pvt-peg*')
    assert not any('coco' in n or 'ade20k' in n or 'kinetics' in n for n in list_models('*posmlp*'))
    name = 'pvt-peg-t-gap_8xb128_in1k'
    torch.manual_seed(0)
    model = get_model(name)
    assert type(model.backbone).__name__ == 'PVTPEG'
    ckpt = tmp_path / 'w.pth'
    torch.save({'state_dict': model.state_dict()}, ckpt)
    loaded = get_model(name, pretrained=str(ckpt))
    for (k, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), k
    inferencer = ImageClassificationInferencer(name, pretrained=str(ckpt))
    out = inferencer(np.random.RandomState(0).randint(0, 255, (64, 80, 3), dtype=np.uint8))[0]
    assert 0 <= out['pred_label'] < 1000 and len(out['pred_scores']) == 1000


def test_unknown_types_get_the_closest_registered_name_and_the_right_fix():
    import mmpretrain.utils
    from mmposmlp.engine.entry import explain
    import mmposmlp.models  # noqa: F401
    mmpretrain.utils.register_all_modules(init_default_scope=False)
    # prefix missing (custom_imports does not help): the prefixed name and why
    msg = explain(KeyError('PosMLP is not in the mmpretrain::model registry. Please check whether ...'))
    assert 'did you mean `mmposmlp.PosMLP`' in msg and "type='mmposmlp.PosMLP'" in msg
    assert 'custom_imports alone' in msg
    # a typo after the prefix
    msg = explain(KeyError('class `ImageClassifier` in mmpretrain/models/classifiers/image.py: mmposmlp.PosMLp '
                           'is not in the mmpretrain::model registry.'))
    assert 'did you mean `mmposmlp.PosMLP`' in msg
    # a typo of a library type: suggested without prefix (the running library's own scope)
    msg = explain(KeyError('ImageClasifier is not in the mmpretrain::model registry.'))
    assert 'did you mean `ImageClassifier`' in msg
    # nothing close: how to register a module of one's own
    msg = explain(KeyError('Qwertyuiop is not in the mmpretrain::model registry.'))
    assert 'did you mean' not in msg and 'custom_imports' in msg


def test_missing_pretrained_checkpoint_names_the_file_the_source_and_the_commands(tmp_path, monkeypatch):
    from mmengine.config import Config
    from mmposmlp.engine.entry import UserError
    from mmposmlp.engine.preflight import check_pretrained
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'posmlp', 'mask-rcnn_posmlp-t_1x_coco.py'))
    with pytest.raises(UserError) as e:
        check_pretrained(cfg)
    msg = str(e.value)
    # the shipped config names the official file under its official name (no direct URL): converted on load
    assert 'checkpoints/PosMLP_T.pth does not exist (model.backbone.init_cfg.checkpoint)' in msg
    assert 'github.com/Zhicaiwww/PosMLP' in msg and 'converted on load, no converter step' in msg
    assert '--cfg-options model.backbone.init_cfg=None' in msg
    # a converted copy named instead: the converter command
    cfg.merge_from_dict({'model.backbone.init_cfg.checkpoint': 'checkpoints/posmlp-t_in1k_mmposmlp.pth'})
    with pytest.raises(UserError) as e:
        check_pretrained(cfg)
    msg = str(e.value)
    assert 'checkpoints/posmlp-t_in1k_mmposmlp.pth does not exist (model.backbone.init_cfg.checkpoint)' in msg
    assert 'python tools/model_converters/posmlp2mmposmlp.py PosMLP_T.pth checkpoints/posmlp-t_in1k_mmposmlp.pth' \
        in msg and 'github.com/Zhicaiwww/PosMLP' in msg
    assert '--cfg-options model.backbone.init_cfg=None' in msg
    cfg.merge_from_dict({'model.backbone.init_cfg': None})
    check_pretrained(cfg)  # the init_cfg=None variant passes
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'wavemlp', 'retinanet_wavemlp-s-dw_fpn_1x_coco.py'))
    with pytest.raises(UserError, match='no official weights were released.*wavemlp-s-dw_8xb128_in1k.py'):
        check_pretrained(cfg)
    os.makedirs('checkpoints')
    open('checkpoints/wavemlp-s-dw_in1k_mmposmlp.pth', 'w').close()
    check_pretrained(cfg)


def test_every_pretrained_checkpoint_a_config_names_has_a_known_source():
    """Each ``checkpoints/*.pth`` named in a shipped config has an entry in mmposmlp/utils/pretrained.py."""
    from mmposmlp.utils.pretrained import OFFICIAL, SOURCES, TRAINED_BY
    named = set()
    for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True):
        named |= set(re.findall(r'checkpoints/([\w.-]+\.pth)', open(p).read()))
    unknown = sorted(named - set(SOURCES) - set(TRAINED_BY) - set(OFFICIAL))
    assert not unknown, f'add these to mmposmlp/utils/pretrained.py: {unknown}'
    for cfg in TRAINED_BY.values():
        assert osp.isfile(osp.join(ROOT, cfg.split()[0])), cfg  # (a config, then any --cfg-options)


# ----------------------------------------------------------------------------------------------------------------
# the wheel, installed on its own (not the editable clone), used from outside the repository
# ----------------------------------------------------------------------------------------------------------------

SMALL_POSMLP = ("dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups=[2, 4, 8, 16], "
                "mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7])")
# a user's own config, in their own folder: inherits our toy ImageNet config through the package prefix
USER_CFG = f"""
_base_ = 'mmposmlp::posmlp/toy/posmlp-t_toy-in1k.py'
model = dict(backbone=dict(arch=dict(_delete_=True, **{SMALL_POSMLP}), drop_path_rate=0.0), head=dict(in_channels=128))
train_dataloader = dict(dataset=dict(indices=8))
val_dataloader = dict(dataset=dict(indices=4))
test_dataloader = dict(dataset=dict(indices=4))
train_cfg = dict(max_epochs=1, val_interval=1)
"""


def _scratch_env(tmp, site_packages):
    """A venv whose own site-packages (the wheel) comes first, then the project venv's site-packages as a
    plain path: that folder's .pth files (the editable install of the clone) are not processed."""
    venv = tmp / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True)
    py = venv / 'bin' / 'python'
    own = subprocess.run([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                         check=True, capture_output=True, text=True).stdout.strip()
    with open(osp.join(own, '_project_venv.pth'), 'w') as f:
        f.write(site_packages + '\n')
    return py, own


@pytest.fixture(scope='module')
def wheel_env(tmp_path_factory):
    import shutil
    tmp = tmp_path_factory.mktemp('wheel')
    src = tmp / 'src'  # a copy, so that the build writes nothing into the clone
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        '.git', '.venv', 'data', 'work_dirs', 'build', 'dist', '*.egg-info', '__pycache__', 'tests', 'docs'))
    dist = tmp / 'dist'
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '--no-build-isolation', str(src),
                    '-w', str(dist)], check=True)
    wheel = next(dist.glob('mmposmlp-*.whl'))
    py, own = _scratch_env(tmp, sysconfig.get_paths()['purelib'])
    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-index', '--target', own,
                    str(wheel)], check=True)
    work = tmp / 'user'  # outside the repository
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONSTARTUP')}
    env.update(OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    return dict(py=str(py), site=own, wheel=wheel, cwd=str(work), env=env)


def _run(w, *args, timeout=600):
    res = subprocess.run([w['py'], *args], cwd=w['cwd'], env=w['env'], capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, f'{args} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}'
    return res.stdout + res.stderr


MIM = ('-c', 'import sys; from mim.cli import cli; sys.exit(cli())')


@pytest.mark.slow
def test_wheel_carries_configs_tools_and_model_index(wheel_env):
    import zipfile
    names = zipfile.ZipFile(wheel_env['wheel']).namelist()
    for needed in ('mmposmlp/.mim/model-index.yml', 'mmposmlp/.mim/configs/posmlp/metafile.yml',
                   'mmposmlp/.mim/configs/posmlp/mask-rcnn_posmlp-t_1x_coco.py', 'mmposmlp/.mim/tools/train.py',
                   'mmposmlp/.mim/tools/test.py', 'mmposmlp/.mim/tools/model_converters/posmlp2mmposmlp.py',
                   'mmposmlp/.mim/configs/posmlp/paper_tables/metafile.yml',
                   'mmposmlp/configs/posmlp/posmlp_t_8xb120_in1k.py', 'mmposmlp-config.pth'):
        assert needed in names, needed
    shipped = {osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)}
    assert {f'mmposmlp/.mim/{p}' for p in shipped} <= set(names)
    out = _run(wheel_env, '-c', 'import mmposmlp, os; print(os.path.realpath(mmposmlp.__file__))')
    assert out.strip().startswith(os.path.realpath(wheel_env['site'])), out  # the wheel, not the clone


@pytest.mark.slow
def test_mim_search_train_test_run_from_outside_the_repository(wheel_env):
    """mim search / run / train / test on the installed wheel; the user config inherits ``mmposmlp::``;
    the same config also trains under mmpretrain's own tools/train.py (mim train mmpretrain)."""
    out = _run(wheel_env, *MIM, 'search', 'mmposmlp', '--config', 'posmlp-t_8xb120_in1k')
    assert 'posmlp-t_8xb120_in1k' in out
    out = _run(wheel_env, *MIM, 'search', 'mmposmlp', '--config', 'posmlp-t-sgu_8xb120_in1k-half')  # paper tables
    assert 'posmlp-t-sgu_8xb120_in1k-half' in out
    out = _run(wheel_env, *MIM, 'list')
    assert any(line.split()[:1] == ['mmposmlp'] and _setup_constant('HOMEPAGE') in line for line in out.splitlines())
    # a pure-Python config inheriting ours through read_base resolves in the installed package
    with open(osp.join(wheel_env['cwd'], 'my_lazy.py'), 'w') as f:
        f.write('from mmengine.config import read_base\nwith read_base():\n'
                '    from mmposmlp.configs.wavemlp.wavemlp_t_8xb128_in1k import *\n')
    out = _run(wheel_env, '-c', 'from mmengine.config import Config; c = Config.fromfile("my_lazy.py"); '
               'print(c._cfg_dict.model.backbone.type)')
    assert "<class 'mmposmlp." in out and 'WaveMLP' in out, out[-2000:]
    _run(wheel_env, *MIM, 'run', 'mmposmlp', 'make_toy_datasets', '--out', 'data/toy', '--which', 'imagenet')
    assert osp.isdir(osp.join(wheel_env['cwd'], 'data', 'toy', 'imagenet', 'train'))
    with open(osp.join(wheel_env['cwd'], 'my_posmlp.py'), 'w') as f:
        f.write(USER_CFG)
    _run(wheel_env, *MIM, 'train', 'mmposmlp', 'my_posmlp.py', '--work-dir', 'w_ours', '-y')
    ckpt = osp.join(wheel_env['cwd'], 'w_ours', 'epoch_1.pth')
    assert osp.isfile(ckpt)
    out = _run(wheel_env, *MIM, 'test', 'mmposmlp', 'my_posmlp.py', '--checkpoint', ckpt, '--work-dir', 'w_test',
               '-y')
    assert 'accuracy/top1' in out, out[-2000:]
    # mmpretrain's own tools/train.py parses the config before importing anything of ours: the .pth hook
    _run(wheel_env, *MIM, 'train', 'mmpretrain', 'my_posmlp.py', '--work-dir', 'w_mmpretrain', '-y')
    assert osp.isfile(osp.join(wheel_env['cwd'], 'w_mmpretrain', 'epoch_1.pth'))
    # a converter from the package, on an official-format checkpoint (the PosMLP test vector's model)
    import torch
    vec = torch.load(osp.join(ROOT, 'tests', 'data', 'posmlp_gqpe.pt'), map_location='cpu', weights_only=False)
    official = osp.join(wheel_env['cwd'], 'official.pth')
    torch.save({'state_dict': vec['state_dict']}, official)
    _run(wheel_env, *MIM, 'run', 'mmposmlp', 'posmlp2mmposmlp', 'official.pth', 'converted.pth')
    converted = torch.load(osp.join(wheel_env['cwd'], 'converted.pth'), map_location='cpu', weights_only=True)
    converted = converted.get('state_dict', converted)
    assert converted and all(k.startswith(('backbone.', 'head.fc.')) for k in converted), sorted(converted)[:5]


# ----------------------------------------------------------------------------------------------------------------
# installed as `make install` installs it (site-packages/mmposmlp links the clone, METADATA from setup.py, the
# config .pth): what each library's own tools and `mim list` see
# ----------------------------------------------------------------------------------------------------------------

def _setup_constant(name):
    import ast
    tree = ast.parse(open(osp.join(ROOT, 'setup.py')).read())
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], 'id', None) == name)


@pytest.fixture(scope='module')
def linked_env(tmp_path_factory):
    """A venv whose site-packages holds ``mmposmlp`` (a link to this clone), the METADATA ``setup.py dist_info``
    writes and ``mmposmlp-config.pth``; the project venv's site-packages follows as a plain path (its own
    mmposmlp install and .pth files are not used)."""
    tmp = tmp_path_factory.mktemp('linked')
    py, own = _scratch_env(tmp, sysconfig.get_paths()['purelib'])
    os.symlink(osp.join(ROOT, 'mmposmlp'), osp.join(own, 'mmposmlp'))
    subprocess.run([sys.executable, 'setup.py', '-q', 'dist_info', '--output-dir', own], cwd=ROOT, check=True,
                   capture_output=True)
    with open(osp.join(own, _setup_constant('CONFIG_PTH')), 'w') as f:
        f.write(_pth_line())
    work = tmp / 'user'  # outside the repository
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONSTARTUP')}
    env.update(OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    return dict(py=str(py), site=own, cwd=str(work), env=env)


def test_mim_list_shows_mmposmlp_with_its_homepage(linked_env):
    """``mim list`` lists installed packages that carry ``.mim/model-index.yml``, with the METADATA Home-page
    (``url`` in setup.py)."""
    homepage = _setup_constant('HOMEPAGE')
    assert homepage.startswith('https://')
    out = _run(linked_env, *MIM, 'list')
    row = next((line.split() for line in out.splitlines() if line.startswith('mmposmlp ')), None)
    assert row is not None, out
    from mmposmlp.version import __version__
    assert row == ['mmposmlp', __version__, homepage], row


# a user's own config, outside the repository, for one library's own tools/train.py: two images, one epoch
# (or two iterations), a checkpoint at the end, no validation
OWN_TRAIN = {
    'mmpretrain': ('posmlp/toy/posmlp-t_toy-in1k.py',
                   f"model = dict(backbone=dict(arch=dict(_delete_=True, **{SMALL_POSMLP}), drop_path_rate=0.0), "
                   "head=dict(in_channels=128))\n"
                   "train_dataloader = dict(batch_size=2, dataset=dict(indices=4))\n"
                   "train_cfg = dict(max_epochs=1, val_interval=10)\n", 'epoch_1.pth'),
    'mmdet': ('posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py',
              f"model = dict(backbone=dict(arch=dict(_delete_=True, **{SMALL_POSMLP}), drop_path_rate=0.0), "
              "neck=dict(in_channels=[16, 32, 64, 128]))\n"
              "train_dataloader = dict(batch_size=1, dataset=dict(indices=2))\n"
              "train_cfg = dict(max_epochs=1, val_interval=10)\n"
              "default_hooks = dict(checkpoint=dict(interval=1))\n", 'epoch_1.pth'),
    'mmseg': ('posmlp/toy/fpn_posmlp-t_toy-ade20k.py',
              "train_dataloader = dict(batch_size=1, dataset=dict(indices=2))\n"
              "train_cfg = dict(max_iters=2, val_interval=10)\n"
              "default_hooks = dict(checkpoint=dict(interval=2))\n", 'iter_2.pth'),
    'mmaction': ('posmlp_video/toy/posmlp-video-s_toy-k400.py',
                 "train_dataloader = dict(batch_size=2, dataset=dict(indices=2))\n"
                 "train_cfg = dict(max_epochs=1, val_interval=10)\n"
                 "default_hooks = dict(checkpoint=dict(interval=1))\n", 'epoch_1.pth'),
}


@pytest.mark.parametrize('library', [
    'mmpretrain',
    pytest.param('mmdet', marks=pytest.mark.slow),
    pytest.param('mmseg', marks=pytest.mark.slow),
    pytest.param('mmaction', marks=pytest.mark.slow),
])
def test_each_librarys_own_train_py_trains_a_user_config_inheriting_mmposmlp(library, linked_env, toy_data):
    """``python <library>/.mim/tools/train.py my_config.py`` (what ``mim train <library>`` runs) on a config in
    the user's folder whose ``_base_`` is ``mmposmlp::...``: it trains on toy data and writes a checkpoint
    holding our backbone's weights."""
    import importlib
    tool = osp.join(osp.dirname(importlib.import_module(library).__file__), '.mim', 'tools', 'train.py')
    base, extra, ckpt_name = OWN_TRAIN[library]
    cwd = osp.join(linked_env['cwd'], library)
    os.makedirs(osp.join(cwd, 'data'), exist_ok=True)
    if not osp.exists(osp.join(cwd, 'data', 'toy')):
        os.symlink(toy_data, osp.join(cwd, 'data', 'toy'))
    with open(osp.join(cwd, 'my_config.py'), 'w') as f:
        f.write(f"_base_ = 'mmposmlp::{base}'\n{extra}")
    res = subprocess.run([linked_env['py'], tool, 'my_config.py', '--work-dir', 'w'], cwd=cwd,
                         env=linked_env['env'], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f'{library} train.py failed:\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}'
    ckpt = osp.join(cwd, 'w', ckpt_name)
    assert osp.isfile(ckpt), sorted(os.listdir(osp.join(cwd, 'w')))
    from mmposmlp.utils.safe_load import load_checkpoint, trusted_checkpoints
    with trusted_checkpoints([ckpt]):  # the library's own trainer writes stock mmengine files; this one we made
        state = load_checkpoint(ckpt)['state_dict']
    assert any(k.startswith('backbone.') for k in state), sorted(state)[:5]
    assert "'mmposmlp.PosMLP" in open(osp.join(cwd, 'w', 'my_config.py')).read()  # the config it ran


# ----------------------------------------------------------------------------------------------------------------
# mmengine's pure-Python configs: mmposmlp/configs/ (generated from the text configs)
# ----------------------------------------------------------------------------------------------------------------

def _pure_python_generator():
    return load_tool('.dev_scripts', 'make_pure_python_configs.py')


def _own_type_names(obj):
    """A config dict with our types written one way: ``'mmposmlp.X'`` (text configs) and the class ``X``
    (pure-Python configs, or its ``'mmposmlp.<module>.X'`` name once dumped) both become ``'mmposmlp.X'``."""
    if isinstance(obj, dict):
        return {k: _own_type_names(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_own_type_names(v) for v in obj]
    if isinstance(obj, type):
        return f'mmposmlp.{obj.__name__}' if obj.__module__.startswith('mmposmlp.') else obj
    if isinstance(obj, str) and obj.startswith('mmposmlp.'):
        return 'mmposmlp.' + obj.rpartition('.')[2]
    return obj


def test_pure_python_configs_are_the_text_configs():
    """Each ``mmposmlp/configs/<family>/<name>.py`` (one per family and task) is a pure-Python config that
    mmengine parses in lazy-import mode, our types imported as classes, and holds what its text config holds
    (parses 16 configs: ~25 s on a loaded 2-core machine)."""
    from mmengine.config import Config
    gen = _pure_python_generator()
    families = {d for d in os.listdir(osp.join(ROOT, 'configs')) if not d.startswith('_')}
    assert {m.split('/')[0] for m in gen.CONFIGS} == families
    tasks = {Config.fromfile(osp.join(ROOT, src)).default_scope for src in gen.CONFIGS.values()}
    assert tasks == {'mmpretrain', 'mmdet', 'mmseg', 'mmaction'}
    for mod, src in gen.CONFIGS.items():
        path = osp.join(ROOT, 'mmposmlp', 'configs', mod + '.py')
        assert Config._is_lazy_import(path), path
        lazy = Config.fromfile(path)
        assert isinstance(lazy._cfg_dict.model.backbone.type, type), (mod, lazy._cfg_dict.model.backbone.type)
        got, want = _own_type_names(lazy.to_dict()), _own_type_names(Config.fromfile(osp.join(ROOT, src)).to_dict())
        assert got == want, (f'{mod} differs from {src}: run python .dev_scripts/make_pure_python_configs.py',
                             sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k)))


PURE_PYTHON_USER_CFG = """
from mmengine.config import read_base

with read_base():
    from mmposmlp.configs.posmlp.posmlp_t_8xb120_in1k import *

model.backbone.update(arch=ARCH, drop_path_rate=0.0)
model.head.update(in_channels=128)
toy_train = [dict(type='LoadImageFromFile'), dict(type='RandomResizedCrop', scale=64), dict(type='PackInputs')]
toy_test = [dict(type='LoadImageFromFile'), dict(type='CenterCrop', crop_size=64), dict(type='PackInputs')]
train_dataloader.update(batch_size=2, num_workers=0, persistent_workers=False)
train_dataloader.dataset.update(data_root='data/toy/imagenet', pipeline=toy_train, indices=2)
val_dataloader.update(batch_size=2, num_workers=0, persistent_workers=False)
val_dataloader.dataset.update(data_root='data/toy/imagenet', pipeline=toy_test, indices=2)
test_dataloader = val_dataloader
train_cfg.update(max_epochs=1, val_interval=1)
custom_hooks = []
""".replace('ARCH', SMALL_POSMLP)


def test_user_pure_python_config_inherits_ours_with_read_base_and_trains(linked_env, toy_data):
    """A pure-Python config in the user's folder inherits ``mmposmlp.configs.posmlp.posmlp_t_8xb120_in1k`` with
    ``read_base`` (mmengine finds the file under the installed package), and mmpretrain's own tools/train.py
    builds our PosMLP from it and trains one iteration on toy data."""
    import importlib
    tool = osp.join(osp.dirname(importlib.import_module('mmpretrain').__file__), '.mim', 'tools', 'train.py')
    cwd = osp.join(linked_env['cwd'], 'pure_python')
    os.makedirs(osp.join(cwd, 'data'), exist_ok=True)
    if not osp.exists(osp.join(cwd, 'data', 'toy')):
        os.symlink(toy_data, osp.join(cwd, 'data', 'toy'))
    with open(osp.join(cwd, 'my_pure_config.py'), 'w') as f:
        f.write(PURE_PYTHON_USER_CFG)
    res = subprocess.run([linked_env['py'], tool, 'my_pure_config.py', '--work-dir', 'w'], cwd=cwd,
                         env=linked_env['env'], capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f'train.py failed:\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}'
    assert re.search(r'Epoch\(train\) \[1\]\[1/1\].*loss: [\d.]+', out), out[-3000:]
    ckpt = osp.join(cwd, 'w', 'epoch_1.pth')
    from mmposmlp.utils.safe_load import load_checkpoint, trusted_checkpoints
    with trusted_checkpoints([ckpt]):
        state = load_checkpoint(ckpt)['state_dict']
    assert state['backbone.stages.3.blocks.0.fc1.weight'].shape[1] == 128  # the user's PosMLP, trained
    assert 'PosMLP' in open(osp.join(cwd, 'w', 'my_pure_config.py')).read()


def _step_function():
    """tools/setup_env.sh's log/step helpers, without running the install."""
    text = open(osp.join(ROOT, 'tools', 'setup_env.sh')).read()
    log = re.search(r'^log\(\) .*$', text, re.M).group(0)
    step = re.search(r'^step\(\) \{.*?^\}', text, re.M | re.S).group(0)
    return f'set -euo pipefail\n{log}\nT0=$SECONDS\nPROGRESS_EVERY=1\n{step}\n'


def test_install_steps_report_what_runs_and_the_elapsed_time():
    res = subprocess.run(['bash', '-c', _step_function() + "step 'waiting for something' sleep 3\necho after"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == '[setup_env] waiting for something ...'
    assert any(re.fullmatch(r'\[setup_env\]   \.\.\. waiting for something: 0m[12]s so far', x) for x in lines), lines
    assert re.fullmatch(r'\[setup_env\] done in [34]s: waiting for something \(total [34]s\)', lines[-2]), lines
    assert lines[-1] == 'after'
    res = subprocess.run(['bash', '-c', _step_function() + "step 'a failing step' bash -c 'exit 3'\necho after"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 3 and 'FAILED after' in res.stdout and 'after\n' not in res.stdout


def test_setup_env_installs_what_the_tools_import():
    text = open(osp.join(ROOT, 'tools', 'setup_env.sh')).read()
    for pkg in ('psutil', 'openmim', 'timm', 'onnx', 'onnxruntime', 'onnxscript', 'seaborn', 'pandas', 'tabulate'):
        assert re.search(rf'\s{pkg}(\s|$)', text), pkg
