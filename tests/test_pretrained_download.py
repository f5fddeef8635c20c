"""Pretrained weights named by URL, tested without the internet: a local HTTP server on 127.0.0.1 serves
official-format files made from random weights (the official test vectors' small models); torch's hub cache is
a temporary ``TORCH_HOME``. A good file is downloaded once, kept, converted on load and used again without a
second request; a tampered file, a truncated download, a file of the wrong shapes, a missing file and a server
that never answers are each refused in one sentence naming the URL, and leave nothing in the cache.
"""
import hashlib
import http.server
import io
import json
import os
import os.path as osp
import re
import subprocess
import sys
import threading

import pytest
import torch

from mmposmlp.models.backbones.wave_mlp import WaveMLP
from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp
from mmposmlp.models.checkpoints import CheckpointMismatchError, PretrainedDownloadError
from mmposmlp.utils import download, pretrained
from toolcfg import TWO_ITERATIONS

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DATA = osp.join(ROOT, 'tests', 'data')


# ---------------------------------------------------------------------------------------------- the server
class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def do_GET(self):  # noqa: N802 (http.server's name)
        srv = self.server
        name = self.path.lstrip('/')
        srv.requests.append(name)
        mode = srv.modes.get(name, 'whole')
        if mode == 'never':
            srv.release.wait(60)  # accepts the request, never answers
            return
        body = srv.files.get(name)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(body if mode == 'whole' else body[:len(body) // 2])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local file server: ``files`` name -> bytes, ``modes`` name -> 'whole' | 'truncated' | 'never',
    ``requests`` the names asked for; ``url(name)``."""
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    srv.daemon_threads = True
    srv.files, srv.modes, srv.requests, srv.release = {}, {}, [], threading.Event()
    srv.url = lambda name: f'http://127.0.0.1:{srv.server_address[1]}/{name}'
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join(10)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """torch's hub cache in a temporary TORCH_HOME; returns its checkpoints directory."""
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    monkeypatch.delenv(download.TIMEOUT_ENV, raising=False)
    return download.cache_dir()


def _cache_files(hub):
    return sorted(os.listdir(hub)) if osp.isdir(hub) else []


def _one_sentence(msg):
    assert '\n' not in msg and msg.endswith('.'), msg
    assert not re.search(r'\.\s+[A-Z]', msg), msg  # no second sentence


# ---------------------------------------------------------------------------------------------- official files
def _vector(name, case=None):
    d = torch.load(osp.join(DATA, f'{name}.pt'), weights_only=True)
    return d if case is None else d['cases'][case]


def _wavemlp_official():
    """An official Wave-MLP file (timm CheckpointSaver layout) of the official test vector's small model and
    the WaveMLP kwargs that model is."""
    d = _vector('wavemlp_bn')
    a = json.loads(d['arch_json'])
    arch = dict(depths=a['layers'], embed_dims=a['embed_dims'], mlp_ratios=a['mlp_ratios'],
                norm_cfg=dict(type='BN'), stem_norm=a.get('ds_use_norm', True), phase_mode=a.get('mode', 'fc'))
    buf = io.BytesIO()
    torch.save({'state_dict': d['state_dict'], 'epoch': 299, 'arch': 'WaveMLP_T', 'metric': 80.6}, buf)
    return buf.getvalue(), arch, d['state_dict']


def _named_with_hash(stem, body, ext='.pth'):
    """``<stem>-<sha256[:8]><ext>``: a name that publishes its hash (OpenMMLab / DeiT / torch.hub)."""
    return f'{stem}-{hashlib.sha256(body).hexdigest()[:8]}{ext}'


def _wavemlp(arch, url, **kw):
    return WaveMLP(arch, out_indices=(3, ), init_cfg=dict(type='Pretrained', checkpoint=url), **kw)


def _expected_backbone(state):
    conv = convert_official_wavemlp(state)
    return {k[len('backbone.'):]: v for k, v in conv.items() if k.startswith('backbone.')}


# ---------------------------------------------------------------------------------------------- tests
def test_download_is_converted_on_load_kept_and_used_again_without_a_request(server, hub):
    body, arch, state = _wavemlp_official()
    server.files['WaveMLP_T.pth.tar'] = body
    url = server.url('WaveMLP_T.pth.tar')
    model = _wavemlp(arch, url)
    model.init_weights()
    got = model.state_dict()
    for k, v in _expected_backbone(state).items():
        assert torch.equal(got[k], v), k
    assert _cache_files(hub) == ['WaveMLP_T.pth.tar']
    with open(osp.join(hub, 'WaveMLP_T.pth.tar'), 'rb') as f:
        assert f.read() == body
    assert server.requests == ['WaveMLP_T.pth.tar']
    again = _wavemlp(arch, url)
    again.init_weights()  # from the cache: no second request
    assert server.requests == ['WaveMLP_T.pth.tar']
    assert all(torch.equal(again.state_dict()[k], v) for k, v in got.items())


def test_a_published_hash_is_checked_and_a_tampered_file_refused(server, hub):
    body, arch, _ = _wavemlp_official()
    good = _named_with_hash('wavemlp-toy_3rdparty_in1k', body)
    server.files[good] = body
    _wavemlp(arch, server.url(good)).init_weights()
    assert _cache_files(hub) == [good]
    # the same name, other bytes: one byte of a tensor changed (still a loadable checkpoint)
    tampered = good.replace('toy', 'tampered')
    server.files[tampered] = body[:-40] + bytes([body[-40] ^ 1]) + body[-39:]
    with pytest.raises(PretrainedDownloadError) as e:
        _wavemlp(arch, server.url(tampered)).init_weights()
    msg = str(e.value)
    _one_sentence(msg)
    assert server.url(tampered) in msg and 'SHA-256' in msg and good.rsplit('-', 1)[1][:8] in msg
    assert 'was not kept' in msg and f'wget -P {hub} {server.url(tampered)}' in msg
    assert _cache_files(hub) == [good]


def test_a_truncated_download_is_refused(server, hub):
    body, arch, _ = _wavemlp_official()
    server.files['WaveMLP_S.pth.tar'] = body
    server.modes['WaveMLP_S.pth.tar'] = 'truncated'
    url = server.url('WaveMLP_S.pth.tar')
    with pytest.raises(PretrainedDownloadError) as e:
        _wavemlp(arch, url).init_weights()
    msg = str(e.value)
    _one_sentence(msg)
    assert msg.startswith(f'cannot download {url} (the official Wave-MLP-S weights')
    assert str(len(body)) in msg and 'nothing was kept' in msg and 'wget' in msg
    assert _cache_files(hub) == []


def test_a_file_of_the_wrong_shapes_is_refused_and_not_kept(server, hub):
    body, arch, _ = _wavemlp_official()
    server.files['WaveMLP_M.pth.tar'] = body
    url = server.url('WaveMLP_M.pth.tar')
    wider = dict(arch, embed_dims=[d * 2 for d in arch['embed_dims']])
    with pytest.raises(CheckpointMismatchError) as e:
        _wavemlp(wider, url).init_weights()
    msg = str(e.value)
    _one_sentence(msg)
    assert url in msg and 'another shape' in msg and 'the download was not kept' in msg
    assert _cache_files(hub) == []


def test_a_server_that_never_answers_is_given_up_in_bounded_time(server, hub, monkeypatch):
    body, arch, _ = _wavemlp_official()
    server.files['WaveMLP_T_dw.pth.tar'] = body
    server.modes['WaveMLP_T_dw.pth.tar'] = 'never'
    url = server.url('WaveMLP_T_dw.pth.tar')
    monkeypatch.setenv(download.TIMEOUT_ENV, '0.5')
    with pytest.raises(PretrainedDownloadError) as e:
        _wavemlp(arch, url).init_weights()
    msg = str(e.value)
    _one_sentence(msg)
    assert url in msg and 'no data within 0.5 s' in msg and download.TIMEOUT_ENV in msg
    assert _cache_files(hub) == []
    # the limit as an argument
    with pytest.raises(download.DownloadError, match='no data within 0.2 s'):
        download.fetch(url, lambda path: pytest.fail('used a file that never came'), timeout=0.2)
    monkeypatch.setenv(download.TIMEOUT_ENV, 'soon')
    with pytest.raises(download.DownloadError, match="MMPOSMLP_DOWNLOAD_TIMEOUT='soon' is not a number"):
        download.download_timeout()


def test_a_missing_file_and_an_unsafe_file_are_refused(server, hub):
    _, arch, _ = _wavemlp_official()
    url = server.url('pvt_tiny.pth')
    with pytest.raises(PretrainedDownloadError) as e:
        _wavemlp(arch, url).init_weights()
    msg = str(e.value)
    _one_sentence(msg)
    assert url in msg and 'HTTP 404' in msg and 'PVT-tiny' in msg
    # a file that asks to run code is refused by the data-only loader, named by its URL, and not kept
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ('true', ))

    server.files['evil.pth'] = pickle.dumps({'state_dict': Evil()})
    from mmposmlp.utils.safe_load import UnsafeCheckpointError
    with pytest.raises(UnsafeCheckpointError) as e:
        _wavemlp(arch, server.url('evil.pth')).init_weights()
    assert server.url('evil.pth') in str(e.value) and '.partial' not in str(e.value)
    assert _cache_files(hub) == []


def test_the_official_name_of_a_file_without_url_loads_directly_and_its_absence_says_how(tmp_path, monkeypatch):
    """PosMLP-T is published on Google Drive only: the PosMLP-T configs name checkpoints/PosMLP_T.pth, the
    official file saved under its official name, converted on load."""
    from mmengine.config import Config

    from mmposmlp.engine.entry import UserError
    from mmposmlp.engine.preflight import check_pretrained
    from mmposmlp.models.backbones.posmlp import PosMLP
    from mmposmlp.models.converters.posmlp import convert_official_posmlp, official_arch_to_ours
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'posmlp', 'retinanet_posmlp-t_1x_coco.py'))
    assert cfg.model.backbone.init_cfg.checkpoint == 'checkpoints/PosMLP_T.pth'
    with pytest.raises(UserError) as e:
        check_pretrained(cfg)
    msg = str(e.value)
    _one_sentence(msg)
    assert 'checkpoints/PosMLP_T.pth does not exist' in msg and 'drive.google.com' in msg
    assert 'no direct download' in msg and 'save it as checkpoints/PosMLP_T.pth under that name' in msg
    assert 'converted on load, no converter step' in msg and 'model_converters' not in msg
    d = _vector('posmlp_gqpe')
    os.makedirs('checkpoints')
    torch.save({'state_dict_ema': d['state_dict'], 'epoch': 3}, 'checkpoints/PosMLP_T.pth')  # timm layout
    check_pretrained(cfg)
    kw = official_arch_to_ours(json.loads(d['arch_json']))
    model = PosMLP(**kw, out_indices=(3, ), init_cfg=dict(cfg.model.backbone.init_cfg))
    model.init_weights()
    ours = convert_official_posmlp(d['state_dict'])
    got = model.state_dict()
    assert all(torch.equal(got[k], v) for k, v in ours.items() if not k.startswith('head.'))


