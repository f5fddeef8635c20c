"""``mim download`` for our metafiles, run for real against the published URLs, offline.

The real ``mim download mmposmlp --config ... --dest D`` runs inside a private network and mount namespace
(``unshare --net --mount``, root only): ``/etc/hosts`` there maps the weights' hosts (github.com,
download.openmmlab.com) to 127.0.0.1, where an HTTPS server with a throwaway certificate authority
(``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE``) serves official-format files made from random weights under the
metafiles' exact URL paths. Nothing outside the namespace is reachable or changed. The test checks that each
file arrives byte for byte with its config, and what is verified where: mim itself checks no hash (mim's
``download_from_file`` is called without ``hash_prefix``), so the published SHA-256 prefix is checked when our
loaders read the URL (a file whose hash differs is refused; the Wave-MLP file, whose name publishes no hash,
is read converted). Skipped, with the reason, where root, ``unshare``, ``ip``, ``openssl`` or ``mim`` is missing.
"""
import hashlib
import io
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DATA = osp.join(ROOT, 'tests', 'data')
WAVE_URL = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/WaveMLP_T.pth.tar'
TWINS_URL = ('https://download.openmmlab.com/mmclassification/v0/twins/'
             'twins-pcpvt-small_3rdparty_8xb128_in1k_20220126-ef23c132.pth')
CONFIGS = {'wavemlp-t_8xb128_in1k': WAVE_URL, 'pvt-peg-s-gap_8xb128_in1k': TWINS_URL}


def _missing() -> str:
    """Why the namespace cannot be made here ('' when it can)."""
    if os.geteuid() != 0:
        return 'needs root for unshare --net --mount'
    for tool in ('unshare', 'ip', 'openssl'):
        if shutil.which(tool) is None:
            return f'{tool} is not installed'
    if shutil.which('mim', path=osp.dirname(sys.executable)) is None:
        return f'mim is not installed next to {sys.executable}'
    if subprocess.run(['unshare', '--net', '--mount', 'true'], capture_output=True).returncode != 0:
        return 'unshare --net --mount is not permitted here (no CAP_SYS_ADMIN)'
    return ''


def _run(cmd, **kw):
    subprocess.run(cmd, check=True, capture_output=True, **kw)


def _certificates(d: str) -> tuple:
    """A throwaway CA and a server certificate it signs for the weights' hosts: (ca.pem, cert, key)."""
    ca_key, ca, key, csr, cert = (osp.join(d, n) for n in ('ca.key', 'ca.pem', 'srv.key', 'srv.csr', 'srv.pem'))
    _run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', ca_key, '-out', ca, '-days', '1',
          '-subj', '/CN=throwaway test CA'])
    _run(['openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', '/CN=github.com'])
    ext = osp.join(d, 'san.ext')
    with open(ext, 'w') as f:
        f.write('subjectAltName=DNS:github.com,DNS:download.openmmlab.com\n')
    _run(['openssl', 'x509', '-req', '-in', csr, '-CA', ca, '-CAkey', ca_key, '-CAcreateserial', '-out', cert,
          '-days', '1', '-extfile', ext])
    return ca, cert, key


def _official_files() -> dict:
    """URL -> bytes: the official Wave-MLP layout (the test vector's small model, timm CheckpointSaver) and a
    Twins file in mmpretrain's layout, both from random weights."""
    d = torch.load(osp.join(DATA, 'wavemlp_bn.pt'), weights_only=True)
    wave = io.BytesIO()
    torch.save({'state_dict': d['state_dict'], 'epoch': 299}, wave)
    twins = io.BytesIO()
    torch.save({'state_dict': {'backbone.patch_embeds.0.projection.weight': torch.randn(8, 3, 4, 4),
                               'head.fc.weight': torch.randn(5, 8)}}, twins)
    return {WAVE_URL: wave.getvalue(), TWINS_URL: twins.getvalue()}


SERVER = '''
import http.server, os, ssl, sys
root, cert, key, ready = sys.argv[1:5]
os.chdir(root)
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(('127.0.0.1', 443), Quiet)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(ready, 'w').close()
srv.serve_forever()
'''

# our loaders on the same URLs, inside the namespace: the Wave-MLP file read converted, the Twins file refused
# for its hash (it is not the published file)
LOADERS = '''
import json, sys
from mmengine.runner.checkpoint import CheckpointLoader
from mmposmlp.models.official_weights import register_official_classifiers
register_official_classifiers()
wave = CheckpointLoader.load_checkpoint(sys.argv[1])['state_dict']
try:
    CheckpointLoader.load_checkpoint(sys.argv[2])
    refused = ''
except Exception as e:
    refused = str(e)
with open(sys.argv[3], 'w') as f:
    json.dump(dict(wave_keys=sorted(wave), refused=refused), f)
'''


@pytest.mark.skipif(bool(_missing()), reason=_missing() or 'runs')
def test_mim_download_fetches_the_metafile_weights(tmp_path):
    ca, cert, key = _certificates(str(tmp_path))
    www, dest = tmp_path / 'www', tmp_path / 'dest'
    files = _official_files()
    for url, body in files.items():
        path = www / url.split('://', 1)[1].split('/', 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    (tmp_path / 'hosts').write_text('127.0.0.1 localhost\n127.0.0.1 github.com download.openmmlab.com\n')
    (tmp_path / 'server.py').write_text(SERVER)
    (tmp_path / 'loaders.py').write_text(LOADERS)
    bindir = osp.dirname(sys.executable)
    script = textwrap.dedent(f'''
        set -e
        ip link set lo up
        mount --bind {tmp_path}/hosts /etc/hosts
        {sys.executable} {tmp_path}/server.py {www} {cert} {key} {tmp_path}/ready &
        for i in $(seq 100); do [ -e {tmp_path}/ready ] && break; sleep 0.1; done
        {bindir}/mim download mmposmlp --config {' '.join(CONFIGS)} --dest {dest}
        {sys.executable} {tmp_path}/loaders.py {WAVE_URL} {TWINS_URL} {tmp_path}/loaders.json
        kill %1
    ''')
    env = {k: v for k, v in os.environ.items() if 'proxy' not in k.lower()}
    env.update(REQUESTS_CA_BUNDLE=ca, SSL_CERT_FILE=ca, TORCH_HOME=str(tmp_path / 'torch_home'),
               PYTHONPATH=ROOT, MMPOSMLP_DOWNLOAD_TIMEOUT='20')
    done = subprocess.run(['unshare', '--net', '--mount', '--fork', 'bash', '-c', script], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for config, url in CONFIGS.items():
        got = (dest / url.rpartition('/')[2]).read_bytes()
        assert got == files[url]  # arrived whole, byte for byte
        assert (dest / f'{config}.py').is_file()  # mim writes the config next to it
    # mim checks no hash: the Twins file arrived although it is not the published one ...
    assert not hashlib.sha256(files[TWINS_URL]).hexdigest().startswith('ef23c132')
    result = json.loads((tmp_path / 'loaders.json').read_text())
    # ... our loaders refuse it for its published SHA-256 prefix, and read the Wave-MLP URL converted
    assert 'SHA-256' in result['refused'] and 'ef23c132' in result['refused'] and TWINS_URL in result['refused']
    assert result['wave_keys'] and all(k.startswith(('backbone.', 'head.fc.')) for k in result['wave_keys'])
