"""Download data sets once, verify their SHA-1 and keep them in a local cache.

Nothing in the book or the tests downloads: this is for readers who are online and want the real
corpora. A file enters the cache only whole and with the expected checksum.
"""
import hashlib
import http.client
import os
import re
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile

from .._checks import check_positive

DATA_URL = "http://d2l-data.s3-accelerate.amazonaws.com/"

#: name -> (url, sha1) of the data sets the course can download (d2l's files and checksums).
DATA_HUB = {
    "fra-eng": (DATA_URL + "fra-eng.zip", "94646ad1522d915e7b0f9296181140edcf86a4f5"),
}

_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_NETWORK_ERRORS = (urllib.error.URLError, TimeoutError, ConnectionError,
                   http.client.HTTPException)


def default_cache_dir():
    """``$D2LATTN_DATA`` if set, else ``~/.cache/d2lattn``."""
    return os.environ.get("D2LATTN_DATA") or os.path.join(
        os.path.expanduser("~"), ".cache", "d2lattn")


def _resolve(name_or_url, sha1, cache_dir):
    """``(url, sha1, cache path)`` of a ``DATA_HUB`` name or URL; ``sha1`` overrides the hub's."""
    if not isinstance(name_or_url, str):
        raise TypeError(f"name_or_url must be a str, got {type(name_or_url).__name__}")
    if name_or_url in DATA_HUB:
        url, hub_sha1 = DATA_HUB[name_or_url]
        sha1 = hub_sha1 if sha1 is None else sha1
    elif "://" in name_or_url:
        url = name_or_url
    else:
        raise ValueError(f"name_or_url must be a URL or one of {sorted(DATA_HUB)}, "
                         f"got {name_or_url!r}")
    if sha1 is not None and not (isinstance(sha1, str) and re.fullmatch(r"[0-9a-f]{40}", sha1)):
        raise ValueError(f"sha1 must be 40 lower-case hex digits or None, got {sha1!r}")
    fname = os.path.basename(urllib.parse.urlsplit(url).path)
    if not fname:
        raise ValueError(f"name_or_url must name a file, got {url!r}")
    cache_dir = default_cache_dir() if cache_dir is None else os.fspath(cache_dir)
    return url, sha1, os.path.join(cache_dir, fname)


def _sha1_of(path):
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch(url, out, timeout, path, sha1):
    """Stream ``url`` into the open binary file ``out``; return the SHA-1 of the bytes.

    ``path`` and ``sha1`` only serve the message that says where to put the file by hand.
    """
    digest, received = hashlib.sha1(), 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = getattr(response, "status", None)  # None for file:// URLs
            if status is not None and status != 200:
                raise RuntimeError(f"download of {url} failed: HTTP {status} {response.reason}")
            for chunk in iter(lambda: response.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
                received += len(chunk)
            expected = response.headers.get("Content-Length")
    except urllib.error.HTTPError as err:
        raise RuntimeError(f"download of {url} failed: HTTP {err.code} {err.reason}") from err
    except _NETWORK_ERRORS as err:
        raise RuntimeError(
            f"could not download {url} ({getattr(err, 'reason', err)}): this machine seems to be "
            f"offline or the server is unreachable. Download the file by hand and place it at "
            f"{path}" + (f" (sha1 {sha1})" if sha1 else "")) from err
    if expected is not None and int(expected) != received:
        raise RuntimeError(f"download of {url} is incomplete: got {received} of {expected} bytes")
    return digest.hexdigest()


def download(name_or_url, sha1=None, cache_dir=None, timeout=60.0):
    """Download a ``DATA_HUB`` entry (or a URL) into ``cache_dir`` and return the file's path.

    A cached file is reused when its SHA-1 matches (or when no ``sha1`` is known). Otherwise the
    file is downloaded to a temporary file beside it, checked (HTTP status, length, SHA-1) and
    only then moved into place, so the cache never holds a partial or corrupt file.
    ``cache_dir`` defaults to :func:`default_cache_dir`; ``timeout`` is in seconds per request.
    """
    url, sha1, path = _resolve(name_or_url, sha1, cache_dir)
    check_positive("timeout", timeout)
    if os.path.isfile(path) and (sha1 is None or _sha1_of(path) == sha1):
        return path
    cache_dir, fname = os.path.split(path)
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=fname + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            received = _fetch(url, out, timeout, path, sha1)
        if sha1 is not None and received != sha1:
            raise RuntimeError(f"sha1 mismatch for {url}: expected {sha1}, received {received}; "
                               "the file was not saved")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def download_extract(name_or_url, folder=None, sha1=None, cache_dir=None, timeout=60.0):
    """Download a zip or tar archive (see :func:`download`), unpack it beside the file.

    Returns ``cache_dir/folder`` if ``folder`` is given, else the archive's path without its
    suffix (``.../fra-eng.zip`` -> ``.../fra-eng``).
    """
    if folder is not None and not isinstance(folder, str):
        raise TypeError(f"folder must be a str or None, got {type(folder).__name__}")
    path = _resolve(name_or_url, sha1, cache_dir)[2]
    suffix = next((s for s in _ARCHIVE_SUFFIXES if path.endswith(s)), None)
    if suffix is None:
        raise ValueError(f"only {', '.join(_ARCHIVE_SUFFIXES)} archives can be extracted, "
                         f"got {os.path.basename(path)!r}")
    download(name_or_url, sha1, cache_dir, timeout)
    base_dir = os.path.dirname(path)
    if suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            archive.extractall(base_dir)  # zipfile drops absolute and '..' member paths
    else:
        # The 'data' filter refuses members that would land outside base_dir.
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        with tarfile.open(path) as archive:
            archive.extractall(base_dir, **safe)
    return os.path.join(base_dir, folder) if folder else path[:-len(suffix)]
