"""Where each ImageNet (or Kinetics) checkpoint that a config's ``init_cfg``/``load_from`` names comes from,
and the exact commands that make it: the official file (downloaded by URL or saved by hand, converted on
load), our converter's output, or the config that trains it.

One table, read by tools/train.py's pre-flight check, by the backbones' checkpoint loading (download
and the one-sentence errors) and by the model zoo (``docs/model_zoo.md``), so that a missing file is
reported in one sentence with the fix, under any library's tools.
"""
import os.path as osp
from typing import Optional
from urllib.parse import urlparse

POSMLP_T = ('https://drive.google.com/file/d/1wl0JzFqmdbhRAp2WEgl0dVFW5jnoS6bM/view?usp=share_link '
            '(Google Drive; Baidu: https://pan.baidu.com/s/1x611r3q1mWO3kv1F0OGhqg?pwd=8781, '
            'linked from https://github.com/Zhicaiwww/PosMLP)')
WAVEMLP = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/{}.pth.tar'
PCPVT = 'https://download.openmmlab.com/mmclassification/v0/twins/{}'

# checkpoint file name -> (what publishes it, commands that make checkpoints/<name>)
SOURCES = {
    'posmlp-t_in1k_mmposmlp.pth': (
        f'the official PosMLP-T weights PosMLP_T.pth, {POSMLP_T}',
        ['python tools/model_converters/posmlp2mmposmlp.py PosMLP_T.pth checkpoints/posmlp-t_in1k_mmposmlp.pth']),
    'pvt-peg-s-gap_in1k_mmposmlp.pth': (
        f"mmpretrain's copy of the official Twins PCPVT-S weights, "
        f"{PCPVT.format('twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth')}",
        [f"wget {PCPVT.format('twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth')}",
         'python tools/model_converters/pcpvt2mmposmlp.py twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth '
         'checkpoints/pvt-peg-s-gap_in1k_mmposmlp.pth']),
    'pvt-peg-m-gap_in1k_mmposmlp.pth': (
        f"mmpretrain's copy of the official Twins PCPVT-B weights, "
        f"{PCPVT.format('twins-pcpvt-base_3rdparty_8xb128_in1k_20220126-f8c4b0d5.pth')}",
        [f"wget {PCPVT.format('twins-pcpvt-base_3rdparty_8xb128_in1k_20220126-f8c4b0d5.pth')}",
         'python tools/model_converters/pcpvt2mmposmlp.py twins-pcpvt-base_3rdparty_8xb128_in1k_20220126-f8c4b0d5.pth '
         'checkpoints/pvt-peg-m-gap_in1k_mmposmlp.pth']),
    'posmlp-video-s_sthv1.pth': (
        'the official PosMLP-Video-S something-something v1 checkpoint (SSV1_S16.pyth, trained with '
        'https://github.com/zhouds1918/PosMLP_Video; not hosted there)',
        ['python tools/model_converters/posmlp_video2mmposmlp.py SSV1_S16.pyth checkpoints/posmlp-video-s_sthv1.pth']),
}
# distillation teachers (model.teacher.init_cfg): the official files, loaded as they are (timm keys)
SOURCES['regnety_160-a5fe301d.pth'] = (
    "DeiT's RegNetY-160 teacher weights, https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth "
    '(the DeiT README\'s --teacher-path)',
    ['wget -P checkpoints https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth'])
SOURCES['deit_tiny_patch16_224-a1311bcf.pth'] = (
    'the official DeiT-Ti weights, https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth '
    '(facebookresearch/deit README)',
    ['wget -P checkpoints https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth'])
for _arch, _official in (('t', 'WaveMLP_T'), ('t-dw', 'WaveMLP_T_dw'), ('s', 'WaveMLP_S'), ('m', 'WaveMLP_M')):
    SOURCES[f'wavemlp-{_arch}_in1k_mmposmlp.pth'] = (
        f'the official {_official} weights, {WAVEMLP.format(_official)}',
        [f'wget {WAVEMLP.format(_official)}',
         f'python tools/model_converters/wavemlp2mmposmlp.py {_official}.pth.tar '
         f'checkpoints/wavemlp-{_arch}_in1k_mmposmlp.pth'])
