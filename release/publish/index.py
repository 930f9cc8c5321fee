"""What a package index already holds: a small PEP 503 / PEP 691 simple-API client.

`GET <simple>/<project>/` asks for the JSON form first and falls back to HTML; the sha256 of each
file comes from `hashes` (JSON) or the `#sha256=` fragment of its link (HTML). Reads are never
authenticated and never follow a redirect to another host (pypiserver redirects unknown projects
to pypi.org: that is "not on this index", not PyPI's files).

The answer is untrusted input, bounded by construction: one deadline covers the whole request
(connect, TLS, headers, body, redirects), not each read; the body is capped before it is kept;
the page is parsed into typed records or refused with one line that says what is wrong. Every
transport failure is `IndexUnavailable` (worth retrying); a page that is not a simple-API page
is a `PublishError`. URLs are printed with any password removed, however malformed they are.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser

from packaging.utils import canonicalize_name

from release import table
from release.errors import PublishError, UsageError
from release.publish import redact, transport

ACCEPT = transport.ACCEPT
# Upload URL -> simple API of the same index, for the hosts we know.
KNOWN_INDEXES = {
    "https://upload.pypi.org/legacy/": "https://pypi.org/simple/",
    "https://test.pypi.org/legacy/": "https://test.pypi.org/simple/",
}
DEFAULT_TIMEOUT = 60.0
"""Seconds for one whole request: an index that drips a byte every few seconds ends here."""
MAX_RESPONSE_BYTES = 64 << 20
"""The largest project page kept; a larger answer is refused before it is all read."""

_JSON_TYPES = {
    "application/vnd.pypi.simple.v1+json",
    "application/vnd.pypi.simple.latest+json",
    "application/json",
}
_HTML_TYPES = {
    "",
    "text/html",
    "application/xhtml+xml",
    "application/vnd.pypi.simple.v1+html",
    "application/vnd.pypi.simple.latest+html",
}
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class IndexUnavailable(PublishError):
    """The index could not be read (network error, 5xx, deadline): worth retrying."""


class NotSimpleAPI(ValueError):
    """A page that is not shaped like a simple-API project page; the message says where."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    sha256: str | None
    url: str = field(default="", compare=False)
    """Where the page says the file is (relative to the page), without its fragment."""


# ---------------------------------------------------------------------------------------------
# URLs: transport rules, the simple-API URL, and passwords kept out of every message


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_transport(url: str, what: str = "repository") -> None:
    """Refuse a malformed URL, plain HTTP except on loopback, and anything that is not HTTP(S)."""
    if not url.isprintable() or any(ch.isspace() for ch in url):
        msg = f"{what} {printable(redact_url(url))} holds whitespace or control characters: not a URL"
        raise UsageError(msg)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        msg = (
            f"{what} {redact_url(url)} is not a valid URL (a password holding / ? # or @ "
            "must be percent-encoded)"
        )
        raise UsageError(msg) from None
    if parts.scheme in ("http", "https") and not parts.hostname:
        msg = f"{what} {redact_url(url)} names no host"
        raise UsageError(msg)
    if parts.scheme == "https":
        return
    if parts.scheme == "http":
        if parts.hostname and is_loopback(parts.hostname):
            return
        msg = (
            f"refusing plain-HTTP {what} {redact_url(url)}: credentials and wheels would travel "
            "unencrypted (use https://; http:// is allowed only on 127.0.0.1, ::1 and localhost)"
        )
        raise UsageError(msg)
    msg = f"{what} {redact_url(url)} is not an http(s) URL"
    raise UsageError(msg)


redact_url = redact.redact_url
redact_text = redact.redact_text


printable = table.printable


def _without_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


def simple_url_for(upload_url: str) -> str:
    """The simple-API root of the index that `upload_url` uploads to."""
    normalized = upload_url if upload_url.endswith("/") else upload_url + "/"
    if normalized in KNOWN_INDEXES:
        return KNOWN_INDEXES[normalized]
    try:
        parts = urllib.parse.urlsplit(normalized)
    except ValueError:
        parts = None
    if parts is not None and parts.path == "/":
        # pypiserver: uploads go to the root, the simple API lives under /simple/. Reads are never
        # authenticated, so user-info (user:password@) never reaches the listing URL.
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc, path="/simple/", query="", fragment=""))
    msg = (
        f"cannot tell the simple-API URL of {redact_url(upload_url)}: pass --index-url "
        "(e.g. https://pypi.example.org/simple/)"
    )
    raise UsageError(msg)


# ---------------------------------------------------------------------------------------------
# Parsing: typed records, or one line that says what is wrong


def _show(value: object) -> str:
    """A short, single-line rendering of an untrusted value."""
    if isinstance(value, str) and len(value) > 40:
        return repr(value[:40]) + "…"
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)[:40]
    return printable(text)


