"""One HTTP GET under a total deadline, with a capped body: how the index client reads.

A per-read timeout does not bound a server that drips a byte every few seconds, and a body read
whole has no size limit. Here one `Deadline` covers the whole request (connect, TLS, headers,
body, redirects within the host), and the body is kept only up to a cap, refused beyond it.
Redirects to another host are not followed (`ForeignRedirect`), nor to another scheme; the
opener has no FTP, file or data handler. Every request of the publish stage (the index's listing,
a file fetched to be hashed, a PEP 825 variant upload) goes through `_opener`.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPMessage
from typing import IO, Any

from release.publish.redact import redact_text

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


class Deadline:
    """The time left for one request, across every connection it opens (redirects included).

    Each socket is registered as it is connected (a duplicate of its descriptor, so TLS
    wrapping does not take it away); when the time is up a timer shuts them all down, which
    ends any read in progress, however slowly the other side drips. Per-operation socket
    timeouts are set to what is left as well.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer: threading.Timer | None = None
        self._closed = False

    def left(self) -> float:
        return self.end - time.monotonic()

    def connect(
        self, address: tuple[str, int], timeout: object = None, source_address: Any = None
    ) -> socket.socket:
        """`socket.create_connection` under the deadline (http.client's connection hook)."""
        left = self.left()
        if left <= 0:
            self.expired = True
            msg = f"no complete answer within {self.seconds:g}s"
            raise TimeoutError(msg)
        limit = min(timeout, left) if isinstance(timeout, (int, float)) else left
        sock = socket.create_connection(address, limit, source_address)
        with self._lock:
            if self._closed:
                sock.close()
                msg = "the request is over"
                raise OSError(msg)
            self._sockets.append(sock.dup())
            if self._timer is None:
                self._timer = threading.Timer(max(self.left(), 0.0), self._expire)
                self._timer.daemon = True
                self._timer.start()
        return sock

    def _expire(self) -> None:
        with self._lock:
            if self._closed:
                return
            self.expired = True
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, deadline: Deadline | None = None, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        if deadline is not None:
            self._create_connection = deadline.connect


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, deadline: Deadline | None = None, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        if deadline is not None:
            self._create_connection = deadline.connect


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPConnection, req, deadline=self._deadline)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        self._ssl_context = ssl.create_default_context()
        super().__init__(context=self._ssl_context)
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPSConnection, req, context=self._ssl_context, deadline=self._deadline)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects within the request's scheme and host only, or with `across_hosts` (an index's
    files on a CDN) to another HTTPS host; never to another scheme (no `ftp://`, no `file://`:
    the opener has no handler for them either). Credentials are unredirected headers, so no
    redirect carries them anywhere."""

    def __init__(self, *, across_hosts: bool = False) -> None:
        super().__init__()
        self.across_hosts = across_hosts

    def redirect_request(  # noqa: PLR0917 (the base class's signature)
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old = urllib.parse.urlsplit(req.full_url)
        new = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl))
        same = (old.scheme, old.netloc) == (new.scheme, new.netloc)
        if not same and not (self.across_hosts and new.scheme == "https" and new.hostname):
            raise ForeignRedirect(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class ForeignRedirect(urllib.error.URLError):
    """A redirect to another scheme or host, refused (it is not followed)."""

    def __init__(self, url: str) -> None:
        super().__init__(f"a redirect to {redact_text(url)[:120]} (another scheme or host) is not followed")
        self.url = url


def _opener(deadline: Deadline, *, across_hosts: bool = False) -> urllib.request.OpenerDirector:
    """The one opener of every request the toolkit makes: HTTP(S) under `deadline`, the redirect
    rule above, HTTP errors raised; no FTP, file or data handler."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        _HTTPHandler(deadline),
        _HTTPSHandler(deadline),
        urllib.request.HTTPDefaultErrorHandler(),
        _Redirects(across_hosts=across_hosts),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes


Fetch = Callable[[str, Deadline, int], Answer]


def fetch(url: str, deadline: Deadline, max_bytes: int) -> Answer:
    """GET `url` with the simple-API Accept header, under `deadline`, keeping at most `max_bytes`."""
    chunks: list[bytes] = []
    status, content_type = _get(url, deadline, max_bytes, chunks.append, ACCEPT)
    return Answer(status, content_type, b"".join(chunks))


def fetch_sha256(url: str, deadline: Deadline, max_bytes: int) -> tuple[str, int]:
    """(sha256, size) of the file at `url`, streamed under `deadline` and refused past `max_bytes`
    (never held whole); redirects to another HTTPS host are followed here (an index serves its
    files from a CDN), as any installer would, never to another scheme."""
    digest = hashlib.sha256()
    size = [0]

    def sink(chunk: bytes) -> None:
        digest.update(chunk)
        size[0] += len(chunk)

    _get(url, deadline, max_bytes, sink, "*/*", foreign=True)
    return digest.hexdigest(), size[0]


def _get(
    url: str,
    deadline: Deadline,
    max_bytes: int,
    sink: Callable[[bytes], None],
    accept: str,
    *,
    foreign: bool = False,
    request: urllib.request.Request | None = None,
) -> tuple[int, str]:
    if request is None:
        request = urllib.request.Request(url, headers={"Accept": accept})  # noqa: S310 (checked scheme)
    opener = _opener(deadline, across_hosts=foreign)
    with opener.open(request, timeout=max(deadline.left(), 0.001)) as response:
        length = response.headers.get("Content-Length", "").strip()
        declared = int(length) if length.isascii() and length.isdigit() and len(length) < 20 else None
        if declared is not None and declared > max_bytes:
            raise TooLarge(declared)
        size = 0
        while chunk := response.read(min(1 << 16, max_bytes + 1 - size)):
            size += len(chunk)
            if size > max_bytes:
                raise TooLarge(None)
            sink(chunk)
        if deadline.expired:  # the timer shut the socket: what arrived may look complete
            msg = f"no complete answer within {deadline.seconds:g}s"
            raise TimeoutError(msg)
        if declared is not None and size < declared:  # read(n) returns short at EOF, silently
            raise ShortAnswer(size, declared - size)
        return response.status, response.headers.get("Content-Type", "")


def post(
    url: str,
    body: bytes,
    deadline: Deadline,
    max_bytes: int,
    *,
    headers: dict[str, str],
    authorization: str | None = None,
) -> Answer:
    """POST `body` to `url` under `deadline` (sending and the answer alike), keeping at most
    `max_bytes` of the answer. `authorization` goes to `url`'s host only: it is not sent again
    on any redirect, and a redirect to another scheme or host is refused (`ForeignRedirect`)."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 (checked scheme)
    if authorization is not None:
        request.add_unredirected_header("Authorization", authorization)
    chunks: list[bytes] = []
    status, content_type = _get(url, deadline, max_bytes, chunks.append, "*/*", request=request)
    return Answer(status, content_type, b"".join(chunks))


class TooLarge(Exception):
    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


class ShortAnswer(http.client.IncompleteRead):
    """The body ended before its Content-Length: `received` bytes arrived, `expected` more were due."""

    def __init__(self, received: int, expected: int) -> None:
        super().__init__(b"", expected)
        self.received = received
