"""The package is layered bottom-up: a module imports mmposmlp modules of its own layer or below, never above,
and no chain of imports leads from a module back to itself.

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
    'deployment': 3,  # ONNX export
    'configs': 4,  # pure-Python configs: name models, transforms, hooks
}


def _top_level(module: str) -> str:
    """``mmposmlp.models.backbones`` -> ``models``; ``mmposmlp`` -> ``__init__``."""
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else '__init__'


def _imported_modules(path: str, module: str, is_package: bool, names_too: bool = False):
    """The mmposmlp modules ``path`` imports (absolute, relative, and ``import_module`` with a literal);
    ``names_too``: ``from a import b`` yields ``a.b`` (a submodule, or a name of ``a``)."""
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
            if names == ['mmposmlp'] or names_too:  # `from mmposmlp import analysis` imports mmposmlp.analysis
                names = [f'{names[0]}.{a.name}' for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, 'attr', getattr(node.func, 'id', None))
              in ('import_module', '__import__') and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        else:
            continue
        for name in names:
            if name == 'mmposmlp' or (name or '').startswith('mmposmlp.'):
                yield node.lineno, name


def _modules(package_dir: str):
    """Yield ``(path, module name, is_package)`` of every ``.py`` file below ``package_dir``."""
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for f in sorted(files):
            if f.endswith('.py'):
                path = osp.join(root, f)
                module = osp.relpath(path, osp.dirname(package_dir))[:-3].replace(os.sep, '.')
                is_package = f == '__init__.py'
                yield path, module[:-len('.__init__')] if is_package else module, is_package


def import_graph(package_dir: str) -> dict:
    """module -> {(module it imports, line)}: each import (module level or inside a function) names the most
    specific module it reaches (``from mmposmlp.engine import runner`` -> ``mmposmlp.engine.runner``,
    ``from mmposmlp.engine import Runner`` -> ``mmposmlp.engine``)."""
    found = list(_modules(package_dir))
    known = {module for _, module, _ in found}
    graph = {}
    for path, module, is_package in found:
        edges = graph.setdefault(module, set())
        for line, name in _imported_modules(path, module, is_package, names_too=True):
            while name not in known and '.' in name:
                name = name.rpartition('.')[0]
            if name in known and name != module:
                edges.add((name, line))
    return graph


def import_cycles(package_dir: str) -> list:
    """Each import circle as ``'a -> b (a.py:12) -> a (b.py:3)'`` (Tarjan's strongly connected components; one
    circle per component, found by a breadth-first search from its first module)."""
    graph = import_graph(package_dir)
    targets = {m: {n for n, _ in edges} for m, edges in graph.items()}
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(v):  # recursive Tarjan: the package is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(targets[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_one_circle(graph, sorted(c)[0], c) for c in components]


def _one_circle(graph: dict, start: str, component: set) -> str:
    paths, todo = {start: [start]}, [start]
    while todo:
        v = todo.pop(0)
        for w, line in sorted(graph[v]):
            step = f'{w} ({v.replace(".", "/")}.py:{line})'
            if w == start:
                return ' -> '.join(paths[v] + [step])
            if w in component and w not in paths:
                paths[w] = paths[v] + [step]
                todo.append(w)
    return start


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


def test_no_import_circles():
    circles = import_cycles(osp.join(ROOT, 'mmposmlp'))
    assert not circles, 'import circles (move what both sides need into a lower module): ' + '; '.join(circles)


def test_the_circle_check_sees_module_and_function_level_imports(tmp_path):
    pkg = tmp_path / 'mmposmlp'
    (pkg / 'engine').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'engine' / '__init__.py').write_text('from .runner import Runner\n')
    (pkg / 'engine' / 'runner.py').write_text('from mmposmlp.engine.errors import UserError\nRunner = 1\n')
    (pkg / 'engine' / 'errors.py').write_text('class UserError(Exception):\n    pass\n')
    assert import_cycles(str(pkg)) == []  # a package re-exporting its submodules is no circle
    (pkg / 'engine' / 'entry.py').write_text('def f():\n    from mmposmlp.engine import checks\n')
    (pkg / 'engine' / 'checks.py').write_text('from mmposmlp.engine.entry import f\n')
    assert import_cycles(str(pkg)) == [
        'mmposmlp.engine.checks -> mmposmlp.engine.entry (mmposmlp/engine/checks.py:1) -> '
        'mmposmlp.engine.checks (mmposmlp/engine/entry.py:2)']
    (pkg / 'engine' / 'checks.py').write_text('import importlib\nimportlib.import_module("mmposmlp.engine.entry")\n')
    assert len(import_cycles(str(pkg))) == 1
