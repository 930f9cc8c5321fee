"""The simple-API client against hostile answers, with a fake transport (no process, no network).

Typed parsing (one error line for anything not shaped like the simple API), every transport
failure retried then reported, the body cap, the deadline's bookkeeping and secrets kept out of
every URL form. Real sockets (a dripping index, a gigabyte body, broken status lines) are in
tests/integration/test_publish.py.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
from email.message import Message
from pathlib import Path

import pytest

from release import cli
from release.errors import PublishError, UsageError
from release.publish import index, transport
from release.publish.upload import Credentials, Uploader

SHA = "ab" * 32
URL = "https://idx.example/simple/"
PAGE = {"meta": {"api-version": "1.1"}, "name": "demo", "files": [{"filename": "demo-1.0.whl", "hashes": {}}]}


def answer(body: bytes | str, content_type: str = "application/vnd.pypi.simple.v1+json") -> transport.Fetch:
    data = body.encode() if isinstance(body, str) else body

    def fetch(url: str, deadline: transport.Deadline, max_bytes: int) -> transport.Answer:
        return transport.Answer(200, content_type, data)

    return fetch


def failing(exc: BaseException) -> transport.Fetch:
    def fetch(url: str, deadline: transport.Deadline, max_bytes: int) -> transport.Answer:
        raise exc

    return fetch


def one(**entry: object) -> dict[str, object]:
    return {"files": [{"filename": "a.whl", **entry}]}


def listed(body: object, content_type: str = "application/vnd.pypi.simple.v1+json") -> dict[str, str | None]:
    text = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return index.list_files(URL, "demo", fetcher=answer(text, content_type))


def refused(body: object, content_type: str = "application/vnd.pypi.simple.v1+json") -> str:
    with pytest.raises(PublishError) as info:
        listed(body, content_type)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"{URL}demo/ answered something that is not a simple-API page: ")
    return message


# ------------------------------------------------------------------------------------------------
# Parsing


def test_a_json_page() -> None:
    page = {
        "meta": {"api-version": "1.1"},
        "name": "Demo",
        "files": [
            {"filename": "demo-1.0.whl", "url": "u", "hashes": {"sha256": SHA.upper()}},
            {"filename": "demo-1.1.whl", "url": "u", "hashes": {}},
            {"filename": "demo-1.2.whl", "url": "u"},
        ],
    }
    assert listed(page) == {"demo-1.0.whl": SHA, "demo-1.1.whl": None, "demo-1.2.whl": None}


def test_an_html_page() -> None:
    html = f"""<html><body><h1>Links</h1>
    <a href="../../packages/a-1.0-py3-none-any.whl#sha256={SHA.upper()}">a-1.0-py3-none-any.whl</a><br>
    <a href="https://files/b-1.0.tar.gz#md5=123">b-1.0.tar.gz</a>
    <a href="/c/c-2.0-py3-none-any.whl"></a>
    </body></html>"""
    assert listed(html, "text/html; charset=utf-8") == {
        "a-1.0-py3-none-any.whl": SHA,
        "b-1.0.tar.gz": None,
        "c-2.0-py3-none-any.whl": None,
    }


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([], "the page is [], not a JSON object"),
        (None, "the page is null, not a JSON object"),
        (42, "the page is 42, not a JSON object"),
        ('"just a string"', "the page is 'just a string', not a JSON object"),
        ({}, "files is null, not a list"),
        ({"files": {}}, "files is {}, not a list"),
        ({"files": ["x"]}, "files[0] is 'x', not an object"),
        ({"files": [None]}, "files[0] is null, not an object"),
        ({"files": [{}]}, "files[0].filename is null, not a file name"),
        ({"files": [{"filename": 7}]}, "files[0].filename is 7, not a file name"),
        ({"files": [{"filename": ""}]}, "files[0].filename is '', not a file name"),
        ({"files": [{"filename": "../evil.whl"}]}, "files[0].filename is '../evil.whl', not a file name"),
        ({"files": [{"filename": "a\nerror: x"}]}, "files[0].filename is 'a\\nerror: x', not a file"),
        (one(hashes=[]), "files[0].hashes is [], not an object"),
        (one(hashes={"sha256": 5}), "files[0].hashes.sha256 is 5, not a sha256"),
        (one(hashes={"sha256": "zz"}), "is 'zz', not a sha256 (64 hex digits)"),
        (one(hashes={"sha256": [SHA]}), "files[0].hashes.sha256 is"),
        (one(hashes={"sha256": "a" * 5000}), "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'…"),
        ({"meta": {"api-version": "2.0"}, "files": []}, "meta.api-version is '2.0', not 1.x"),
        ({"meta": "1.0", "files": []}, "meta.api-version is null, not 1.x"),
        ({"name": "other", "files": []}, "the page of project 'other', not of demo"),
        ({"name": 3, "files": []}, "name is 3, not a project name"),
        (
            {"files": [{"filename": "a.whl", "hashes": {"sha256": SHA}}, {"filename": "a.whl"}]},
            "'a.whl' is listed twice with different sha256",
        ),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        ('{"files": [', "not JSON (Expecting value at line 1)"),
        (b"\xff\xfe{}", "not JSON"),
        ('{"files": ' + "1" * 5000 + "}", "not JSON"),
    ],
)
def test_json_not_shaped_like_the_simple_api(body: object, fragment: str) -> None:
    assert fragment in refused(body)


@pytest.mark.parametrize(
    ("html", "fragment"),
    [
        (f'<a href="x.whl#sha256={SHA[:-1]}">x.whl</a>', "the sha256 of link 1 is"),
        ('<a href="x.whl#sha256=">x.whl</a>', "the sha256 of link 1 is '', not a sha256"),
        ('<a href="../">../</a>', "link 1 is '../', not a file name"),
        ('<a href="/">  </a>', "link 1 is '', not a file name"),
        ('<a href="x">a\x1bb</a>', "link 1 is 'a\\x1bb', not a file name"),
        (f'<a href="a.whl#sha256={SHA}">a.whl</a><a href="a.whl">a.whl</a>', "'a.whl' is listed twice"),
    ],
)
def test_html_not_shaped_like_the_simple_api(html: str, fragment: str) -> None:
    assert fragment in refused(html, "text/html")


@pytest.mark.parametrize("content_type", ["application/octet-stream", "text/plain", "image/png"])
def test_an_unknown_content_type_is_refused(content_type: str) -> None:
    assert f"Content-Type '{content_type}'" in refused(json.dumps(PAGE), content_type)


def test_a_missing_content_type_reads_as_html() -> None:
    assert listed('<a href="demo-1.0.whl">demo-1.0.whl</a>', "") == {"demo-1.0.whl": None}


# ------------------------------------------------------------------------------------------------
# Transport: every failure is IndexUnavailable, retried with the backoff, then reported


def _http_error(code: int, reason: str = "Oops") -> urllib.error.HTTPError:
    return urllib.error.HTTPError(URL, code, reason, Message(), None)


TRANSIENT: list[tuple[BaseException, str]] = [
    (http.client.IncompleteRead(b"abc", 10), "the answer ended early (3 bytes read)"),
    (http.client.BadStatusLine("HTTP/9 nonsense"), "not an HTTP answer (bad status line)"),
    (http.client.LineTooLong("header line"), "a header line over http.client's limit"),
    (http.client.RemoteDisconnected("closed"), "the index closed the connection without an answer"),
    (http.client.HTTPException("got more than 100 headers"), "a broken HTTP answer (HTTPException)"),
    (http.client.UnknownProtocol("HTTP/3.0"), "a broken HTTP answer (UnknownProtocol)"),
    (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), "Connection refused"),
    (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), "Name or service not known"),
    (urllib.error.URLError(ssl.SSLError(1, "wrong version number")), "wrong version number"),
    (ConnectionResetError(104, "Connection reset by peer"), "Connection reset by peer"),
    (TimeoutError("timed out"), "no complete answer within 60s"),
    (urllib.error.URLError(TimeoutError("timed out")), "no complete answer within 60s"),
    (_http_error(500, "Internal Server Error"), "HTTP 500 Internal Server Error"),
    (_http_error(503, "Service\nUnavailable"), "HTTP 503 Service\\nUnavailable"),
    (_http_error(429, "Too Many Requests"), "HTTP 429"),
]


TRANSIENT_IDS = [f"{type(e).__name__}-{i}" for i, (e, _) in enumerate(TRANSIENT)]


@pytest.mark.parametrize(("exc", "reason"), TRANSIENT, ids=TRANSIENT_IDS)
def test_transport_failures_are_index_unavailable(exc: BaseException, reason: str) -> None:
    with pytest.raises(index.IndexUnavailable) as info:
        index.list_files(URL, "demo", fetcher=failing(exc))
    message = str(info.value)
    assert message == f"cannot read {URL}demo/: {reason}" or reason in message
    assert "\n" not in message


@pytest.mark.parametrize(("exc", "reason"), TRANSIENT[:8], ids=[type(e).__name__ for e, _ in TRANSIENT[:8]])
def test_listing_retries_every_transport_failure_then_reports(
    exc: BaseException, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fetch(url: str, deadline: transport.Deadline, max_bytes: int) -> transport.Answer:
        calls.append(url)
        if len(calls) < 3:
            raise exc
        return transport.Answer(200, "application/vnd.pypi.simple.v1+json", json.dumps(PAGE).encode())

    monkeypatch.setattr(transport, "fetch", fetch)
    log: list[str] = []
    up = _uploader(log)
    assert up.listing(["demo"]) == {"demo": {"demo-1.0.whl": None}}
    assert [line for line in log if line.startswith("sleep")] == ["sleep 1.0", "sleep 2.0"]
    assert any(reason in line for line in log)

    calls.clear()
    monkeypatch.setattr(transport, "fetch", failing(exc))
    with pytest.raises(index.IndexUnavailable, match="cannot read"):
        _uploader([]).listing(["demo"])


def _uploader(log: list[str]) -> Uploader:
    return Uploader(
        repository="https://upload.example/legacy/",
        index_url=URL,
        credentials=Credentials.from_env({"TWINE_USERNAME": "u", "TWINE_PASSWORD": "pw-secret"}),
        runner=lambda cmd, env: (0, ""),
        tries=3,
        sleep=lambda s: log.append(f"sleep {s}"),
        log=log.append,
    )


@pytest.mark.parametrize("code", [404, 410])
def test_not_found_is_an_empty_listing(code: int) -> None:
    assert index.list_files(URL, "demo", fetcher=failing(_http_error(code))) == {}


def test_a_redirect_to_another_host_is_an_empty_listing() -> None:
    elsewhere = failing(transport.ForeignRedirect("https://pypi.org/"))
    assert index.list_files(URL, "demo", fetcher=elsewhere) == {}


@pytest.mark.parametrize("code", [401, 403])
def test_refused_listing_is_not_retried(code: int) -> None:
    with pytest.raises(PublishError, match=f"the index refused to list demo \\(HTTP {code}\\)") as info:
        index.list_files(URL, "demo", fetcher=failing(_http_error(code)))
    assert not isinstance(info.value, index.IndexUnavailable)


def test_an_invalid_url_says_nothing_of_its_parts() -> None:
    invalid = failing(http.client.InvalidURL("nonnumeric port: 'secretpart'"))
    with pytest.raises(UsageError) as info:
        index.list_files(URL, "demo", fetcher=invalid)
    assert "secretpart" not in str(info.value)


# ------------------------------------------------------------------------------------------------
# The body cap and the deadline


class FakeResponse:
    def __init__(self, headers: dict[str, str], chunks: list[bytes]) -> None:
        self.headers = headers
        self.status = 200
        self._chunks = chunks
        self.reads: list[int] = []

    def read(self, size: int) -> bytes:
        self.reads.append(size)
        return self._chunks.pop(0) if self._chunks else b""

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _opened(monkeypatch: pytest.MonkeyPatch, response: FakeResponse) -> None:
    monkeypatch.setattr("urllib.request.OpenerDirector.open", lambda self, request, timeout: response)


def test_a_declared_length_over_the_cap_is_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    response = FakeResponse({"Content-Length": str(10**12)}, [b"x"])
    _opened(monkeypatch, response)
    with pytest.raises(PublishError, match=r"answered more than 1,000 bytes \(1,000,000,000,000 bytes\)"):
        index.list_files(URL, "demo", max_bytes=1000)
    assert response.reads == []


def test_a_length_that_is_no_number_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    _opened(monkeypatch, FakeResponse({"Content-Length": "\u00b2", "Content-Type": "text/html"}, [b"<p>"]))
    assert index.list_files(URL, "demo") == {}


def test_an_undeclared_body_is_cut_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    response = FakeResponse({}, [b"x" * 600] * 100)
    _opened(monkeypatch, response)
    with pytest.raises(PublishError, match="answered more than 1,000 bytes: not a project page"):
        index.list_files(URL, "demo", max_bytes=1000)
    assert sum(response.reads) <= 1000 + 1 + 600 and len(response.reads) == 2


def test_a_body_shorter_than_declared_is_a_transport_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    _opened(monkeypatch, FakeResponse({"Content-Length": "900", "Content-Type": "text/html"}, [b"<a>"]))
    with pytest.raises(index.IndexUnavailable, match=r"the answer ended early \(3 bytes read\)"):
        index.list_files(URL, "demo")


def test_a_body_that_ends_because_the_deadline_shut_it_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    real = transport.Deadline

    class Expired(real):  # type: ignore[misc, valid-type]
        def __init__(self, seconds: float) -> None:
            super().__init__(seconds)
            self.expired = True

    monkeypatch.setattr(transport, "Deadline", Expired)
    _opened(monkeypatch, FakeResponse({"Content-Type": "text/html"}, [b"<a href='x.whl'>x.whl</a>"]))
    with pytest.raises(index.IndexUnavailable, match="no complete answer within 60s"):
        index.list_files(URL, "demo")


def test_the_deadline_shuts_every_socket_it_watches() -> None:
    deadline = transport.Deadline(60)
    left, right = socket.socketpair()
    with left, right:
        deadline._sockets.append(left.dup())
        deadline._expire()
        assert deadline.expired
        assert right.recv(10) == b""  # the peer sees the shutdown: a blocked read would end
    deadline.close()
    assert deadline._sockets == []


def test_no_connection_once_the_time_is_up() -> None:
    deadline = transport.Deadline(-1)
    with pytest.raises(TimeoutError, match="no complete answer within -1s"):
        deadline.connect(("127.0.0.1", 9))
    assert deadline.expired


# ------------------------------------------------------------------------------------------------
# Secrets in every URL form


PASSWORDS = ["pa/ss-Word9", "p@ss@Word9", "p#ss?Word9", "p:ss:Word9", "p ss Word9", "pa%2Fss%40Word9"]


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("scheme", ["https://", "http://", ""])
def test_redact_url_hides_any_password(password: str, scheme: str) -> None:
    for url in (f"{scheme}user:{password}@host:8080/legacy/", f"{scheme}user:{password}@[::1"):
        shown = index.redact_url(url)
        assert "ss" not in shown.replace("host", ""), shown
        assert shown.startswith(f"{scheme}user:***@")


def test_redact_url_hides_a_token_user_and_keeps_plain_urls() -> None:
    assert index.redact_url("https://pypi-AgEIcHl@upload.pypi.org/legacy/") == "https://***@upload.pypi.org/legacy/"
    assert index.redact_url("https://upload.pypi.org/legacy/") == "https://upload.pypi.org/legacy/"
    assert index.redact_url("http://127.0.0.1:8080/") == "http://127.0.0.1:8080/"
    assert index.redact_url("") == ""


def test_redact_text_finds_urls_in_messages() -> None:
    text = "Uploading to https://u:pa/ss@h/legacy/ failed; see 'http://v:p@w@x/' and http://plain/"
    assert index.redact_text(text) == "Uploading to https://u:***@h/legacy/ failed; see 'http://v:***@x/' and http://plain/"


@pytest.mark.parametrize("password", PASSWORDS)
def test_credentials_redact_every_form(password: str) -> None:
    creds = Credentials.from_env({"TWINE_USERNAME": "u", "TWINE_PASSWORD": password})
    for text in (
        f"error at https://u:{password}@h/",
        f"error at https://u:{index.urllib.parse.quote(password, safe='')}@h/",
        f"password was {password}",
    ):
        assert "Word9" not in creds.redact(text), creds.redact(text)


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pa/ss-Word9@127.0.0.1:8080/",
        "https://user:pa/ss-Word9@host/",
        "https://user:Word9@[::1",
        "https://user:Word9@host:99999/",
        "https://user:Word9\n@host/",
        "https://user:Wo rd9@host/",
        "ftp://user:Word9@host/",
        "http://user:Word9@example.org/",
        "https:///path-only",
    ],
)
def test_check_transport_refuses_without_the_password(url: str) -> None:
    with pytest.raises(UsageError) as info:
        index.check_transport(url)
    message = str(info.value)
    assert "Word9" not in message and "\n" not in message


def test_publish_never_prints_a_malformed_repository_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2]
    for repository in ("http://user:pa/ss-Word9@127.0.0.1:8080/", "https://user:1234/ss-Word9@upload.example/"):
        code = cli.main([
            "--matrix", str(root / "matrix.yaml"), "publish", "--tag", "v0.1.0",
            "--repository", repository, "--index-url", "https://idx.example/simple/",
            "--wheelhouse", str(tmp_path / "nowhere"),
        ])  # fmt: skip
        out, err = capsys.readouterr()
        assert code in (2, 8)
        assert "Word9" not in out + err
        assert "Traceback" not in err


def test_simple_url_of_a_malformed_upload_url() -> None:
    with pytest.raises(UsageError, match="pass --index-url") as info:
        index.simple_url_for("https://user:Word9@[::1/legacy/")
    assert "Word9" not in str(info.value)