# no released weights: the ImageNet config that trains them (its last checkpoint, copied)
TRAINED_BY = {  # checkpoint name -> the config (and any --cfg-options) that trains it
    'posmlp-s_in1k_mmposmlp.pth': 'configs/posmlp/posmlp-s_8xb120_in1k.py',
    'posmlp-b_in1k_mmposmlp.pth': 'configs/posmlp/posmlp-b_8xb120_in1k.py',
    'pvt-peg-t-gap_in1k_mmposmlp.pth': 'configs/cpvt/pvt-peg-t-gap_8xb128_in1k.py',
    'pvt-peg-l-gap_in1k_mmposmlp.pth': 'configs/cpvt/pvt-peg-l-gap_8xb128_in1k.py',
    'wavemlp-b_in1k_mmposmlp.pth': 'configs/wavemlp/wavemlp-b_8xb128_in1k.py',
    'posmlp-video-s_8xb120_in1k.pth': 'configs/posmlp_video/posmlp-video-s_8xb120_in1k.py',
    'posmlp-video-b_8xb120_in1k.pth': 'configs/posmlp_video/posmlp-video-b_8xb120_in1k.py',
    'posmlp-video-l_8xb120_in1k.pth': 'configs/posmlp_video/posmlp-video-l_8xb120_in1k.py',
    # CPVT Table 5 "fixed (learned init)" starts its frozen PEG from a trained CPVT-Ti (PEG 0-1)
    'cpvt-ti-peg0-1_in1k_mmposmlp.pth': 'configs/cpvt/paper_tables/cpvt-ti-peg0-1_8xb128_in1k.py',
}
for _arch in ('s', 'm', 'b'):
    TRAINED_BY[f'wavemlp-{_arch}-dw_in1k_mmposmlp.pth'] = f'configs/wavemlp/wavemlp-{_arch}-dw_8xb128_in1k.py'
# PosMLP appendix Table 9's backbones: the Table 7 variants (paper_tables/*-half.py) trained on the full ImageNet-1k
for _variant in ('ape', 'no-bias', 'no-bias-ape'):
    TRAINED_BY[f'posmlp-t-{_variant}_in1k_mmposmlp.pth'] = (
        f'configs/posmlp/paper_tables/posmlp-t-{_variant}_8xb120_in1k-half.py '
        '--cfg-options train_dataloader.dataset.ann_file=meta/train.txt')


# written by the toy data generator (mmposmlp/datasets/toy.py) next to the toy dataset
GENERATED = {'toy_teacher_cpvt.pth': 'python tools/misc/make_toy_datasets.py --out data/toy --which imagenet'}

# CPVT Table 13's PVT-tiny rows (and Wave-MLP's PVT-Large comparison rows): the official PVT v1 weights, and the
# two classifiers nobody released
PVT_V1 = 'https://github.com/whai362/PVT/releases/download/v2/{}'
for _arch, _official in (('t', 'tiny'), ('s', 'small'), ('m', 'medium'), ('l', 'large')):
    SOURCES[f'pvt-{_arch}_in1k_mmposmlp.pth'] = (
        f"the official PVT-{_official} (PVT v1) weights, {PVT_V1.format(f'pvt_{_official}.pth')}",
        [f"wget {PVT_V1.format(f'pvt_{_official}.pth')}",
         f'python tools/model_converters/pcpvt2mmposmlp.py pvt_{_official}.pth '
         f'checkpoints/pvt-{_arch}_in1k_mmposmlp.pth'])
TRAINED_BY['pvt-t-gap_in1k_mmposmlp.pth'] = 'configs/cpvt/paper_tables/pvt-t-gap_8xb128_in1k.py'
TRAINED_BY['pvt-peg-t-cls_in1k_mmposmlp.pth'] = 'configs/cpvt/paper_tables/pvt-peg-t-cls_8xb128_in1k.py'