def test_shipped_configs_name_the_official_urls():
    """Every official file with a direct URL is named by URL in some config (none by a converted local copy);
    each URL a config names is in the table."""
    import glob
    texts = {p: open(p).read() for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)}
    named = set()
    for text in texts.values():
        named |= set(re.findall(r"'(https?://[^']+)'", text))
    table = {url for url, _ in pretrained.OFFICIAL.values() if url}
    assert table <= named, sorted(table - named)
    for name, (url, _) in pretrained.OFFICIAL.items():
        assert url is None or pretrained.file_name(url) == name
    for old in ('wavemlp-t', 'wavemlp-t-dw', 'wavemlp-s', 'wavemlp-m', 'pvt-peg-s-gap', 'pvt-peg-m-gap', 'pvt-t',
                'pvt-s', 'pvt-m', 'pvt-l', 'posmlp-t'):
        users = [p for p, t in texts.items() if any(f'checkpoints/{old}_in1k_mmposmlp.pth' in line
                                                    for line in t.splitlines() if not line.lstrip().startswith('#'))]
        assert not users, f'{old}: {users}'
    # hashes: exactly the OpenMMLab and DeiT names publish one
    hashed = {n: pretrained.published_hash(n) for n in pretrained.OFFICIAL if pretrained.published_hash(n)}
    assert hashed == {'twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth': 'ef23c132',
                      'twins-pcpvt-base_3rdparty_8xb128_in1k_20220126-f8c4b0d5.pth': 'f8c4b0d5',
                      'deit_tiny_patch16_224-a1311bcf.pth': 'a1311bcf', 'regnety_160-a5fe301d.pth': 'a5fe301d'}


