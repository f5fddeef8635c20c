"""mmposmlp.Runner, the extension point every library's stock tools reach through ``runner_type``: importing
mmposmlp changes nothing of mmengine, every shipped config selects the Runner, and the stock train entry
(``RUNNERS.build(cfg)``, as mmdet's/mmseg's tools/train.py do) gets our messages."""
import ast
import glob
import os
import os.path as osp
import subprocess
import sys
import textwrap

import pytest

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
RUNNER_TYPE = 'mmposmlp.Runner'

SNAPSHOT = '''
import sys
import mmengine.config.utils, mmengine.hooks, mmengine.registry, mmengine.runner, mmengine.runner.checkpoint
from mmengine.runner.checkpoint import CheckpointLoader


def snapshot():
    """Every function and class of every imported mmengine module, every attribute of those classes,
    CheckpointLoader's schemes and sys.meta_path (objects compared by identity)."""
    state = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith('mmengine') or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if callable(value):
                state[(name, attr)] = value
            if isinstance(value, type) and value.__module__ == name:
                for key, member in list(vars(value).items()):
                    state[(name, attr, key)] = member
    return state, dict(CheckpointLoader._schemes), list(sys.meta_path)
'''


def test_importing_mmposmlp_changes_nothing_of_mmengine():
    """In a fresh interpreter: no mmengine function, class or method is replaced, no CheckpointLoader scheme is
    registered and no import hook added by ``import mmposmlp`` (nor by importing its models and engine)."""
    code = SNAPSHOT + textwrap.dedent('''
        (before, schemes, meta_path) = snapshot()
        import mmposmlp, mmposmlp.models, mmposmlp.engine, mmposmlp.registry
        (after, schemes_after, meta_path_after) = snapshot()
        changed = sorted(str(k) for k, v in before.items() if after.get(k) is not v)
        assert not changed, changed
        assert schemes_after == schemes, sorted(set(schemes_after.items()) ^ set(schemes.items()), key=str)
        assert meta_path_after == meta_path, (meta_path, meta_path_after)
        assert mmposmlp.engine.Runner.__module__ == 'mmposmlp.engine.runner'
        print('unchanged', len(before))
        ''')
    res = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0 and 'unchanged' in res.stdout, res.stderr[-3000:]


def test_the_snapshot_sees_a_patch_a_scheme_and_an_import_hook():
    """The check above can fail: a replaced method, a registered scheme and a meta_path entry each show."""
    code = SNAPSHOT + textwrap.dedent('''
        (before, schemes, meta_path) = snapshot()
        from mmengine.runner import Runner
        Runner.resume = lambda self, *a, **k: None
        CheckpointLoader.register_scheme(prefixes='mine://', loader=lambda f, m: {})
        sys.meta_path.insert(0, object())
        (after, schemes_after, meta_path_after) = snapshot()
        changed = sorted(str(k) for k, v in before.items() if after.get(k) is not v)
        print(changed, schemes_after != schemes, meta_path_after != meta_path)
        ''')
    res = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert "('mmengine.runner.runner', 'Runner', 'resume')" in res.stdout and 'True True' in res.stdout, \
        res.stdout + res.stderr[-3000:]