# ---------------------------------------------------------------------------------------------- official files
#: The official weights files the configs name, by their official file name: (direct URL or None, what the
#: file is and where it is published). A config names a direct URL in its ``init_cfg`` (downloaded once into
#: torch's hub cache, verified and converted on load: :mod:`mmposmlp.utils.download`); a file without one
#: is saved by hand as ``checkpoints/<official name>`` and converted on load as well. The SHA-256 prefix is
#: the ``-<hex>`` suffix of the name where the publisher puts one (:func:`published_hash`); no other file
#: has a published hash.
OFFICIAL = {}
for _arch, _official in (('T', 'WaveMLP_T'), ('T* (depthwise phase)', 'WaveMLP_T_dw'), ('S', 'WaveMLP_S'),
                         ('M', 'WaveMLP_M')):
    OFFICIAL[f'{_official}.pth.tar'] = (WAVEMLP.format(_official), f'the official Wave-MLP-{_arch} weights '
                                        '(github.com/huawei-noah/CV-Backbones release `wavemlp`)')
for _arch, _file in (('S', 'twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth'),
                     ('B', 'twins-pcpvt-base_3rdparty_8xb128_in1k_20220126-f8c4b0d5.pth')):
    OFFICIAL[_file] = (PCPVT.format(_file), f"the official Twins PCPVT-{_arch} weights as mmpretrain hosts them "
                       '(download.openmmlab.com)')
for _official in ('tiny', 'small', 'medium', 'large'):
    OFFICIAL[f'pvt_{_official}.pth'] = (PVT_V1.format(f'pvt_{_official}.pth'), f'the official PVT-{_official} '
                                        '(PVT v1) weights (github.com/whai362/PVT release `v2`)')
OFFICIAL['deit_tiny_patch16_224-a1311bcf.pth'] = (
    'https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth',
    'the official DeiT-Ti weights (facebookresearch/deit README)')
OFFICIAL['regnety_160-a5fe301d.pth'] = (
    'https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth',
    "DeiT's RegNetY-160 teacher weights (the DeiT README's --teacher-path)")
OFFICIAL['PosMLP_T.pth'] = (None, f'the official PosMLP-T weights, published only on {POSMLP_T}')
OFFICIAL['SSV1_S16.pyth'] = (None, 'the official PosMLP-Video-S something-something v1 checkpoint (a SlowFast '
                             'file trained with https://github.com/zhouds1918/PosMLP_Video, which hosts no weights)')


def file_name(name_or_url: str) -> str:
    """The file name of a URL (the last part of its path, without query: what ``torch.hub`` names its
    download, the key of :data:`OFFICIAL`), or of a local path."""
    return osp.basename(urlparse(name_or_url).path if '://' in name_or_url else name_or_url)


def published_hash(name_or_url: str) -> Optional[str]:
    """The SHA-256 prefix a file name publishes (``-<hex>.`` before the extension), as ``torch.hub``'s
    ``check_hash`` reads it (``torch.hub.HASH_REGEX``); None when the name has none."""
    from torch.hub import HASH_REGEX
    m = HASH_REGEX.search(file_name(name_or_url))
    return m.group(1) if m and m.group(1) else None


def describe_official(name_or_url: str) -> Optional[str]:
    """What the official file ``name_or_url`` is (:data:`OFFICIAL`), or None for a file not in the table."""
    entry = OFFICIAL.get(file_name(name_or_url))
    return entry[1] if entry else None


def _official_route(path: str) -> str:
    """The fix for a missing official file saved under its official name at ``path``."""
    name = osp.basename(path)
    url, what = OFFICIAL[name]
    if url is None:
        return (f'it is {what}: there is no direct download, so get {name} from there yourself and save it '
                f'as {path} under that name (it is converted on load, no converter step)')
    return (f'it is {what}: `wget -P {osp.dirname(path) or "."} {url}`, or name the URL itself as the init_cfg '
            'checkpoint (downloaded once into torch\'s hub cache and verified)')


def how_to_make(path: str) -> str:
    """The fix for a missing pretrained checkpoint ``path``: where it comes from and the exact commands."""
    name = osp.basename(path)
    if name in OFFICIAL:
        return _official_route(path)
    if name in GENERATED:
        return f'the toy data generator writes it with the toy ImageNet: `{GENERATED[name]}`'
    if name in SOURCES:
        source, commands = SOURCES[name]
        commands = [c.replace(f'checkpoints/{name}', path) for c in commands]
        how = 'downloaded' if all(c.startswith('wget ') for c in commands) else 'converted'
        return f'it is {how} from {source}: ' + '; '.join(f'`{c}`' for c in commands)
    if name in TRAINED_BY:
        cfg = TRAINED_BY[name]
        stem = osp.splitext(osp.basename(cfg.split()[0]))[0]
        return (f'no official weights were released for it: train `python tools/train.py {cfg}` on ImageNet and '
                f'copy its last checkpoint there (`cp "$(cat work_dirs/{stem}/last_checkpoint)" {path}`)')
    return 'download or convert it first (see the family README and tools/model_converters/)'