def test_a_shipped_dense_config_pointed_at_the_server_loads_the_official_file(server, hub):
    """retinanet_wavemlp-t_fpn_1x_coco.py with its init_cfg URL replaced (cfg merge) by the local server's."""
    from mmengine.config import Config

    from mmposmlp.testing import build_model_from_cfg
    body, arch, state = _wavemlp_official()
    server.files['WaveMLP_T.pth.tar'] = body
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'wavemlp', 'retinanet_wavemlp-t_fpn_1x_coco.py'))
    assert cfg.model.backbone.init_cfg.checkpoint == pretrained.OFFICIAL['WaveMLP_T.pth.tar'][0]
    cfg.merge_from_dict({'model.backbone.init_cfg.checkpoint': server.url('WaveMLP_T.pth.tar'),
                         'model.backbone.norm_cfg': dict(type='BN'), 'model.backbone.phase_norm_cfg': dict(type='BN'),
                         'model.neck.in_channels': arch['embed_dims'][1:]})
    cfg.model.backbone.arch = arch
    model, _ = build_model_from_cfg(cfg, drop_pretrained=False)
    model.init_weights()
    got = model.backbone.state_dict()
    differ = [k for k, v in _expected_backbone(state).items() if not torch.equal(got[k], v)]
    assert not differ, differ
    assert _cache_files(hub) == ['WaveMLP_T.pth.tar']