def _filename(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or not value.isprintable() or len(value) > 255:
        msg = f"{where} is {_show(value)}, not a file name"
        raise NotSimpleAPI(msg)
    if "/" in value or "\\" in value or value in (".", ".."):
        msg = f"{where} is {_show(value)}, not a file name"
        raise NotSimpleAPI(msg)
    return value


def _digest(value: object, where: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        msg = f"{where} is {_show(value)}, not a sha256 (64 hex digits)"
        raise NotSimpleAPI(msg)
    return value.lower()


def _collect(files: list[IndexFile]) -> list[IndexFile]:
    seen: dict[str, str | None] = {}
    for f in files:
        if f.filename in seen and seen[f.filename] != f.sha256:
            msg = f"{_show(f.filename)} is listed twice with different sha256"
            raise NotSimpleAPI(msg)
        seen[f.filename] = f.sha256
    return files


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[IndexFile] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != "a" or self._href is None:
            return
        url, _, fragment = self._href.partition("#")
        name = "".join(self._text).strip() or urllib.parse.unquote(url.rstrip("/").rsplit("/", 1)[-1])
        where = f"link {len(self.files) + 1}"
        name = _filename(name, where)
        algo, _, digest = fragment.partition("=")
        sha = _digest(digest, f"the sha256 of {where}") if algo == "sha256" else None
        self.files.append(IndexFile(name, sha, url))
        self._href = None


def parse_html(text: str) -> list[IndexFile]:
    """The files of a PEP 503 project page; `NotSimpleAPI` for a link that names no file."""
    parser = _Links()
    parser.feed(text)
    parser.close()
    return _collect(parser.files)


def parse_json(text: str | bytes, project: str | None = None) -> list[IndexFile]:
    """The files of a PEP 691 project page; `NotSimpleAPI` for anything else."""
    try:
        data = json.loads(text)
    except RecursionError:
        msg = "JSON nested too deeply"
        raise NotSimpleAPI(msg) from None
    except json.JSONDecodeError as exc:
        msg = f"not JSON ({exc.msg} at line {exc.lineno})"
        raise NotSimpleAPI(msg) from None
    except ValueError as exc:  # undecodable bytes, an integer over the digit limit
        msg = f"not JSON ({printable(str(exc))[:80]})"
        raise NotSimpleAPI(msg) from None
    if not isinstance(data, dict):
        msg = f"the page is {_show(data)}, not a JSON object"
        raise NotSimpleAPI(msg)
    meta = data.get("meta")
    if meta is not None:
        version = meta.get("api-version") if isinstance(meta, dict) else None
        if not isinstance(version, str) or version.split(".")[0] != "1":
            msg = f"meta.api-version is {_show(version)}, not 1.x"
            raise NotSimpleAPI(msg)
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        msg = f"name is {_show(name)}, not a project name"
        raise NotSimpleAPI(msg)
    if name is not None and project is not None and canonicalize_name(name) != canonicalize_name(project):
        msg = f"the page of project {_show(name)}, not of {project}"
        raise NotSimpleAPI(msg)
    entries = data.get("files")
    if not isinstance(entries, list):
        msg = f"files is {_show(entries)}, not a list"
        raise NotSimpleAPI(msg)
    files = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            msg = f"files[{i}] is {_show(entry)}, not an object"
            raise NotSimpleAPI(msg)
        filename = _filename(entry.get("filename"), f"files[{i}].filename")
        hashes = entry.get("hashes", {})
        if not isinstance(hashes, dict):
            msg = f"files[{i}].hashes is {_show(hashes)}, not an object"
            raise NotSimpleAPI(msg)
        digest = hashes.get("sha256")
        sha = None if digest is None else _digest(digest, f"files[{i}].hashes.sha256")
        url = entry.get("url")
        files.append(IndexFile(filename, sha, url.partition("#")[0] if isinstance(url, str) else ""))
    return _collect(files)


def project_url(index_url: str, project: str) -> str:
    """`<simple>/<normalized project>/`, without user-info (reads are never authenticated)."""
    index_url = _without_userinfo(index_url)
    base = index_url if index_url.endswith("/") else index_url + "/"
    return urllib.parse.urljoin(base, canonicalize_name(project) + "/")


def list_files(
    index_url: str,
    project: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = MAX_RESPONSE_BYTES,
    fetcher: transport.Fetch | None = None,
) -> dict[str, str | None]:
    """Files of `project` on the index: file name -> sha256 (None when the index gives none)."""
    entries = list_entries(index_url, project, timeout=timeout, max_bytes=max_bytes, fetcher=fetcher)
    return {f.filename: f.sha256 for f in entries}


MAX_FILE_BYTES = 4 << 30
"""The largest file fetched to be hashed (PyPI's largest per-file limits are a few GiB)."""


def fetch_sha256(
    index_url: str, project: str, filename: str, *, timeout: float = DEFAULT_TIMEOUT
) -> str | None:
    """The sha256 of the bytes the index serves for `filename` of `project`, fetched and hashed
    (for a listing that gives no sha256: a name is never a confirmation), or None when the index
    does not list it. `IndexUnavailable` when it cannot be fetched within `timeout` seconds for
    the whole download; `PublishError` for a file URL that is not http(s)."""
    entries = [e for e in list_entries(index_url, project, timeout=timeout) if e.filename == filename]
    if not entries:
        return None
    page = project_url(index_url, project)
    url = urllib.parse.urljoin(page, entries[0].url or filename)
    shown = redact_url(url)
    try:
        check_transport(url, "file URL")
    except UsageError as exc:
        raise PublishError(str(exc)) from None
    deadline = transport.Deadline(timeout)
    try:
        with deadline:
            digest, _size = transport.fetch_sha256(url, deadline, MAX_FILE_BYTES)
    except transport.TooLarge:
        msg = f"{shown}: over {MAX_FILE_BYTES:,} bytes: not fetched to be hashed"
        raise PublishError(msg) from None
    except urllib.error.HTTPError as exc:
        exc.close()
        msg = (
            f"cannot fetch {shown} to hash it: HTTP {exc.code} {printable(redact_text(str(exc.reason)))[:80]}"
        )
        raise IndexUnavailable(msg) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        expired = deadline.expired or isinstance(getattr(exc, "reason", exc), TimeoutError)
        reason = f"no complete answer within {timeout:g}s" if expired else transport_reason(exc)
        msg = f"cannot fetch {shown} to hash it: {reason}"
        raise IndexUnavailable(msg) from None
    return digest


def list_entries(
    index_url: str,
    project: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = MAX_RESPONSE_BYTES,
    fetcher: transport.Fetch | None = None,
) -> list[IndexFile]:
    """The files of `project` on the index as its page lists them (name, sha256 or None, URL)."""
    try:
        url = project_url(index_url, project)
    except ValueError:
        msg = f"{redact_url(index_url)} is not a usable index URL"
        raise UsageError(msg) from None
    shown = redact_url(url)
    deadline = transport.Deadline(timeout)
    try:
        with deadline:
            answer = (fetcher or transport.fetch)(url, deadline, max_bytes)
    except transport.ForeignRedirect:
        return []
    except transport.TooLarge as exc:
        size = f" ({exc.size:,} bytes)" if exc.size is not None else ""
        msg = f"{shown} answered more than {max_bytes:,} bytes{size}: not a project page; nothing kept"
        raise PublishError(msg) from None
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            return []
        if exc.code in (401, 403):
            msg = f"the index refused to list {project} (HTTP {exc.code}) at {shown}"
            raise PublishError(msg) from None
        msg = f"cannot read {shown}: HTTP {exc.code} {printable(redact_text(str(exc.reason)))[:80]}"
        raise IndexUnavailable(msg) from None
    except http.client.InvalidURL:
        msg = f"{shown} is not a usable index URL"
        raise UsageError(msg) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        if deadline.expired or isinstance(getattr(exc, "reason", exc), TimeoutError):
            reason = f"no complete answer within {timeout:g}s"
        else:
            reason = transport_reason(exc)
        msg = f"cannot read {shown}: {reason}"
        raise IndexUnavailable(msg) from None
    except ValueError as exc:  # urllib's checks of a malformed URL
        msg = f"{shown} is not a usable index URL ({printable(redact_text(str(exc)))[:80]})"
        raise UsageError(msg) from None
    try:
        files = _parse(answer, project)
    except NotSimpleAPI as exc:
        msg = f"{shown} answered something that is not a simple-API page: {exc}"
        raise PublishError(msg) from None
    return files


def _parse(answer: transport.Answer, project: str) -> list[IndexFile]:
    mime = answer.content_type.split(";", 1)[0].strip().lower()
    if mime in _JSON_TYPES:
        return parse_json(answer.body, project)
    if mime in _HTML_TYPES:
        return parse_html(answer.body.decode("utf-8", "replace"))
    msg = f"Content-Type {_show(answer.content_type)}"
    raise NotSimpleAPI(msg)


def transport_reason(exc: BaseException) -> str:
    """A one-line reason for a transport failure, without anything the server chose to say at length."""
    reason = getattr(exc, "reason", exc)
    if isinstance(exc, http.client.IncompleteRead):
        received = exc.received if isinstance(exc, transport.ShortAnswer) else len(exc.partial)
        text = f"the answer ended early ({received} bytes read)"
    elif isinstance(exc, http.client.LineTooLong):
        text = "a header line over http.client's limit"
    elif isinstance(exc, http.client.RemoteDisconnected):
        text = "the index closed the connection without an answer"
    elif isinstance(exc, http.client.BadStatusLine):
        text = "not an HTTP answer (bad status line)"
    elif isinstance(exc, http.client.HTTPException):
        text = f"a broken HTTP answer ({type(exc).__name__})"
    else:
        text = str(reason) or type(reason).__name__
    return printable(redact_text(text))[:160]
