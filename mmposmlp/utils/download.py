"""Pretrained weights named by URL: downloaded once into torch's hub cache, verified before they are kept.

The file goes to ``torch.hub.get_dir()/checkpoints/<file name>`` (where ``torch.hub.load_state_dict_from_url``
and mmengine's ``CheckpointLoader`` keep theirs), so one download serves every library. A download is kept
only when

* it arrived whole (the server's ``Content-Length``) within a bounded wait: every connect and read gives up
  after :func:`download_timeout` seconds without data (argument, else ``$MMPOSMLP_DOWNLOAD_TIMEOUT``, else
  60);
* its SHA-256 starts with the prefix its file name publishes (``-<hex>.``, ``torch.hub``'s ``check_hash``
  convention: OpenMMLab and DeiT files), where it publishes one;
* the caller's ``use`` accepted it (our loaders: every key and shape the model expects, after conversion).

Until then it is a temporary file next to the cache entry, removed on any failure, so nothing half-written
or unverified is ever found in the cache. Every failure is one sentence naming the URL, what was expected
and the manual route. A file already in the cache is used as it is (as ``torch.hub`` does). Under
``torch.distributed`` rank 0 downloads first and the other ranks then find the file in their cache.
"""
import hashlib
import http.client
import os
import os.path as osp
import tempfile
import urllib.error
import urllib.request
from typing import Callable, Optional, TypeVar

from .pretrained import describe_official, file_name, published_hash

T = TypeVar('T')

TIMEOUT_ENV = 'MMPOSMLP_DOWNLOAD_TIMEOUT'
DEFAULT_TIMEOUT = 60.0
_CHUNK = 1 << 20


class DownloadError(OSError):
    """A pretrained file could not be downloaded, or the download was not the file that was expected."""


def is_url(path) -> bool:
    """``http://`` or ``https://`` (the schemes downloaded here)."""
    return isinstance(path, str) and path.startswith(('http://', 'https://'))


def cache_dir() -> str:
    """torch's hub checkpoint cache, ``$TORCH_HOME/hub/checkpoints`` (``torch.hub.get_dir()``)."""
    from torch.hub import get_dir
    return osp.join(get_dir(), 'checkpoints')


def cached_path(url: str) -> str:
    """Where the download of ``url`` is kept: the cache, under the URL's file name
    (:func:`~mmposmlp.utils.pretrained.file_name`, as ``torch.hub`` names it)."""
    return osp.join(cache_dir(), file_name(url))


def download_timeout(timeout: Optional[float] = None) -> float:
    """Seconds a connect or read may wait for data: ``timeout``, else ``$MMPOSMLP_DOWNLOAD_TIMEOUT``, else 60."""
    if timeout is None:
        text = os.environ.get(TIMEOUT_ENV)
        if not text:
            return DEFAULT_TIMEOUT
        try:
            timeout = float(text)
        except ValueError:
            raise DownloadError(f'{TIMEOUT_ENV}={text!r} is not a number of seconds; set it to e.g. 60.') from None
    if not timeout > 0:
        raise DownloadError(f'the download timeout must be a positive number of seconds, got {timeout!r}.')
    return float(timeout)


def manual_route(url: str) -> str:
    """How to get ``url`` without this module: by hand into the cache, or anywhere and name the file."""
    where = cache_dir()
    return (f'download it by hand (`wget -P {where} {url}`), or save it anywhere and set the init_cfg '
            'checkpoint to that file')


def _what(url: str) -> str:
    what = describe_official(url)
    return f' ({what})' if what else ''


def _download_to(url: str, f, timeout: float) -> str:
    """Write ``url`` into the open binary file ``f``; the SHA-256 hex digest of what was written."""
    sha256 = hashlib.sha256()
    received = 0
    request = urllib.request.Request(url, headers={'User-Agent': 'mmposmlp'})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        length = response.headers.get('Content-Length')
        while True:
            chunk = response.read(_CHUNK)
            if not chunk:
                break
            f.write(chunk)
            sha256.update(chunk)
            received += len(chunk)
    if length is not None and received != int(length):
        raise DownloadError(f'the server sent {received} of the {int(length)} bytes it announced')
    return sha256.hexdigest()


def _reason(e: BaseException, timeout: float) -> str:
    reason = getattr(e, 'reason', None) if isinstance(e, urllib.error.URLError) else e
    if isinstance(reason, TimeoutError) or isinstance(e, TimeoutError):
        return f'no data within {timeout:g} s ({TIMEOUT_ENV} sets that limit)'
    if isinstance(e, urllib.error.HTTPError):
        return f'the server answered HTTP {e.code} {e.reason}'
    if isinstance(e, http.client.IncompleteRead):
        return f'the connection closed after {len(e.partial)} bytes, {e.expected} more were announced'
    return f'{type(reason).__name__}: {reason}'


def _fetch_verified(url: str, use: Callable[[str], T], timeout: float) -> T:
    dst = cached_path(url)
    os.makedirs(osp.dirname(dst), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(dst)}.', suffix='.partial', dir=osp.dirname(dst))
    try:
        try:
            with os.fdopen(fd, 'wb') as f:
                digest = _download_to(url, f, timeout)
        except (OSError, http.client.HTTPException, ValueError) as e:
            reason = str(e) if isinstance(e, DownloadError) else _reason(e, timeout)
            raise DownloadError(f'cannot download {url}{_what(url)}: {reason}; nothing was kept in '
                                f'{osp.dirname(dst)}; {manual_route(url)}.') from None
        expected = published_hash(url)
        if expected and not digest.startswith(expected):
            raise DownloadError(f'{url}{_what(url)} was downloaded but its SHA-256 is {digest[:16]}..., not the '
                                f'{expected}... its file name publishes (torch.hub convention), so it is not the '
                                f'published file and was not kept; check the URL, or {manual_route(url)}.')
        result = use(tmp)  # the caller's check (keys and shapes): raises when the file does not fit
        os.replace(tmp, dst)
        return result
    finally:
        if osp.exists(tmp):
            os.remove(tmp)


def fetch(url: str, use: Callable[[str], T], timeout: Optional[float] = None) -> T:
    """``use(path)`` on the cached download of ``url``, downloading and verifying it first when absent.

    ``use`` is the caller's reading and checking of the file; on a new download it runs on the temporary
    file, which is kept (renamed into the cache) only when ``use`` returns. Its exceptions propagate as
    they are, with nothing kept; download and hash failures raise :class:`DownloadError` (one sentence).
    """
    from mmengine.dist import barrier, get_dist_info
    timeout = download_timeout(timeout)
    rank, world_size = get_dist_info()
    if world_size > 1 and rank > 0:
        barrier()  # rank 0 downloads first
    try:
        if osp.isfile(cached_path(url)):
            return use(cached_path(url))
        return _fetch_verified(url, use, timeout)
    finally:
        if world_size > 1 and rank == 0:
            barrier()
