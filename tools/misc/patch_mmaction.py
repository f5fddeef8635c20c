"""Work around mmaction2 1.2.0's broken PyPI release (open-mmlab/mmaction2#2714).

The wheel's ``mmaction/models/localizers/__init__.py`` imports ``.drn.drn`` but the ``drn``
subpackage is missing, so ``import mmaction.models`` fails. We add a tiny ``drn`` package
whose ``DRN`` raises a clear error when built; every other model is untouched. Idempotent;
a no-op when mmaction2 is absent or already complete.
"""
import importlib.util
import os
import sys

STUB = '''# Added by mmposmlp tools/misc/patch_mmaction.py: mmaction2 1.2.0's wheel lacks this
# package (open-mmlab/mmaction2#2714). DRN itself is unavailable; everything else works.
from mmaction.registry import MODELS


@MODELS.register_module()
class DRN:  # noqa: D101
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            'DRN is missing from the mmaction2 1.2.0 PyPI release (open-mmlab/mmaction2#2714); '
            'install mmaction2 from source to use it.')
'''


def main() -> int:
    spec = importlib.util.find_spec('mmaction')
    if spec is None or not spec.submodule_search_locations:
        print('[patch_mmaction] mmaction2 not installed, nothing to do')
        return 0
    root = list(spec.submodule_search_locations)[0]
    loc = os.path.join(root, 'models', 'localizers')
    drn = os.path.join(loc, 'drn')
    init = os.path.join(loc, '__init__.py')
    if not os.path.exists(init):
        return 0
    if 'drn' not in open(init).read():
        return 0
    if os.path.exists(os.path.join(drn, 'drn.py')):
        return 0
    os.makedirs(drn, exist_ok=True)
    with open(os.path.join(drn, '__init__.py'), 'w') as f:
        f.write('')
    with open(os.path.join(drn, 'drn.py'), 'w') as f:
        f.write(STUB)
    print(f'[patch_mmaction] added stub {drn} (open-mmlab/mmaction2#2714)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
