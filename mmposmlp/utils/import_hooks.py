"""The two registrations an installed mmposmlp makes when other packages are imported, at interpreter start-up.

* mmengine (every release from 0.3 to 0.10.7, the newest) resolves ``_base_ = 'pkg::path'`` only for packages
  listed in ``mmengine.config.utils.MODULE2PACKAGE``, and a config is parsed before any ``custom_imports`` run
  (mmengine has no public way to add a package: docs/architecture.md); so ``mmposmlp`` is added to that table
  when ``mmengine.config.utils`` is imported.
* mmpretrain's model hub (``list_models``, ``get_model``) has no plugin entry point; our classification models are
  added with its public ``ModelHub.register_model_index`` when ``mmpretrain.apis.model`` is imported.

The wheel ships ``mmposmlp-config.pth``, whose one line loads this file (by path, without importing mmposmlp,
torch or mmengine) and calls :func:`install_config_package_hook`: one post-import finder per module on
``sys.meta_path``, each removed once it ran. Importing mmposmlp installs no finder: it registers directly
(``mmposmlp/__init__.py``).

Standard library only: this file runs at interpreter start-up.
"""
import importlib.util
import sys

CONFIG_PACKAGES = {'mmposmlp': 'mmposmlp'}  # config prefix -> distribution name
CONFIG_MODULE = 'mmengine.config.utils'
HUB_MODULE = 'mmpretrain.apis.model'  # mmpretrain's ModelHub


class _PostImportFinder:
    """A ``sys.meta_path`` entry that lets the normal finders locate ``name`` and runs ``callback(module)``
    after the module body has executed; it removes itself once used."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback
        self._searching = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._searching:
            return None
        self._searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        exec_module = spec.loader.exec_module
        callback = self.callback

        def exec_then_callback(module):
            exec_module(module)
            callback(module)

        spec.loader.exec_module = exec_then_callback
        return spec


def when_imported(name: str, callback) -> None:
    """``callback(module)`` now if ``name`` is imported already, else right after its import."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    for finder in sys.meta_path:
        if isinstance(finder, _PostImportFinder) and finder.name == name and finder.callback == callback:
            return
    sys.meta_path.insert(0, _PostImportFinder(name, callback))


def register_config_packages(config_utils) -> None:
    """Add ``mmposmlp`` to mmengine's table of packages whose configs ``pkg::path`` may name."""
    for attr in ('MODULE2PACKAGE', 'PKG2PROJECT'):  # one dict since 0.5; only PKG2PROJECT before
        table = getattr(config_utils, attr, None)
        if isinstance(table, dict):
            for prefix, package in CONFIG_PACKAGES.items():
                table.setdefault(prefix, package)


def register_hub_models(apis_model) -> None:
    """Add our classification models to mmpretrain's model hub (:mod:`mmposmlp.utils.model_hub`)."""
    from mmposmlp.utils.model_hub import register_classification_models
    register_classification_models(apis_model)


def install_config_package_hook() -> None:
    """What the wheel's ``.pth`` line calls at interpreter start-up: mmengine's config packages get ``mmposmlp``,
    mmpretrain's model hub our classification models, each as soon as its module is imported."""
    when_imported(CONFIG_MODULE, register_config_packages)
    when_imported(HUB_MODULE, register_hub_models)
