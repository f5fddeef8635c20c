"""Unprefixed types under a dict that mmengine scoped to mmposmlp (``_base_ = 'mmposmlp::...'``) resolve in the
library that runs the config, and a mmengine without the table that tells which library that is is refused."""
import pytest
from mmengine.registry import DefaultScope


def test_an_unprefixed_library_type_under_our_scope_builds_in_the_running_library():
    from mmpretrain.registry import TRANSFORMS
    import mmposmlp.registry  # noqa: F401
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        transform = TRANSFORMS.build(dict(_scope_='mmposmlp', type='PackInputs'))
    assert type(transform).__module__.startswith('mmpretrain.')
    # the same name under another running library is that library's (or missing), never mmpretrain's
    from mmaction.registry import TRANSFORMS as MMACTION_TRANSFORMS
    with DefaultScope.overwrite_default_scope('mmaction'), pytest.raises(KeyError):
        MMACTION_TRANSFORMS.build(dict(_scope_='mmposmlp', type='PackInputs'))


def test_without_mmengines_scope_table_the_fallback_is_refused_in_one_sentence(monkeypatch):
    from mmposmlp.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmpretrain'), DefaultScope.overwrite_default_scope('mmposmlp'):
        current = DefaultScope.get_current_instance()
        with monkeypatch.context() as m:
            m.setattr(DefaultScope, 'get_current_instance', classmethod(lambda cls: current))
            m.delattr(DefaultScope, '_instance_dict')
            with pytest.raises(RuntimeError) as e:
                MODELS.get('ImageClassifier')
    msg = str(e.value)
    assert 'no longer keeps DefaultScope._instance_dict' in msg and "type='mmpretrain.ImageClassifier'" in msg
    assert msg.count('. ') == 0 and msg.endswith('.')
