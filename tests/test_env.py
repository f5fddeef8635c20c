"""Dependency checks: each broken environment gives one sentence that names the fix."""
import sys

import pytest

from mmposmlp.utils import env


def test_current_environment_passes():
    env.check_dependencies()
    env.check_mmcv_ops()


def test_mmcv_too_new(monkeypatch):
    real = env.metadata.version
    monkeypatch.setattr(env.metadata, 'version', lambda name: '2.2.0' if name == 'mmcv' else real(name))
    with pytest.raises(env.DependencyError, match=r'mmcv 2\.2\.0 is installed .*install mmcv==2\.1\.0'):
        env.check_dependencies()


def test_mmcv_missing(monkeypatch):
    def version(name):
        raise env.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(env.metadata, 'version', version)
    with pytest.raises(env.DependencyError, match='mmcv 2.1.0 .* not installed'):
        env.check_dependencies()


def test_old_torch(monkeypatch):
    import torch
    monkeypatch.setattr(torch, '__version__', '1.13.1')
    with pytest.raises(env.DependencyError, match=r'torch>=2\.0 .*1\.13\.1'):
        env.check_dependencies()


def test_mmcv_without_ops(monkeypatch):
    monkeypatch.setitem(sys.modules, 'mmcv._ext', None)  # import of the compiled ops fails
    with pytest.raises(env.DependencyError, match='without its compiled ops.*MMCV_WITH_OPS=1'):
        env.check_mmcv_ops()


def test_version_parsing():
    assert env._version_tuple('2.13.0+cu130') == (2, 13, 0)
    assert env._version_tuple('2.0.0rc4') == (2, 0, 0)