@pytest.mark.slow
def test_training_runs_from_the_downloaded_file(server, hub, tmp_path, toy_data):
    """tools/train.py, pointed at the server with --cfg-options, downloads the file once and trains."""
    body, arch, state = _wavemlp_official()
    name = _named_with_hash('wavemlp-toy_3rdparty_in1k', body)
    server.files[name] = body
    os.makedirs(tmp_path / 'data', exist_ok=True)
    os.symlink(toy_data, tmp_path / 'data' / 'toy')
    cfg = tmp_path / 'wavemlp_toy.py'
    cfg.write_text(f"_base_ = ['{ROOT}/configs/wavemlp/wavemlp-t_8xb128_in1k.py', "
                   f"'{ROOT}/configs/_base_/toy/imagenet.py']\n"
                   'train_dataloader = _base_.toy_in1k_train_dataloader\n'
                   f"model = dict(backbone=dict(arch=dict(_delete_=True, **{arch!r})), "
                   f"head=dict(in_channels={arch['embed_dims'][-1]}))\n" + TWO_ITERATIONS)
    options = ['model.backbone.init_cfg.type=Pretrained', f'model.backbone.init_cfg.checkpoint={server.url(name)}']
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    res = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'train.py'), str(cfg), '--work-dir', 'work',
                          '--cfg-options', *options], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert 'Iter(train) [2/2]' in res.stdout + res.stderr
    assert server.requests == [name] and _cache_files(hub) == [name]



def test_model_zoo_lists_each_official_file_with_its_url_and_hash():
    """docs/model_zoo.md holds the generated section (tools/analysis/complexity.py writes it)."""
    with open(osp.join(ROOT, 'docs', 'model_zoo.md')) as f:
        zoo = f.read()
    section = pretrained.official_weights_markdown(osp.join(ROOT, 'configs'))
    assert section in zoo, 'docs/model_zoo.md: regenerate its "Pretrained weights" section'
    for name, (url, _) in pretrained.OFFICIAL.items():
        row = next(line for line in section.splitlines() if line.startswith(f'| `{name}` |'))
        assert (url or 'no direct download') in row
        assert (pretrained.published_hash(name) or 'none published') in row


def _backbone_of(config, **override):
    """The backbone kwargs of a shipped config (its init_cfg as written), with ``override``."""
    from mmengine.config import Config
    bb = Config.fromfile(osp.join(ROOT, 'configs', config)).model.backbone.to_dict()
    bb.pop('type')
    bb.update(override)
    return bb


@pytest.mark.parametrize('config', ['cpvt/paper_tables/retinanet_pvt-t_fpn_1x_coco.py',
                                    'cpvt/paper_tables/fpn_pvt-m_4xb4-80k_ade20k-512x512.py',
                                    'wavemlp/paper_tables/mask-rcnn_pvt-l_fpn_1x_coco.py'])
def test_pvt_v1_configs_load_the_official_classifier_file(config, server, hub):
    """The official PVT v1 classifier file (class token, head) through the config's own init_cfg."""
    from mmposmlp.models.backbones.pvt_peg import PVTPEG
    from mmposmlp.models.converters.pvt_peg import official_pvt_v1_arch_to_ours
    vector = _vector('pvt_v1_options')
    case = vector['cases']['cls']
    kw = official_pvt_v1_arch_to_ours(json.loads(vector['cases']['dense']['arch_json']), dense=True)
    body = io.BytesIO()
    torch.save(case['state_dict'], body)
    server.files['pvt_tiny.pth'] = body.getvalue()
    bb = _backbone_of(config, **kw)
    assert bb['init_cfg']['checkpoint'].startswith('https://github.com/whai362/PVT/releases/download/v2/pvt_')
    bb['init_cfg']['checkpoint'] = server.url('pvt_tiny.pth')
    model = PVTPEG(**bb)
    model.init_weights()
    assert torch.equal(model.state_dict()['patch_embeds.0.projection.weight'],
                       case['state_dict']['patch_embed1.proj.weight'])
    assert _cache_files(hub) == ['pvt_tiny.pth']


