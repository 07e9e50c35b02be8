"""The downloader against local servers only: file:// URLs and an HTTP server on 127.0.0.1."""
import hashlib
import http.server
import io
import os
import socket
import tarfile
import threading
import zipfile

import pytest

from d2lattn.data.download import DATA_HUB, default_cache_dir, download, download_extract
from d2lattn.data.nmt import load_fra_eng

FRA_TXT = "Go.\tVa !\nI lost.\tJ'ai perdu.\nHe's calm.\tIl est calme.\n"


def sha1(data):
    return hashlib.sha1(data).hexdigest()


def zip_bytes(members):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def tar_gz_bytes(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


FRA_ZIP = zip_bytes({"fra-eng/fra.txt": FRA_TXT})


class LocalServer:
    """An HTTP server on 127.0.0.1 (free port) serving ``routes``: path -> (status, body, length).

    ``length`` is the Content-Length sent (None: the body's). ``requests`` lists the paths asked.
    """

    def __init__(self):
        self.routes, self.requests = {}, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 5  # seconds: a stuck client cannot keep a handler thread alive

            def do_GET(self):
                server.requests.append(self.path)
                status, body, length = server.routes.get(self.path, (404, b"not here", None))
                self.send_response(status)
                if status != 204:
                    self.send_header("Content-Length", str(len(body) if length is None
                                                           else length))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def serve(self, name, body, status=200, length=None):
        self.routes["/" + name] = (status, body, length)
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server():
    local = LocalServer()
    try:
        yield local
    finally:
        local.close()


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_data_hub_holds_d2l_fra_eng():
    assert DATA_HUB["fra-eng"] == ("http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
                                   "94646ad1522d915e7b0f9296181140edcf86a4f5")


# --- download ---------------------------------------------------------------------------------

def test_download_file_url_then_cached(tmp_path, cache):
    source = tmp_path / "data.bin"
    source.write_bytes(b"hello")
    path = download(source.as_uri(), sha1(b"hello"), cache_dir=cache)
    assert path == str(cache / "data.bin") and open(path, "rb").read() == b"hello"
    source.unlink()  # the second call must not need the source any more
    assert download(source.as_uri(), sha1(b"hello"), cache_dir=cache) == path
    assert os.listdir(cache) == ["data.bin"]


def test_download_http_is_cached(server, cache):
    url = server.serve("fra-eng.zip", FRA_ZIP)
    for _ in range(3):
        path = download(url, sha1(FRA_ZIP), cache_dir=cache, timeout=5)
        assert open(path, "rb").read() == FRA_ZIP
    assert server.requests == ["/fra-eng.zip"]


def test_download_without_sha1_reuses_any_cached_file(server, cache):
    url = server.serve("notes.txt", b"v1")
    download(url, cache_dir=cache, timeout=5)
    server.serve("notes.txt", b"v2")
    path = download(url, cache_dir=cache, timeout=5)
    assert open(path, "rb").read() == b"v1" and len(server.requests) == 1


def test_download_checksum_mismatch_leaves_nothing(server, cache):
    url = server.serve("fra-eng.zip", b"an error page")
    expected = sha1(FRA_ZIP)
    with pytest.raises(RuntimeError, match=f"sha1 mismatch for {url}: expected {expected}, "
                                           f"received {sha1(b'an error page')}"):
        download(url, expected, cache_dir=cache, timeout=5)
    assert os.listdir(cache) == []


def test_download_replaces_a_corrupt_cached_file(server, cache):
    cache.mkdir()
    (cache / "fra-eng.zip").write_bytes(b"half a zi")
    url = server.serve("fra-eng.zip", FRA_ZIP)
    path = download(url, sha1(FRA_ZIP), cache_dir=cache, timeout=5)
    assert open(path, "rb").read() == FRA_ZIP and len(server.requests) == 1
    assert os.listdir(cache) == ["fra-eng.zip"]  # no temporary file left behind


def test_download_corrupt_cached_file_survives_a_failed_download_unreturned(server, cache):
    cache.mkdir()
    (cache / "fra-eng.zip").write_bytes(b"half a zi")
    url = server.serve("fra-eng.zip", b"still wrong")
    for _ in range(2):  # the bad file is never handed out: each call tries again
        with pytest.raises(RuntimeError, match="sha1 mismatch"):
            download(url, sha1(FRA_ZIP), cache_dir=cache, timeout=5)
    assert len(server.requests) == 2 and os.listdir(cache) == ["fra-eng.zip"]


@pytest.mark.parametrize("status, message", [(404, "HTTP 404 Not Found"),
                                             (500, "HTTP 500 Internal Server Error"),
                                             (204, "HTTP 204 No Content")])
def test_download_http_errors(server, cache, status, message):
    url = server.serve("fra-eng.zip", b"" if status == 204 else b"oops", status=status)
    with pytest.raises(RuntimeError, match=f"download of {url} failed: {message}"):
        download(url, cache_dir=cache, timeout=5)
    assert os.listdir(cache) == []


def test_download_incomplete_body(server, cache):
    url = server.serve("big.bin", b"0123456789", length=100)  # the server hangs up early
    with pytest.raises(RuntimeError, match="is incomplete: got 10 of 100 bytes"):
        download(url, cache_dir=cache, timeout=5)
    assert os.listdir(cache) == []


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_download_offline_says_where_to_put_the_file(cache):
    url = f"http://127.0.0.1:{closed_port()}/fra-eng.zip"
    digest = sha1(FRA_ZIP)
    with pytest.raises(RuntimeError, match=(
            f"could not download {url} .*refused.*: this machine seems to be offline or the "
            f"server is unreachable. Download the file by hand and place it at "
            f"{cache / 'fra-eng.zip'} \\(sha1 {digest}\\)")):
        download(url, digest, cache_dir=cache, timeout=5)
    assert os.listdir(cache) == []


def test_download_by_hand_then_offline_works(cache, monkeypatch):
    """What the offline message asks for: a file placed by hand is used without the network."""
    monkeypatch.setitem(DATA_HUB, "fra-eng",
                        (f"http://127.0.0.1:{closed_port()}/fra-eng.zip", sha1(FRA_ZIP)))
    cache.mkdir()
    (cache / "fra-eng.zip").write_bytes(FRA_ZIP)
    assert download("fra-eng", cache_dir=cache) == str(cache / "fra-eng.zip")


def test_download_times_out_on_a_silent_server(cache):
    with socket.socket() as sock:  # accepts connections (backlog) but never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/fra-eng.zip"
        with pytest.raises(RuntimeError, match="timed out.*seems to be offline"):
            download(url, cache_dir=cache, timeout=0.3)
    assert os.listdir(cache) == []


def test_download_default_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("D2LATTN_DATA", raising=False)
    assert default_cache_dir() == str(tmp_path / "home" / ".cache" / "d2lattn")
    monkeypatch.setenv("D2LATTN_DATA", str(tmp_path / "data"))
    source = tmp_path / "a.txt"
    source.write_bytes(b"a")
    assert download(source.as_uri()) == str(tmp_path / "data" / "a.txt")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"name_or_url": "wikitext-2"}, ValueError,
     r"name_or_url must be a URL or one of \['fra-eng'\], got 'wikitext-2'"),
    ({"name_or_url": None}, TypeError, "name_or_url must be a str, got NoneType"),
    ({"name_or_url": "fra-eng", "sha1": "ABC"}, ValueError,
     "sha1 must be 40 lower-case hex digits or None, got 'ABC'"),
    ({"name_or_url": "http://127.0.0.1/"}, ValueError,
     "name_or_url must name a file, got 'http://127.0.0.1/'"),
    ({"name_or_url": "fra-eng", "timeout": 0}, ValueError,
     "timeout must be a positive finite number, got 0"),
])
def test_download_bad_arguments(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        download(cache_dir=tmp_path, **kwargs)
    assert os.listdir(tmp_path) == []


# --- download_extract and load_fra_eng --------------------------------------------------------

def test_download_extract_zip(server, cache):
    url = server.serve("fra-eng.zip", FRA_ZIP)
    folder = download_extract(url, sha1=sha1(FRA_ZIP), cache_dir=cache, timeout=5)
    assert folder == str(cache / "fra-eng")
    assert open(os.path.join(folder, "fra.txt"), encoding="utf-8").read() == FRA_TXT
    assert download_extract(url, "fra-eng", cache_dir=cache, timeout=5) == folder
    assert len(server.requests) == 1


@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz"])
def test_download_extract_tar(tmp_path, cache, suffix):
    source = tmp_path / ("wiki" + suffix)
    source.write_bytes(tar_gz_bytes({"wiki/train.txt": "a b c"}))
    folder = download_extract(source.as_uri(), cache_dir=cache)
    assert folder == str(cache / "wiki")
    assert open(os.path.join(folder, "train.txt")).read() == "a b c"


def test_download_extract_refuses_tar_members_outside_the_cache(tmp_path, cache):
    source = tmp_path / "evil.tar.gz"
    source.write_bytes(tar_gz_bytes({"../escaped.txt": "gotcha"}))
    with pytest.raises(tarfile.FilterError):
        download_extract(source.as_uri(), cache_dir=cache)
    assert not (tmp_path / "escaped.txt").exists()


def test_download_extract_rejects_other_files(tmp_path, cache):
    source = tmp_path / "fra.txt"
    source.write_text(FRA_TXT)
    with pytest.raises(ValueError, match=r"only .*\.zip archives can be extracted, got 'fra.txt'"):
        download_extract(source.as_uri(), cache_dir=cache)
    assert not cache.exists()  # refused before downloading
    with pytest.raises(TypeError, match="folder must be a str or None, got int"):
        download_extract("fra-eng", folder=1, cache_dir=cache)


def test_load_fra_eng_end_to_end(server, cache, monkeypatch):
    url = server.serve("fra-eng.zip", FRA_ZIP)
    monkeypatch.setitem(DATA_HUB, "fra-eng", (url, sha1(FRA_ZIP)))
    source, target = load_fra_eng(cache_dir=cache)
    assert source == [['go', '.'], ['i', 'lost', '.'], ["he's", 'calm', '.']]
    assert target == [['va', '!'], ["j'ai", 'perdu', '.'], ['il', 'est', 'calme', '.']]
    assert load_fra_eng(num_examples=2, cache_dir=cache) == (source[:2], target[:2])
    assert server.requests == ["/fra-eng.zip"]


def test_load_fra_eng_with_a_wrong_file_on_the_server(server, cache, monkeypatch):
    monkeypatch.setitem(DATA_HUB, "fra-eng", (server.serve("fra-eng.zip", b"<html>gone</html>"),
                                              sha1(FRA_ZIP)))
    with pytest.raises(RuntimeError, match="sha1 mismatch"):
        load_fra_eng(cache_dir=cache)


def test_the_download_module_is_not_hidden_by_the_function():
    import importlib

    import d2lattn.data
    assert d2lattn.data.download is importlib.import_module("d2lattn.data.download")