def missing_pretrained_message(path: str, key: str) -> str:
    """One sentence for a pretrained checkpoint ``path`` (set at config ``key``) that does not exist."""
    unset = key.rpartition('.')[0] if key.endswith('.checkpoint') else key
    if '.teacher.' in key:  # a distillation teacher cannot start from random weights
        return f'teacher checkpoint {path} does not exist ({key}): {how_to_make(path)}.'
    return (f'pretrained checkpoint {path} does not exist ({key}): {how_to_make(path)}; '
            f'or train from random initialisation with --cfg-options {unset}=None.')


# ---------------------------------------------------------------------------------------------- model zoo
def configs_naming(name: str, config_root: str = 'configs') -> list:
    """The configs under ``config_root`` whose text names the official file ``name`` (its URL, or
    ``checkpoints/<name>``), relative to the root's parent."""
    import glob
    url = OFFICIAL[name][0]
    wanted = [url] if url else []
    wanted.append(f'checkpoints/{name}')
    found = []
    for path in sorted(glob.glob(osp.join(config_root, '**', '*.py'), recursive=True)):
        with open(path) as f:
            text = f.read()
        if any(w in text for w in wanted):
            found.append(osp.relpath(path, osp.dirname(osp.abspath(config_root))))
    return found


def official_weights_markdown(config_root: str = 'configs') -> str:
    """The model zoo's section on the official weights files (docs/model_zoo.md, written by
    tools/analysis/complexity.py): each file, its URL, the SHA-256 prefix its name publishes, the configs."""
    out = ['## Pretrained weights', '',
           'The official files the configs start from. A URL in a config\'s `init_cfg` is downloaded once into '
           'torch\'s hub cache (`$TORCH_HOME/hub/checkpoints`, default `~/.cache/torch/hub/checkpoints`) and kept '
           'there only when it arrived whole, its SHA-256 starts with the prefix its name publishes (where one is '
           'published: the `-<hex>` suffix, torch.hub\'s convention) and its keys and shapes fit the config\'s '
           'model; it is converted on load. `MMPOSMLP_DOWNLOAD_TIMEOUT` (seconds, default 60) bounds every wait '
           'for data. A file without a direct URL is saved by hand as `checkpoints/<file>`, under its official '
           'name, and is converted on load too. Without network access, download the file elsewhere and copy '
           'it into the cache directory, or set the `init_cfg` checkpoint to its path.', '',
           'The whole classifier files that are the metafiles\' `Weights` (`mim download mmposmlp --config '
           '<model> --dest <dir>` fetches them; mim checks no hash) are read converted wherever mmengine\'s '
           '`CheckpointLoader` reads them once `mmposmlp.Runner` or our tools registered the loaders '
           '(`mmposmlp.models.official_weights.register_official_classifiers()` in your own code): `load_from`, '
           '`tools/test.py CONFIG FILE` and mmpretrain\'s `get_model(<model>, pretrained=True)` (or a URL or a '
           'path). A URL ending in an official file name is downloaded and verified as above from any host (a '
           'mirror, `get_model`\'s `url_mapping`); a local file is recognised by its keys whatever it is called '
           '(PosMLP, PosMLP-Video and Wave-MLP layouts; the Twins files, in mmpretrain\'s own layout, by their '
           'names), and a file under an official name that holds neither that release\'s weights nor converted '
           'ones is refused.', '',
           '| file | URL | SHA-256 prefix | what | configs |', '|---|---|---|---|---|']
    for name, (url, what) in OFFICIAL.items():
        configs = configs_naming(name, config_root)
        out.append('| {} | {} | {} | {} | {} |'.format(
            f'`{name}`', url or 'none (no direct download)', published_hash(name) or 'none published',
            what.replace('|', '/'), ', '.join(f'`{c}`' for c in configs) or '-'))
    return '\n'.join(out) + '\n'
