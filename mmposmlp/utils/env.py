"""Dependency checks with one clear sentence each (issue 2, item 1)."""
import importlib.util
from importlib import metadata

MIN_TORCH = (2, 0)
MMCV_RANGE = ((2, 0, 0), (2, 2, 0))  # mmdet 3.3 / mmseg 1.2 / mmaction2 1.2 assert mmcv < 2.2.0


def _version_tuple(v: str) -> tuple:
    out = []
    for part in v.split('+')[0].split('.')[:3]:
        digits = ''
        for c in part:  # leading digits only: '0rc4' -> 0
            if not c.isdigit():
                break
            digits += c
        out.append(int(digits) if digits else 0)
    return tuple(out)


class DependencyError(ImportError):
    """Raised when the environment cannot run mmposmlp; the message names the fix."""


def check_dependencies() -> None:
    """Fail at ``import mmposmlp`` when torch/mmengine/mmcv are missing or incompatible."""
    for name, fix in (('torch', 'pip install torch==2.13.0 (see README "Install")'),
                      ('mmengine', 'pip install mmengine==0.10.7')):
        if importlib.util.find_spec(name) is None:
            raise DependencyError(f'mmposmlp needs {name}, which is not installed: run `{fix}` '
                                  'or `make install`.')
    import torch
    if _version_tuple(torch.__version__) < MIN_TORCH:
        raise DependencyError(f'mmposmlp needs torch>=2.0 but found torch {torch.__version__}: '
                              'install torch 2.13.0 (`make install`).')
    try:
        mmcv_version = metadata.version('mmcv')
    except metadata.PackageNotFoundError:
        mmcv_version = None
        try:
            mmcv_version = metadata.version('mmcv-lite')
        except metadata.PackageNotFoundError:
            pass
    if mmcv_version is None:
        raise DependencyError('mmposmlp needs mmcv 2.1.0 (its layers come from mmcv.cnn), which is not '
                              'installed: run `make install` or `mim install mmcv==2.1.0`.')
    if not MMCV_RANGE[0] <= _version_tuple(mmcv_version) < MMCV_RANGE[1]:
        raise DependencyError(f'mmcv {mmcv_version} is installed but mmdet 3.3/mmseg 1.2/mmaction2 1.2 '
                              'require 2.0.0 <= mmcv < 2.2.0: install mmcv==2.1.0 (`make install` builds it '
                              'for this torch).')


def check_mmcv_ops() -> None:
    """Detection/segmentation models need mmcv's compiled ops (RoIAlign, NMS)."""
    try:
        importlib.import_module('mmcv._ext')
    except ImportError as e:
        raise DependencyError(
            f'mmcv was installed without its compiled ops ({e}); mmdet and mmseg models need them: '
            'rebuild it with `MMCV_WITH_OPS=1 pip install --no-build-isolation --no-cache-dir mmcv==2.1.0` '
            '(or run `make install`).') from e
