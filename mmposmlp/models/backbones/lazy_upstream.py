"""Subclasses of downstream libraries' backbones, defined on first use.

``import mmposmlp.models`` imports no downstream library (mmpretrain, mmdet, mmseg). A module whose
classes subclass theirs therefore makes them in a factory that runs on first use, registers a builder
under each class name in ``mmposmlp.registry.MODELS`` at import, and resolves the classes as module
attributes through a PEP 562 ``__getattr__``, so that ``module.Name``, ``from module import Name``
and pickling work as for a class defined at import.

Example (in the module that owns the class)::

    LAZY = LazyUpstreamClasses(__name__, {'SwinPEG': _make_swin_peg}, requires={'SwinPEG': 'mmpretrain'})
    LAZY.register_builders()
    __getattr__ = module_getattr(__name__, LAZY)
"""
from typing import Callable, Dict, Mapping, Tuple, Union

from mmposmlp.registry import MODELS

Factory = Callable[[], Union[type, Mapping[str, type]]]

__all__ = ['LazyUpstreamClasses', 'module_getattr']


class LazyUpstreamClasses:
    """The classes of one module, each made on first use by a factory that imports its upstream library.

    Args:
        module (str): ``__name__`` of the owning module; the classes' ``__module__``, so that they pickle
            as ``module.Name``.
        factories (dict): class name -> factory. A factory returns the class, or a dict of the classes it
            defines together (all of them are kept).
        requires (dict): class name -> the pip package its factory imports, named when that import fails.
        kind (str): what the classes are, for the unknown-name error.
    """

    def __init__(self, module: str, factories: Mapping[str, Factory], requires: Mapping[str, str],
                 kind: str = 'class'):
        unnamed = sorted(set(factories) - set(requires))
        if unnamed:
            raise ValueError(f'LazyUpstreamClasses of {module}: name the package that {unnamed} need in requires')
        self.module = module
        self.factories: Dict[str, Factory] = dict(factories)
        self.requires = dict(requires)
        self.kind = kind
        self._classes: Dict[str, type] = {}

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self.factories)

    def get(self, name: str) -> type:
        """The class ``name`` (its factory, and so its upstream library import, runs on the first call)."""
        if name not in self.factories:
            raise KeyError(f'unknown {self.kind} {name!r}; valid: {list(self.factories)}')
        if name not in self._classes:
            try:
                made = self.factories[name]()
            except ImportError as e:
                lib = self.requires[name]
                raise ImportError(f'{name} needs {lib} (pip install {lib}): {e}') from e
            for key, cls in ({name: made} if isinstance(made, type) else made).items():
                cls.__module__ = self.module
                cls.__qualname__ = key
                self._classes[key] = cls
        return self._classes[name]

    def register_builders(self, registry=MODELS):
        """Register, under each class name, a builder that makes the class on first use."""
        for name in self.factories:
            registry.register_module(name=name, module=self._builder(name))

    def _builder(self, name: str) -> Callable:

        def build(*args, **kwargs):
            return self.get(name)(*args, **kwargs)

        build.__name__ = build.__qualname__ = name
        build.__module__ = self.module  # where the class is defined, as for a class registered at import
        build.__doc__ = f'Build :class:`{name}` (see {self.module}).'
        return build


def module_getattr(module: str, *lazy: LazyUpstreamClasses) -> Callable[[str], type]:
    """A PEP 562 module ``__getattr__`` for ``module`` that resolves the classes of ``lazy``."""

    def __getattr__(name: str) -> type:
        for classes in lazy:
            if name in classes.factories:
                return classes.get(name)
        raise AttributeError(f'module {module!r} has no attribute {name!r}')

    return __getattr__