def test_pcpvt_configs_load_mmpretrains_file_with_its_published_hash(server, hub):
    """mmpretrain's Twins PCPVT file layout (ImageClassifier: backbone.* PCPVT keys, head.fc.*), served under a
    name publishing its hash, through retinanet_pvt-peg-s_fpn_1x_coco.py's own init_cfg."""
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS

    from mmposmlp.models.backbones.pvt_peg import PVTPEG
    arch = dict(depths=[1, 1, 2, 1], embed_dims=[8, 16, 16, 32], num_heads=[1, 2, 2, 4], mlp_ratios=[2, 2, 2, 2],
                sr_ratios=[4, 2, 2, 1])
    cfg = dict(type='ImageClassifier',
               backbone=dict(type='PCPVT', arch=dict(arch, patch_sizes=[4, 2, 2, 2], strides=[4, 2, 2, 2]),
                             out_indices=(3, ), qkv_bias=True, norm_cfg=dict(type='LN', eps=1e-6),
                             norm_after_stage=[False, False, False, True]),
               neck=dict(type='GlobalAveragePooling'), head=dict(type='LinearClsHead', num_classes=7, in_channels=32))
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        official = PRETRAIN_MODELS.build(cfg)
    buf = io.BytesIO()
    torch.save({'state_dict': official.state_dict(), 'meta': {'mmcls_version': '0.21.0'}}, buf)
    body = buf.getvalue()
    name = _named_with_hash('twins-pcpvt-toy_3rdparty_8xb128_in1k_20220126', body)
    server.files[name] = body
    bb = _backbone_of('cpvt/retinanet_pvt-peg-s_fpn_1x_coco.py', arch=arch)
    assert pretrained.published_hash(bb['init_cfg']['checkpoint']) == 'ef23c132'
    bb['init_cfg']['checkpoint'] = server.url(name)
    model = PVTPEG(**bb)
    model.init_weights()
    src = official.backbone.state_dict()
    assert torch.equal(model.state_dict()['patch_embeds.0.projection.weight'],
                       src['patch_embed1.projection.weight'] if 'patch_embed1.projection.weight' in src
                       else src['patch_embeds.0.projection.weight'])
    assert _cache_files(hub) == [name]


# ---------------------------------------------------------------------------------------------- metafiles
def _metafile_weights():
    """config stem -> Weights of our model index, as modelindex (mim, mmpretrain's model hub) reads them."""
    from modelindex.load_model_index import load
    index = load(osp.join(ROOT, 'model-index.yml'))
    index.build_models_with_collections()
    return {m.name: m.weights for m in index.models}


def test_metafile_weights_are_the_public_official_files_read_converted():
    """`mim download` takes a model's Weights URL (mim.commands.download reads modelindex's `weights`): the
    classification configs that are the official models name the official URL; each such URL is read converted
    (OFFICIAL_CLASSIFIERS); every other model names none."""
    from mmposmlp.models.official_weights import OFFICIAL_CLASSIFIERS
    weights = {k: v for k, v in _metafile_weights().items() if v}
    expected = {pretrained.OFFICIAL[n][0] for n in OFFICIAL_CLASSIFIERS}
    assert set(weights.values()) == expected
    assert weights['wavemlp-t_8xb128_in1k'] == pretrained.OFFICIAL['WaveMLP_T.pth.tar'][0]
    assert pretrained.published_hash(weights['pvt-peg-s-gap_8xb128_in1k']) == 'ef23c132'


