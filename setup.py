import os.path as osp

from setuptools import find_packages, setup


def get_version():
    ns = {}
    with open(osp.join(osp.dirname(__file__), 'mmposmlp', 'version.py')) as f:
        exec(f.read(), ns)
    return ns['__version__']


setup(
    name='mmposmlp',
    version=get_version(),
    description='PosMLP, PosMLP-Video, Wave-MLP, PEG/CPVT and IMLP for OpenMMLab '
                '(mmdet, mmseg, mmaction2, mmpretrain)',
    long_description=open('README.md', encoding='utf-8').read() if osp.exists('README.md') else '',
    long_description_content_type='text/markdown',
    packages=find_packages(include=['mmposmlp', 'mmposmlp.*']),
    python_requires='>=3.8',
    install_requires=['mmengine>=0.10.6,<1.0.0', 'numpy', 'Pillow', 'opencv-python-headless'],
    extras_require={
        'det': ['mmdet==3.3.0'], 'seg': ['mmsegmentation==1.2.2'],
        'action': ['mmaction2==1.2.0', 'av'], 'cls': ['mmpretrain==1.2.0'],
        'tests': ['pytest', 'pytest-timeout'],
    },
    license='Apache-2.0',
    zip_safe=False,
)