# ------------------------------------------------------------------------------------------- shipped configs
def _assigned(path: str, name: str):
    tree = ast.parse(open(path).read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def runner_type_of(path: str):
    """The ``runner_type`` a text config resolves to, read from the sources: its own assignment, else the last
    of its local ``_base_`` files that resolves one (upstream ``pkg::`` bases set none)."""
    own = _assigned(path, 'runner_type')
    if own is not None:
        return own
    bases = _assigned(path, '_base_') or []
    found = None
    for base in [bases] if isinstance(bases, str) else bases:
        if '::' not in base:
            found = runner_type_of(osp.normpath(osp.join(osp.dirname(path), base))) or found
    return found


def shipped_configs():
    return sorted(p for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
                  if '_base_' not in osp.relpath(p, ROOT).split(os.sep))


def test_every_shipped_config_selects_the_mmposmlp_runner():
    text = shipped_configs()
    pure = sorted(glob.glob(osp.join(ROOT, 'mmposmlp', 'configs', '**', '*.py'), recursive=True))
    pure = [p for p in pure if osp.basename(p) != '__init__.py']
    assert len(text) > 300 and len(pure) >= 8
    wrong = [osp.relpath(p, ROOT) for p in text if runner_type_of(p) != RUNNER_TYPE]
    wrong += [osp.relpath(p, ROOT) for p in pure if _assigned(p, 'runner_type') != RUNNER_TYPE]
    assert not wrong, f'configs that do not run mmposmlp.Runner: {wrong}'


def test_the_config_check_agrees_with_mmengine():
    from mmengine.config import Config
    for rel in ('configs/posmlp/toy/posmlp-t_toy-in1k.py', 'configs/cpvt/paper_tables/resnet18_8xb32-90e_in1k.py'):
        path = osp.join(ROOT, rel)
        assert Config.fromfile(path).runner_type == runner_type_of(path) == RUNNER_TYPE
    lazy = Config.fromfile(osp.join(ROOT, 'mmposmlp', 'configs', 'posmlp', 'posmlp_t_8xb120_in1k.py'))
    assert lazy.runner_type == RUNNER_TYPE


@pytest.mark.slow
def test_every_shipped_config_resolves_runner_type_with_mmengine():
    """The same as the source check, through mmengine's own parsing of every config (minutes)."""
    from mmengine.config import Config
    wrong = [p for p in shipped_configs() if Config.fromfile(p).get('runner_type') != RUNNER_TYPE]
    assert not wrong, wrong


# ------------------------------------------------------------------------------------------- plugin hooks
def test_plugin_hooks_are_registered_and_added_once():
    from mmengine.config import Config

    from mmposmlp.engine.runner import PLUGIN_HOOKS, add_plugin_hooks
    from mmposmlp.registry import HOOKS
    assert PLUGIN_HOOKS and all(HOOKS.get(name.partition('.')[2]) is not None for name in PLUGIN_HOOKS)
    cfg = Config(dict(custom_hooks=[dict(type='ExactResumeHook')],
                      default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1))))
    add_plugin_hooks(cfg)
    add_plugin_hooks(cfg)
    names = [h['type'] for h in cfg.custom_hooks]
    assert names == ['ExactResumeHook'] + [n for n in PLUGIN_HOOKS if not n.endswith('.ExactResumeHook')]
    assert cfg.default_hooks.checkpoint.type == 'mmposmlp.AtomicCheckpointHook'


# ------------------------------------------------------------------------------------------- stock train entry
SMALL_POSMLP = ("arch=dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups=[2, 4, 8, 16], "
                "mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7]), drop_path_rate=0.0, init_cfg=None")


def _user_config(tmp_path, toy_data, base, extra):
    """A user's config inheriting one of our toy configs (so it inherits runner_type), in a folder with data/toy."""
    os.makedirs(tmp_path / 'data', exist_ok=True)
    if not osp.exists(tmp_path / 'data' / 'toy'):
        os.symlink(toy_data, tmp_path / 'data' / 'toy')
    path = tmp_path / 'mine.py'
    path.write_text(f'_base_ = {osp.join(ROOT, "configs", base)!r}\n' + textwrap.dedent(extra))
    return str(path)


def _stock_build(cfg_path, library):
    """What the stock tools/train.py of mmdet 3.3 / mmseg 1.2 / mmaction2 1.2 / mmpretrain 1.2 does to make its
    runner (``Runner.from_cfg`` without a runner_type, ``RUNNERS.build(cfg)`` with one), in this process."""
    from mmengine.config import Config
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner
    cfg = Config.fromfile(cfg_path)
    cfg.work_dir = osp.join(osp.dirname(cfg_path), 'work')
    assert cfg.default_scope == library
    return RUNNERS.build(cfg) if 'runner_type' in cfg else Runner.from_cfg(cfg)