def test_an_official_classifier_url_loads_converted_through_mmengine(server, hub):
    """mmengine's load_checkpoint (mmpretrain's get_model(pretrained=True), load_from) on an official Wave-MLP
    URL: downloaded once, converted to the ImageClassifier keys of our config, every key in place."""
    from mmengine.config import Config
    from mmengine.runner.checkpoint import CheckpointLoader

    from mmposmlp.models.official_weights import OFFICIAL_CLASSIFIERS, register_official_classifier
    from mmposmlp.testing import build_model_from_cfg
    body, arch, state = _wavemlp_official()
    server.files['WaveMLP_T.pth.tar'] = body
    url = server.url('WaveMLP_T.pth.tar')
    register_official_classifier(url, OFFICIAL_CLASSIFIERS['WaveMLP_T.pth.tar'])
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'wavemlp', 'wavemlp-t_8xb128_in1k.py'))
    cfg.model.backbone.arch = arch
    cfg.model.head.update(in_channels=arch['embed_dims'][-1], num_classes=json.loads(
        _vector('wavemlp_bn')['arch_json'])['num_classes'])
    model, _ = build_model_from_cfg(cfg)
    ckpt = CheckpointLoader.load_checkpoint(url)
    result = model.load_state_dict(ckpt['state_dict'], strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(model.state_dict()['head.fc.weight'], state['head.weight'])
    CheckpointLoader.load_checkpoint(url)
    assert server.requests == ['WaveMLP_T.pth.tar'] and _cache_files(hub) == ['WaveMLP_T.pth.tar']


def test_the_pcpvt_classifier_conversion_fills_the_config_model():
    """OFFICIAL_CLASSIFIERS' conversion of mmpretrain's Twins PCPVT file loads strictly into
    pvt-peg-s-gap_8xb128_in1k.py (small arch)."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS

    from mmposmlp.models.official_weights import OFFICIAL_CLASSIFIERS
    from mmposmlp.testing import build_model_from_cfg
    arch = dict(depths=[1, 1, 2, 1], embed_dims=[8, 16, 16, 32], num_heads=[1, 2, 2, 4], mlp_ratios=[2, 2, 2, 2],
                sr_ratios=[4, 2, 2, 1])
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        official = PRETRAIN_MODELS.build(dict(
            type='ImageClassifier', neck=dict(type='GlobalAveragePooling'),
            backbone=dict(type='PCPVT', arch=dict(arch, patch_sizes=[4, 2, 2, 2], strides=[4, 2, 2, 2]),
                          out_indices=(3, ), qkv_bias=True, norm_cfg=dict(type='LN', eps=1e-6),
                          norm_after_stage=[False, False, False, True]),
            head=dict(type='LinearClsHead', num_classes=7, in_channels=32)))
    convert = OFFICIAL_CLASSIFIERS['twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth']
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'cpvt', 'pvt-peg-s-gap_8xb128_in1k.py'))
    cfg.model.backbone.arch = arch
    cfg.model.head.update(in_channels=32, num_classes=7)
    model, _ = build_model_from_cfg(cfg)
    result = model.load_state_dict(convert(official.state_dict()), strict=True)
    assert not result.missing_keys and not result.unexpected_keys


def test_an_official_video_checkpoint_under_its_official_name_loads_converted(tmp_path):
    """The PosMLP-Video release's SlowFast file, saved as checkpoints/SSV1_S16.pyth (no direct URL), is read
    converted by mmengine's CheckpointLoader (load_from, tools/test.py CONFIG checkpoints/SSV1_S16.pyth):
    every weight of the Recognizer3D's backbone and head in place, nothing executed from the file."""
    from mmengine.runner.checkpoint import CheckpointLoader

    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    from mmposmlp.models.converters.posmlp_video import official_cfg_to_ours
    from mmposmlp.models.checkpoints import load_state_dict_checked
    from mmposmlp.models.official_weights import register_official_classifiers
    register_official_classifiers()  # what our Runner and tools do before loading
    vector = _vector('posmlp_video')
    os.makedirs(tmp_path / 'checkpoints')
    path = str(tmp_path / 'checkpoints' / 'SSV1_S16.pyth')
    torch.save({'model_state': vector['state_dict'], 'epoch': 60, 'cfg': 'TRAIN: ...'}, path)  # SlowFast layout
    state = CheckpointLoader.load_checkpoint(path)['state_dict']
    backbone = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    assert set(state) - {'backbone.' + k for k in backbone} == {'cls_head.fc_cls.weight', 'cls_head.fc_cls.bias'}
    model = PosMLPVideo(**official_cfg_to_ours(json.loads(vector['arch_json'])))
    load_state_dict_checked(model, backbone, source=path)  # every key in place, none left over
    assert torch.equal(state['cls_head.fc_cls.weight'], vector['state_dict']['head.weight'])


def test_mmengines_http_scheme_checks_the_hash_and_gives_up_in_bounded_time(server, hub, monkeypatch):
    """``CheckpointLoader`` with our loaders registered (``load_from``, stock Inferencers): the same download."""
    from mmengine.runner.checkpoint import CheckpointLoader

    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()
    body, _, state = _wavemlp_official()
    good = _named_with_hash('wavemlp-toy_3rdparty_in1k', body)
    server.files[good] = body
    loaded = CheckpointLoader.load_checkpoint(server.url(good), map_location='cpu')
    assert torch.equal(loaded['state_dict'][next(iter(state))], state[next(iter(state))])
    assert _cache_files(hub) == [good]
    tampered = good.replace('toy', 'tampered')
    server.files[tampered] = body[:-40] + bytes([body[-40] ^ 1]) + body[-39:]
    with pytest.raises(download.DownloadError, match='SHA-256'):
        CheckpointLoader.load_checkpoint(server.url(tampered), map_location='cpu')
    server.files['slow.pth'] = body
    server.modes['slow.pth'] = 'never'
    monkeypatch.setenv(download.TIMEOUT_ENV, '0.3')
    with pytest.raises(download.DownloadError, match='no data within 0.3 s'):
        CheckpointLoader.load_checkpoint(server.url('slow.pth'), map_location='cpu')
    assert _cache_files(hub) == [good]


# ---------------------------------------------------------------------------------------------- mmpretrain get_model
def _wavemlp_t_overrides():
    """get_model kwargs that make wavemlp-t_8xb128_in1k the official test vector's small model."""
    _, arch, _ = _wavemlp_official()
    classes = json.loads(_vector('wavemlp_bn')['arch_json'])['num_classes']
    return dict(backbone=dict(arch=dict(arch, _delete_=True)),
                head=dict(in_channels=arch['embed_dims'][-1], num_classes=classes))


def _assert_converted(model, state):
    """Every weight of ``model`` is the converted official ``state`` (and nothing else)."""
    from mmposmlp.models.official_weights import OFFICIAL_CLASSIFIERS
    want = OFFICIAL_CLASSIFIERS['WaveMLP_T.pth.tar'](state)
    got = {k: v for k, v in model.state_dict().items() if not k.startswith('data_preprocessor.')}
    assert set(got) == set(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize('how', ['pretrained=True (metafile Weights, url_mapping)', 'pretrained=URL'])
def test_mmpretrain_get_model_loads_the_official_file_converted(how, server, hub):
    """mmpretrain's ``get_model(<our name>, pretrained=...)``, with the loaders our Runner and tools register:
    the official Wave-MLP file (served on 127.0.0.1 under its official name) is downloaded once into the hub
    cache and converted; the model's weights are exactly the converted file."""
    from mmpretrain import get_model

    from mmposmlp.models.official_weights import register_official_classifiers
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()
    register_official_classifiers()
    body, _, state = _wavemlp_official()
    server.files['WaveMLP_T.pth.tar'] = body
    official = pretrained.OFFICIAL['WaveMLP_T.pth.tar'][0]
    if how.startswith('pretrained=True'):
        local = server.url('WaveMLP_T.pth.tar')
        kw = dict(pretrained=True, url_mapping=(re.escape(official.rpartition('/')[0]), local.rpartition('/')[0]))
    else:
        kw = dict(pretrained=server.url('WaveMLP_T.pth.tar'))
    model = get_model('wavemlp-t_8xb128_in1k', **kw, **_wavemlp_t_overrides())
    _assert_converted(model, state)
    assert server.requests == ['WaveMLP_T.pth.tar'] and _cache_files(hub) == ['WaveMLP_T.pth.tar']


# ---------------------------------------------------------------------------------------------- official layouts
@pytest.fixture
def official_loaders():
    from mmposmlp.models.official_weights import register_official_classifiers
    from mmposmlp.utils.safe_load import register_mmengine_loaders
    register_mmengine_loaders()
    register_official_classifiers()


def test_an_official_file_under_any_name_loads_converted(tmp_path, official_loaders):
    """A downloaded official file passed as a local path is recognised by its keys whatever it is called
    (the name mim gives it, or any other): CheckpointLoader and get_model read it converted."""
    from mmengine.runner.checkpoint import CheckpointLoader
    from mmpretrain import get_model

    from mmposmlp.models.official_weights import OFFICIAL_CLASSIFIERS, official_layout
    body, _, state = _wavemlp_official()
    for name in ('WaveMLP_T.pth.tar', 'my-wave-weights.pth'):
        path = tmp_path / name
        path.write_bytes(body)
        loaded = CheckpointLoader.load_checkpoint(str(path))['state_dict']
        want = OFFICIAL_CLASSIFIERS['WaveMLP_T.pth.tar'](state)
        assert set(loaded) == set(want) and all(torch.equal(loaded[k], want[k]) for k in want)
    assert 'Wave-MLP' in official_layout(state)
    _assert_converted(get_model('wavemlp-t_8xb128_in1k', pretrained=str(path), **_wavemlp_t_overrides()), state)


def test_a_renamed_official_video_file_loads_converted(tmp_path, official_loaders):
    from mmengine.runner.checkpoint import CheckpointLoader

    from mmposmlp.models.official_weights import OFFICIAL_BY_NAME
    vector = _vector('posmlp_video')
    path = str(tmp_path / 'ssv1-small.pyth')
    torch.save({'model_state': vector['state_dict'], 'epoch': 60}, path)  # the SlowFast layout
    loaded = CheckpointLoader.load_checkpoint(path)['state_dict']
    want = OFFICIAL_BY_NAME['SSV1_S16.pyth'](vector['state_dict'])
    assert set(loaded) == set(want) and all(torch.equal(loaded[k], want[k]) for k in want)


def test_a_file_under_an_official_name_that_is_neither_official_nor_ours_is_refused(tmp_path, official_loaders):
    from mmengine.runner.checkpoint import CheckpointLoader
    foreign = {'conv1.weight': torch.zeros(4, 3, 3, 3), 'fc.weight': torch.zeros(2, 4)}
    for name in ('WaveMLP_T.pth.tar', 'PosMLP_T.pth'):
        path = str(tmp_path / name)
        torch.save(foreign, path)
        with pytest.raises(CheckpointMismatchError, match='holds neither that file') as err:
            CheckpointLoader.load_checkpoint(path)
        _one_sentence(str(err.value))
        assert path in str(err.value)


def test_other_files_are_read_as_they_are(tmp_path, official_loaders):
    """Our own checkpoints (meta kept) and other libraries' files (e.g. a torchvision ResNet) are not
    converted, whatever they are called."""
    from mmengine.runner.checkpoint import CheckpointLoader
    ours = {'meta': {'epoch': 3}, 'state_dict': {'backbone.stem.weight': torch.ones(2), 'head.fc.bias': torch.ones(1)}}
    foreign = {'conv1.weight': torch.zeros(4, 3, 3, 3)}
    for name, ckpt in (('epoch_3.pth', ours), ('WaveMLP_T.pth.tar', ours), ('resnet.pth', foreign)):
        torch.save(ckpt, tmp_path / name)
        loaded = CheckpointLoader.load_checkpoint(str(tmp_path / name))
        assert set(loaded) == set(ckpt) and loaded.get('meta') == ckpt.get('meta')


def test_an_official_layout_that_does_not_convert_is_refused_in_one_sentence(tmp_path, official_loaders):
    from mmengine.runner.checkpoint import CheckpointLoader
    _, _, state = _wavemlp_official()
    path = str(tmp_path / 'wave.pth')
    torch.save({'state_dict': {**state, 'network.0.0.attn.extra_gate.weight': torch.zeros(2)}}, path)
    with pytest.raises(CheckpointMismatchError, match='looks like the official Wave-MLP') as err:
        CheckpointLoader.load_checkpoint(path)
    _one_sentence(str(err.value))


def test_layouts_are_recognised_by_the_releases_own_layers():
    """Each official layout is told apart by its release's own layers, not by generic names: a file of another
    model with `network.` / `blocks` keys (e.g. an official PoolFormer) is not taken for one."""
    from mmposmlp.models.official_weights import official_layout
    poolformer = {'network.0.0.token_mixer.pool.weight': torch.zeros(1), 'network.0.0.mlp.fc1.weight': torch.zeros(1),
                  'head.weight': torch.zeros(1)}
    assert official_layout(poolformer) is None
    assert 'PosMLP-Video' in official_layout(_vector('posmlp_video')['state_dict'])
    posmlp = next(iter(_vector('posmlp_options_gates')['cases'].values()))['state_dict']
    assert 'PosMLP (' in official_layout(posmlp)
    assert 'Wave-MLP' in official_layout(_wavemlp_official()[2])
    assert official_layout({'backbone.' + k: v for k, v in _wavemlp_official()[2].items()}) is None
