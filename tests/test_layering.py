"""The package is layered bottom-up: a module imports mmposmlp modules of its own layer or below, never above.

Read from the source with ``ast`` (no import runs), so it also sees imports inside functions and
``importlib.import_module('mmposmlp....')`` calls with a literal name.
"""
import ast
import os
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

#: top-level module or subpackage of mmposmlp -> layer (lower = more basic)
LAYERS = {
    '__init__': 0,  # `import mmposmlp` stays light: the ground layer only
    'version': 0,
    'registry': 0,
    'utils': 0,  # compat, env, dist, launch, checkpoint safety: ground level
    'models': 1,
    'datasets': 2,
    'engine': 2,
    'testing': 2,  # builds models from configs for tests and tools
    'analysis': 3,  # benchmark, complexity
    'deployment': 3,  # ONNX export
    'configs': 4,  # pure-Python configs: name models, transforms, hooks
}


def _top_level(module: str) -> str:
    """``mmposmlp.models.backbones`` -> ``models``; ``mmposmlp`` -> ``__init__``."""
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else '__init__'


def _imported_modules(path: str, module: str, is_package: bool):
    """The mmposmlp modules ``path`` imports (absolute, relative, and ``import_module`` with a literal)."""
    tree = ast.parse(open(path).read(), path)
    package = module if is_package else module.rpartition('.')[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')[:len(package.split('.')) - node.level + 1]
                names = ['.'.join(base + ([node.module] if node.module else []))]
            else:
                names = [node.module]
            if names == ['mmposmlp']:  # `from mmposmlp import analysis` imports mmposmlp.analysis
                names = [f'mmposmlp.{a.name}' for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, 'attr', getattr(node.func, 'id', None))
              in ('import_module', '__import__') and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        else:
            continue
        for name in names:
            if name == 'mmposmlp' or (name or '').startswith('mmposmlp.'):
                yield node.lineno, name


def upward_imports(package_dir: str, layers: dict) -> list:
    """``'<file>:<line> (<layer> <n>) imports <module> (<layer> <m>)'`` for every import of a higher layer."""
    found = []
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for f in sorted(files):
            if not f.endswith('.py'):
                continue
            path = osp.join(root, f)
            rel = osp.relpath(path, osp.dirname(package_dir))
            module = rel[:-3].replace(os.sep, '.')
            is_package = f == '__init__.py'
            if is_package:
                module = module[:-len('.__init__')]
            src = _top_level(module)
            for line, name in _imported_modules(path, module, is_package):
                dst = _top_level(name)
                if dst not in layers:  # `from mmposmlp import __version__` and the like
                    dst = '__init__'
                if layers[dst] > layers[src]:
                    found.append(f'{rel}:{line} ({src}, layer {layers[src]}) imports {name} '
                                 f'({dst}, layer {layers[dst]})')
    return found


def test_every_top_level_module_has_a_layer():
    pkg = osp.join(ROOT, 'mmposmlp')
    names = {osp.splitext(n)[0] for n in os.listdir(pkg)
             if n.endswith('.py') or osp.isfile(osp.join(pkg, n, '__init__.py'))}
    assert names == set(LAYERS), f'give each mmposmlp module a layer in tests/test_layering.py: {names ^ set(LAYERS)}'


def test_no_module_imports_a_higher_layer():
    found = upward_imports(osp.join(ROOT, 'mmposmlp'), LAYERS)
    assert not found, 'lower layers must not import higher ones (move the code down or the import up): ' + \
        '; '.join(found)


def test_the_check_sees_absolute_relative_lazy_and_import_module_imports(tmp_path):
    pkg = tmp_path / 'mmposmlp'
    for sub in ('utils', 'models', 'analysis'):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / '__init__.py').write_text('')
    (pkg / '__init__.py').write_text('from .utils import env\n__version__ = "0"\n')
    (pkg / 'utils' / 'env.py').write_text('import os\n\n\ndef f():\n    from mmposmlp.analysis import complexity\n')
    (pkg / 'utils' / 'dist.py').write_text('import importlib\nimportlib.import_module("mmposmlp.models")\n')
    (pkg / 'models' / '__init__.py').write_text('from ..analysis import benchmark\nfrom . import layers\n')
    (pkg / 'analysis' / 'complexity.py').write_text('from mmposmlp.models import x\nfrom ..utils import env\n')
    (pkg / 'utils' / 'launch.py').write_text('from mmposmlp import __version__\nfrom mmposmlp import models\n')
    layers = {'__init__': 0, 'utils': 0, 'models': 1, 'analysis': 3}
    found = upward_imports(str(pkg), layers)
    assert found == [
        'mmposmlp/models/__init__.py:1 (models, layer 1) imports mmposmlp.analysis (analysis, layer 3)',
        'mmposmlp/utils/dist.py:2 (utils, layer 0) imports mmposmlp.models (models, layer 1)',
        'mmposmlp/utils/env.py:5 (utils, layer 0) imports mmposmlp.analysis (analysis, layer 3)',
        'mmposmlp/utils/launch.py:2 (utils, layer 0) imports mmposmlp.models (models, layer 1)',
    ], found
