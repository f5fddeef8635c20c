"""mmposmlp's own registries (scope ``mmposmlp``), children of mmengine's roots.

Any downstream config (default scope mmdet, mmseg, mmaction or mmpretrain) builds our
modules as ``type='mmposmlp.X'``: mmengine imports ``mmposmlp.registry`` and then the
``locations`` below on first use, so not even ``custom_imports`` is required.
"""
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
import re

from mmengine.registry import DefaultScope, Registry

SCOPE = 'mmposmlp'


def _outer_scope():
    """The innermost default scope that is not ours (the library running the config), or None.

    The current scope (``DefaultScope.get_current_instance``) when it is not ours. Inside a build that
    mmengine switched to our scope (a dict with ``_scope_='mmposmlp'``), the scope it switched from. mmengine
    offers no public way to that one: the switch is made by the *caller's* registry
    (``Registry.switch_scope_and_registry`` -> ``DefaultScope.overwrite_default_scope``), which calls no code of
    ours before our ``get``, and ``DefaultScope`` (a ``ManagerMixin``) exposes only the newest instance and
    instances by name (``get_current_instance``, ``get_instance``, ``check_instance_created``); the enclosing
    scopes are kept only in its instance table, so that one table is read here, and a release without it is
    refused in one sentence rather than resolving names in the wrong library.
    """
    current = DefaultScope.get_current_instance()
    if current is None or current.scope_name != SCOPE:
        return None if current is None else current.scope_name
    for scope_name in reversed(_default_scope_names()):
        if scope_name != SCOPE:
            return scope_name
    return None


def _default_scope_names() -> list:
    """The scope names of every live ``DefaultScope``, oldest first (mmengine's instance table)."""
    table = vars(DefaultScope).get('_instance_dict')  # ManagerMeta gives each class its own
    if not isinstance(table, dict) or not all(hasattr(s, 'scope_name') for s in table.values()):
        import mmengine
        raise RuntimeError(f'mmengine {mmengine.__version__} no longer keeps DefaultScope._instance_dict, which '
                           "mmposmlp reads to build a `mmposmlp::` config's unprefixed types in the library that "
                           'runs it: use mmengine<=0.10.7, or write those types with their scope prefix '
                           "(type='mmpretrain.ImageClassifier').")
    return [s.scope_name for s in table.values()]


class PluginRegistry(Registry):
    """A registry of the plugin scope that falls back to the running library for names it lacks.

    A config inheriting ``_base_ = 'mmposmlp::...'`` gets ``_scope_='mmposmlp'`` on its top-level dicts
    (mmengine's rule for package-prefixed bases), and mmengine then looks up *every* type built below them
    here, also the library's own (``ImageClassifier``, ``LoadImageFromFile``). An unprefixed name that
    neither mmposmlp nor mmengine's root knows resolves in the scope that was current before ours.
    """

    def get(self, key):
        obj = super().get(key)
        if obj is not None or not isinstance(key, str) or '.' in key:
            return obj
        outer = _outer_scope()
        if outer is None:
            return None
        sibling = self.root.children.get(outer)
        return None if sibling is None or sibling is self else sibling.get(key)


MODELS = PluginRegistry('model', parent=MMENGINE_MODELS, scope=SCOPE, locations=['mmposmlp.models'])
TRANSFORMS = PluginRegistry('transform', parent=MMENGINE_TRANSFORMS, scope=SCOPE, locations=['mmposmlp.datasets'])
DATASETS = PluginRegistry('dataset', parent=MMENGINE_DATASETS, scope=SCOPE, locations=['mmposmlp.datasets'])
HOOKS = PluginRegistry('hook', parent=MMENGINE_HOOKS, scope=SCOPE, locations=['mmposmlp.engine'])
PARAM_SCHEDULERS = PluginRegistry('parameter scheduler', parent=MMENGINE_PARAM_SCHEDULERS, scope=SCOPE,
                                  locations=['mmposmlp.engine'])
# the other runner-built kinds hold nothing of ours, but a dict scoped to mmposmlp (inherited through
# ``mmposmlp::``) is looked up here first: without a child of ours mmengine falls back to its bare root,
# which lacks the library's types (mmaction2's ``AccMetric`` under mmaction2's own tools/train.py)
import mmengine.registry as _roots  # noqa: E402

