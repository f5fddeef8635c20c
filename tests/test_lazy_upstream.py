"""The one mechanism behind backbones that subclass a downstream library's class on first use
(mmposmlp/models/backbones/lazy_upstream.py, used by swin_peg.py and imlp_variants.py)."""
import pickle
import sys
import types

import pytest
from mmengine.registry import Registry

from mmposmlp.models.backbones.lazy_upstream import LazyUpstreamClasses, module_getattr


@pytest.fixture
def fake_module():
    """A throw-away module owning two lazy classes made together by one factory, and one whose
    upstream library is absent."""
    mod = types.ModuleType('mmposmlp_fake_lazy')
    calls = []

    def make_pair():
        calls.append('pair')
        return {'Alpha': type('Alpha', (), {}), 'Beta': type('Beta', (), {'value': 2})}

    def make_missing():
        import mmposmlp_no_such_library  # noqa: F401
        return type('Gamma', (), {})

    mod.LAZY = LazyUpstreamClasses(mod.__name__, {'Alpha': make_pair, 'Beta': make_pair, 'Gamma': make_missing},
                                   requires={'Alpha': 'liba', 'Beta': 'liba', 'Gamma': 'libgamma'}, kind='fake class')
    mod.__getattr__ = module_getattr(mod.__name__, mod.LAZY)
    sys.modules[mod.__name__] = mod
    yield mod, calls
    del sys.modules[mod.__name__]


def test_factory_runs_once_on_first_use_and_names_its_classes_in_the_owning_module(fake_module):
    mod, calls = fake_module
    assert calls == []
    alpha = mod.Alpha
    assert mod.Beta.value == 2 and mod.Alpha is alpha and calls == ['pair']  # Beta came with Alpha
    assert (alpha.__module__, alpha.__qualname__) == ('mmposmlp_fake_lazy', 'Alpha')
    assert pickle.loads(pickle.dumps(alpha)) is alpha and isinstance(pickle.loads(pickle.dumps(alpha())), alpha)


def test_registered_builder_makes_the_class_only_when_built(fake_module):
    mod, calls = fake_module
    registry = Registry('fake')
    mod.LAZY.register_builders(registry)
    assert calls == [] and set(registry.module_dict) == {'Alpha', 'Beta', 'Gamma'}
    assert registry.module_dict['Beta'].__name__ == 'Beta'
    assert isinstance(registry.build(dict(type='Beta')), mod.Beta) and calls == ['pair']


def test_missing_upstream_library_unknown_name_and_unnamed_package_fail_in_one_sentence(fake_module):
    mod, _ = fake_module
    with pytest.raises(ImportError, match=r'^Gamma needs libgamma \(pip install libgamma\): No module named'):
        mod.Gamma
    with pytest.raises(KeyError, match=r"unknown fake class 'Delta'; valid: \['Alpha', 'Beta', 'Gamma'\]"):
        mod.LAZY.get('Delta')
    with pytest.raises(AttributeError, match="module 'mmposmlp_fake_lazy' has no attribute 'Delta'"):
        mod.Delta
    with pytest.raises(ValueError, match=r"name the package that \['B'\] need in requires"):
        LazyUpstreamClasses('m', {'A': type, 'B': type}, requires={'A': 'a'})


def test_both_users_share_the_mechanism():
    from mmposmlp.models.backbones import imlp_variants, swin_peg
    from mmposmlp.registry import MODELS
    for mod, names in ((swin_peg, ('SwinPEG', )), (imlp_variants, imlp_variants.ADAPTERS)):
        lazy = [v for v in vars(mod).values() if isinstance(v, LazyUpstreamClasses)]
        assert lazy and set(names) <= {n for c in lazy for n in c.names}
        for name in names:
            assert MODELS.get(name).__qualname__ == name
