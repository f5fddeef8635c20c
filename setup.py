"""mmposmlp's package. Like mmdet/mmpretrain's setup.py (``add_mim_extension``), the wheel carries the
configs, tools (train/test, model converters, analysis) and ``model-index.yml`` in ``mmposmlp/.mim/``,
where ``mim`` and mmengine's ``mmposmlp::`` config prefix look for them. A clone reaches the same
files through the symlinks in ``mmposmlp/.mim/`` (editable installs). The wheel also ships
``mmposmlp-config.pth`` (see mmposmlp/utils/import_hooks.py): it lets mmengine resolve
``_base_ = 'mmposmlp::...'`` under any library's tools, before mmposmlp itself is imported."""
import os
import os.path as osp
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = osp.dirname(osp.abspath(__file__))
MIM_FILES = ('configs', 'tools', 'model-index.yml')
# the package's home page: `mim list` prints it (the Home-page field of the installed METADATA, from `url`).
# No public repository of mmposmlp exists yet: this address is a placeholder to replace on publication.
HOMEPAGE = 'https://github.com/mmposmlp/mmposmlp'
PROJECT_URLS = {
    'PosMLP (official)': 'https://github.com/Zhicaiwww/PosMLP',
    'PosMLP-Video (official)': 'https://github.com/zhouds1918/PosMLP_Video',
    'Wave-MLP (official)': 'https://github.com/huawei-noah/Efficient-AI-Backbones',
    'CPVT / Twins (official)': 'https://github.com/Meituan-AutoML/Twins',
}
CONFIG_PTH = 'mmposmlp-config.pth'
# one line, run by site.py at interpreter start: loads mmposmlp/utils/import_hooks.py by path (importing
# neither mmposmlp nor torch) and asks it to add `mmposmlp` to mmengine's config packages on mmengine's import
CONFIG_PTH_LINE = (
    "import importlib.util as _u, os.path as _p; _s = _u.find_spec('mmposmlp'); "
    "_f = _p.join(list(_s.submodule_search_locations)[0], 'utils', 'import_hooks.py') "
    "if _s and _s.submodule_search_locations else ''; "
    "_m = _u.module_from_spec(_u.spec_from_file_location('mmposmlp_import_hooks', _f)) if _p.isfile(_f) else None; "
    "_m and (_m.__spec__.loader.exec_module(_m), _m.install_config_package_hook())\n")


def get_version():
    ns = {}
    with open(osp.join(ROOT, 'mmposmlp', 'version.py')) as f:
        exec(f.read(), ns)
    return ns['__version__']


def _ignore(_dir, names):
    return [n for n in names if n == '__pycache__' or n.endswith(('.pyc', '.pyo'))]


class BuildPyWithMim(build_py):
    """build_py + the ``.mim`` files (real copies, not symlinks) + the config-prefix ``.pth``."""

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            return  # editable installs read the clone itself (mmposmlp/.mim holds symlinks)
        mim = osp.join(self.build_lib, 'mmposmlp', '.mim')
        if osp.islink(mim) or osp.isfile(mim):
            os.remove(mim)
        elif osp.isdir(mim):
            shutil.rmtree(mim)
        os.makedirs(mim)
        for name in MIM_FILES:
            src = osp.join(ROOT, name)
            if osp.isdir(src):
                shutil.copytree(src, osp.join(mim, name), ignore=_ignore)
            elif osp.isfile(src):
                shutil.copyfile(src, osp.join(mim, name))
            else:
                raise FileNotFoundError(f'{src} is missing: build the package from a complete clone.')
        with open(osp.join(self.build_lib, CONFIG_PTH), 'w') as f:
            f.write(CONFIG_PTH_LINE)


setup(
    name='mmposmlp',
    version=get_version(),
    description='PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab '
                '(mmdet, mmseg, mmaction2, mmpretrain)',
    long_description=open(osp.join(ROOT, 'README.md'), encoding='utf-8').read()
    if osp.exists(osp.join(ROOT, 'README.md')) else '',
    long_description_content_type='text/markdown',
    url=HOMEPAGE,
    project_urls=PROJECT_URLS,
    packages=find_packages(include=['mmposmlp', 'mmposmlp.*']),
    cmdclass={'build_py': BuildPyWithMim},
    python_requires='>=3.8',
    install_requires=['mmengine>=0.10.6,<1.0.0', 'numpy', 'Pillow', 'opencv-python-headless'],
    extras_require={
        'det': ['mmdet==3.3.0'], 'seg': ['mmsegmentation==1.2.2'],
        'action': ['mmaction2==1.2.0', 'av'], 'cls': ['mmpretrain==1.2.0'],
        'mim': ['openmim'],
        'tests': ['pytest', 'pytest-timeout'],
    },
    license='Apache-2.0',
    zip_safe=False,
)