for _attr in ('METRICS', 'EVALUATOR', 'OPTIMIZERS', 'OPTIM_WRAPPERS', 'OPTIM_WRAPPER_CONSTRUCTORS', 'DATA_SAMPLERS',
              'LOOPS', 'VISUALIZERS', 'VISBACKENDS', 'LOG_PROCESSORS', 'WEIGHT_INITIALIZERS', 'FUNCTIONS',
              'MODEL_WRAPPERS', 'RUNNERS', 'RUNNER_CONSTRUCTORS', 'TASK_UTILS', 'INFERENCERS'):
    _root = getattr(_roots, _attr)
    globals()[_attr] = _root.children.get(SCOPE) or PluginRegistry(
        _root.name, parent=_root, scope=SCOPE,
        locations=['mmposmlp.engine' if _attr == 'RUNNERS' else 'mmposmlp.registry'])
del _attr, _root


def _registered_names(registry_name: str) -> list:
    """Every type name registered under mmengine's root registry ``registry_name`` (e.g. ``'model'``)
    and its children, written as a config would: ``'Name'`` for the root, ``'scope.Name'`` below it."""
    import mmengine.registry as roots
    from mmengine.registry import Registry as _Registry
    root = next((r for r in vars(roots).values() if isinstance(r, _Registry) and r.name == registry_name
                 and r.parent is None), None)
    if root is None:
        return []
    names, todo = [], [(root, '')]
    while todo:
        reg, prefix = todo.pop()
        reg.import_from_location()
        names.extend(prefix + name for name in reg.module_dict)
        todo.extend((child, f'{scope}.') for scope, child in reg.children.items())
    return names


def closest_registered(name: str, registry_name: str, n: int = 3, cutoff: float = 0.75) -> list:
    """The registered names closest to ``name`` (``'scope.Name'`` form), mmposmlp's first; names that
    differ only in the scope prefix or in letter case come before spelling neighbours."""
    import difflib
    bare = name.rpartition('.')[2].lower()
    candidates = _registered_names(registry_name)
    by_bare = {}
    for full in candidates:
        by_bare.setdefault(full.rpartition('.')[2].lower(), []).append(full)
    close = difflib.get_close_matches(bare, list(by_bare), n=n, cutoff=cutoff)
    found = [full for b in close for full in by_bare[b] if full != name]
    found.sort(key=lambda f: (f.rpartition('.')[2].lower() != bare, not f.startswith('mmposmlp.')))
    return found[:n]


_NOT_IN_REGISTRY = re.compile(r'([\w.]+) is not in the ([\w:.]+) registry')


def unknown_type_in(exc: BaseException):
    """``(name, registry)`` of mmengine's "X is not in the scope::kind registry" error (also when mmengine wrapped it
    as ``class `Outer` in file.py: ...``), else None."""
    text = str(exc.args[0]) if getattr(exc, 'args', None) else str(exc)
    m = _NOT_IN_REGISTRY.search(text)
    return m.groups() if m else None


def unknown_type_message(name: str, registry: str) -> str:
    """One sentence for ``type=name`` missing from ``registry`` (``'scope::model'``): the closest registered
    names, and the fix (the ``mmposmlp.`` prefix, or ``custom_imports`` for a module nobody imported)."""
    scope, _, registry_name = registry.rpartition('::')
    try:
        close = closest_registered(name, registry_name)
    except Exception:  # noqa: BLE001  (the suggestion is a courtesy; the message stands without it)
        close = []
    # names of the running library's own scope need no prefix
    close = [c.partition('.')[2] if scope and c.startswith(scope + '.') else c for c in close]
    head = f'unknown type {name!r}: it is not registered in the {registry} registry'
    custom = ("add the module that registers it to custom_imports (custom_imports = dict(imports=['your.module'], "
              'allow_failed_imports=False))')
    if close:
        best = close[0]
        others = f' (or {", ".join(f"`{c}`" for c in close[1:])})' if len(close) > 1 else ''
        if best.lower() == name.lower() or best.rpartition('.')[2].lower() == name.rpartition('.')[2].lower():
            if best.startswith('mmposmlp.') and not name.startswith('mmposmlp.'):
                fix = (f"mmposmlp's modules live in the mmposmlp registry, so write type='{best}' "
                       '(custom_imports alone does not make unprefixed names visible)')
            else:
                fix = f"write type='{best}'"
        else:
            fix = f"fix the spelling (type='{best}'), or if it is a module of your own, {custom}"
        return f'{head}: did you mean `{best}`{others}? {fix[0].upper()}{fix[1:]}.'
    return (f"{head}: check the spelling of `type='{name}'`; mmposmlp modules are written type='mmposmlp.Name'; "
            f'for a module of your own, {custom}.')
