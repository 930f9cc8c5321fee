"""The per-name upload (twine, its confirmation through `release.publish.index`) and the PEP 825
variant upload (`release.publish.variant_upload`) against the same hostile servers on 127.0.0.1
(issue 45): a redirect never carries credentials to another host, a listing without hashes is
settled by fetching and hashing, a dripping answer ends at its deadline, and a redirect to
`ftp://` is never followed. A recorder on 127.0.0.2 counts what reaches "another host".
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from release.errors import PublishError
from release.publish import index, variant_upload
from release.publish.upload import Candidate, Credentials, Uploader
from tests.integration.publish_support import (
    HostileIndex,
    drip,
    drip_json,
    files_without_hashes,
    json_page,
    make_wheel,
    routes,
    send,
)

pytestmark = pytest.mark.integration
SECRET = "secret-password-45"
PROJECT = "demo-engine"


class Recorder:
    """An HTTP server on 127.0.0.2 that answers 200 to anything and keeps each request's head."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.2", 0))
        self._listener.listen(8)
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.settimeout(10)
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                self.heads.append(head.partition(b"\r\n\r\n")[0])
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    @property
    def url(self) -> str:
        return f"http://127.0.0.2:{self.port}/"

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


def wheel(tmp_path: Path) -> tuple[Path, str]:
    path = make_wheel(tmp_path / "dist", PROJECT, "1.0", "3.12")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def uploader(server: HostileIndex, **kwargs: object) -> Uploader:
    return Uploader(
        repository=f"http://127.0.0.1:{server.port}/", index_url=server.simple,
        credentials=Credentials.from_env({"TWINE_USERNAME": "maintainer", "TWINE_PASSWORD": SECRET}),
        tries=1, backoff=0.0, log=lambda _text: None, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def twine_path(server: HostileIndex, path: Path, sha: str, **timeouts: float) -> None:
    """The per-name publish of one wheel as `release.publish.preflight.publish` runs it: the
    listing, a name listed without a sha256 judged by its bytes, else twine and its confirmation."""
    candidate = Candidate(step="cp312-demo", variant="demo", project=PROJECT, path=path, sha256=sha)
    run = uploader(server, **timeouts)
    status, note = run.judge(run.listing([PROJECT])[PROJECT], candidate)
    if status == "skip":
        return
    if status != "upload":
        msg = f"{status}: {note}"
        raise PublishError(msg)
    outcome = run.upload(candidate)
    if outcome.status != "uploaded":
        msg = f"{outcome.status}: {outcome.note}"
        raise PublishError(msg)


def variant_path(server: HostileIndex, path: Path, sha: str, **timeouts: float) -> None:
    """The variant upload of the same wheel (as one file of a variant set)."""
    variant_upload.publish_variant_set(
        [variant_upload.VariantFile(path, sha, "wheel")], project=PROJECT, version="1.0",
        repository=f"http://127.0.0.1:{server.port}/", index_url=server.simple,
        username="maintainer", password=SECRET, log=lambda _text: None, **timeouts,
    )  # fmt: skip


PATHS: dict[str, Callable[..., None]] = {"twine": twine_path, "variant": variant_path}


def redirect_to(url: str, code: str) -> Callable[[socket.socket, str], None]:
    """An index whose upload URL redirects (`code`) to `url`; its listing is empty."""

    def behave(conn: socket.socket, path: str, request: bytes) -> None:
        if request.startswith(b"POST"):
            send(code, {"Location": url}, b"")(conn, path)
        else:
            json_page()(conn, path)

    behave.wants_request = True  # type: ignore[attr-defined]
    return behave


@pytest.mark.parametrize("how", sorted(PATHS))
@pytest.mark.parametrize(
    "code", ["301 Moved Permanently", "302 Found", "303 See Other", "307 Temporary Redirect"]
)
def test_an_upload_redirected_to_another_host_never_carries_credentials(
    tmp_path: Path, recorder: Recorder, how: str, code: str
) -> None:
    path, sha = wheel(tmp_path)
    with HostileIndex(redirect_to(recorder.url, code)) as server, pytest.raises(PublishError) as info:
        PATHS[how](server, path, sha, upload_timeout=20.0, index_timeout=5.0)
    assert SECRET not in str(info.value)
    assert not [h for h in recorder.heads if b"authorization" in h.lower()], recorder.heads
    if how == "variant":  # ours: refused, one line, the other host never asked
        assert "\n" not in str(info.value) and recorder.heads == []


@pytest.mark.parametrize("how", sorted(PATHS))
def test_a_listing_without_hashes_is_settled_by_the_bytes_served(tmp_path: Path, how: str) -> None:
    path, sha = wheel(tmp_path)
    other = b"PK\x05\x06" + bytes(18)  # another file under the same name
    lying = HostileIndex(files_without_hashes({path.name: other}))
    with lying, pytest.raises(PublishError, match="sha256"):
        PATHS[how](lying, path, sha, upload_timeout=20.0, index_timeout=5.0)
    with HostileIndex(files_without_hashes({path.name: path.read_bytes()})) as server:
        PATHS[how](server, path, sha, upload_timeout=20.0, index_timeout=5.0)  # the same bytes: there
        assert server.connections >= 2  # the listing, then the file fetched and hashed


@pytest.mark.parametrize("how", sorted(PATHS))
def test_a_dripping_listing_ends_at_the_index_timeout(tmp_path: Path, how: str) -> None:
    path, sha = wheel(tmp_path)
    started = time.monotonic()
    with HostileIndex(drip_json(every=0.3, limit=60)) as server, pytest.raises(PublishError) as info:
        PATHS[how](server, path, sha, upload_timeout=20.0, index_timeout=2.0)
    assert time.monotonic() - started < 15
    assert "within 2s" in str(info.value)


@pytest.mark.parametrize("how", sorted(PATHS))
def test_a_hash_fetch_redirected_to_ftp_ends_at_once(tmp_path: Path, how: str) -> None:
    path, sha = wheel(tmp_path)
    with socket.socket() as ftp:  # a port that accepts and never answers: the FTP handler would wait
        ftp.bind(("127.0.0.1", 0))
        ftp.listen(1)
        target = f"ftp://127.0.0.1:{ftp.getsockname()[1]}/{path.name}"
        page = files_without_hashes({path.name: b""})
        server_routes = routes(page, files=send("302 Found", {"Location": target}, b""))
        started = time.monotonic()
        with HostileIndex(server_routes) as server, pytest.raises(PublishError):
            PATHS[how](server, path, sha, upload_timeout=20.0, index_timeout=8.0)
        assert time.monotonic() - started < 6


def test_a_variant_upload_whose_answer_drips_ends_at_the_upload_timeout(tmp_path: Path) -> None:
    path, sha = wheel(tmp_path)

    def behave(conn: socket.socket, where: str, request: bytes) -> None:
        if request.startswith(b"POST"):
            drip(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", every=0.3, limit=60)(conn, where)
        else:
            json_page()(conn, where)

    behave.wants_request = True  # type: ignore[attr-defined]
    started = time.monotonic()
    with HostileIndex(behave) as server, pytest.raises(PublishError) as info:
        variant_path(server, path, sha, upload_timeout=2.0, index_timeout=5.0)
    assert time.monotonic() - started < 10
    assert "no complete answer within 2s" in str(info.value)


def test_the_variant_uploads_http_reason_is_escaped(tmp_path: Path) -> None:
    path, sha = wheel(tmp_path)

    def behave(conn: socket.socket, where: str, request: bytes) -> None:
        if request.startswith(b"POST"):
            conn.sendall(b"HTTP/1.1 400 Bad\x1b[2J\xe2\x80\xaeRequest\r\nContent-Length: 0\r\n\r\n")
        else:
            json_page()(conn, where)

    behave.wants_request = True  # type: ignore[attr-defined]
    with HostileIndex(behave) as server, pytest.raises(PublishError) as info:
        variant_path(server, path, sha, upload_timeout=5.0, index_timeout=5.0)
    assert "\x1b" not in str(info.value) and "\u202e" not in str(info.value)
    assert "HTTP 400" in str(info.value)


def test_fetch_sha256_follows_no_redirect_to_another_scheme() -> None:
    moved = send("302 Found", {"Location": "ftp://127.0.0.1:9/demo_engine-1.0.whl"}, b"")
    server = HostileIndex(routes(files_without_hashes({"demo_engine-1.0.whl": b"x"}), files=moved))
    with server, pytest.raises(PublishError, match="another scheme or host\\) is not followed"):
        index.fetch_sha256(server.simple, PROJECT, "demo_engine-1.0.whl", timeout=5.0)