def test_stock_train_entry_builds_the_mmposmlp_runner(toy_data, tmp_path, monkeypatch):
    from mmposmlp.engine.runner import PLUGIN_HOOKS, Runner
    monkeypatch.chdir(tmp_path)
    cfg = _user_config(tmp_path, toy_data, 'posmlp/toy/posmlp-t_toy-in1k.py',
                       f'model = dict(backbone=dict(_delete_=True, type="mmposmlp.PosMLP", {SMALL_POSMLP}),'
                       ' head=dict(in_channels=128))\n')
    runner = _stock_build(cfg, 'mmpretrain')
    assert type(runner) is Runner
    hooks = {type(h).__name__ for h in runner.hooks}
    assert {n.partition('.')[2] for n in PLUGIN_HOOKS} <= hooks and 'AtomicCheckpointHook' in hooks


def test_stock_train_entry_answers_an_unprefixed_type_with_the_prefixed_name(toy_data, tmp_path, monkeypatch):
    from mmposmlp.engine.errors import UnknownTypeError
    monkeypatch.chdir(tmp_path)
    cfg = _user_config(tmp_path, toy_data, 'posmlp/toy/retinanet_posmlp-t_1x_toy-coco.py',
                       f'model = dict(backbone=dict(_delete_=True, type="PosMLP", {SMALL_POSMLP}))\n')
    with pytest.raises(KeyError) as info:  # still mmengine's exception type for code that catches it
        _stock_build(cfg, 'mmdet')
    assert isinstance(info.value, UnknownTypeError)
    msg = str(info.value)
    assert "unknown type 'PosMLP'" in msg and 'did you mean `mmposmlp.PosMLP`' in msg, msg
    assert "write type='mmposmlp.PosMLP'" in msg and '\n' not in msg, msg


def test_stock_train_entry_names_a_model_level_pretrained_with_its_fix(toy_data, tmp_path, monkeypatch):
    from mmposmlp.engine.errors import UserError
    monkeypatch.chdir(tmp_path)
    cfg = _user_config(tmp_path, toy_data, 'posmlp/toy/fpn_posmlp-t_toy-ade20k.py',
                       "model = dict(pretrained='open-mmlab://resnet50_v1c')\n")
    with pytest.raises(UserError) as info:
        _stock_build(cfg, 'mmseg')
    msg = str(info.value)
    assert "model.pretrained='open-mmlab://resnet50_v1c' is left from the upstream config" in msg, msg
    assert '--cfg-options model.pretrained=None' in msg and 'mmposmlp.PosMLP' in msg, msg
    assert 'does not exist' not in msg and '\n' not in msg


def _run_stock_train_py(library, cfg_path, monkeypatch):
    """The library's own tools/train.py (what ``mim train <library>`` runs), in this process."""
    import importlib
    import runpy
    tool = osp.join(osp.dirname(importlib.import_module(library).__file__), '.mim', 'tools', 'train.py')
    if not osp.isfile(tool):
        pytest.skip(f'{library} ships no .mim/tools/train.py')
    monkeypatch.setattr(sys, 'argv', [tool, cfg_path, '--work-dir', osp.join(osp.dirname(cfg_path), 'work')])
    runpy.run_path(tool, run_name='__main__')


@pytest.mark.parametrize('library,base,extra,needles', [
    ('mmseg', 'posmlp/toy/fpn_posmlp-t_toy-ade20k.py', "model = dict(pretrained='open-mmlab://resnet50_v1c')\n",
     ("model.pretrained='open-mmlab://resnet50_v1c' is left from the upstream config", 'model.pretrained=None')),
    ('mmdet', 'posmlp/toy/retinanet_posmlp-t_1x_toy-coco.py',
     f'model = dict(backbone=dict(_delete_=True, type="PosMLP", {SMALL_POSMLP}))\n',
     ("unknown type 'PosMLP'", 'did you mean `mmposmlp.PosMLP`')),
])
def test_the_librarys_own_train_py_gets_our_messages(library, base, extra, needles, toy_data, tmp_path,
                                                     monkeypatch):
    from mmposmlp.engine.errors import UserError
    monkeypatch.chdir(tmp_path)
    cfg = _user_config(tmp_path, toy_data, base, extra)
    with pytest.raises(UserError) as info:
        _run_stock_train_py(library, cfg, monkeypatch)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
