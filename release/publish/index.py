"""What a package index already holds: a small PEP 503 / PEP 691 simple-API client.

`GET <simple>/<project>/` asks for the JSON form first and falls back to HTML; the sha256 of each
file comes from `hashes` (JSON) or the `#sha256=` fragment of its link (HTML). Reads are never
authenticated and never follow a redirect to another host (pypiserver redirects unknown projects
to pypi.org: that is "not on this index", not PyPI's files).
"""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from http.client import HTTPMessage
from typing import IO

from packaging.utils import canonicalize_name

from release.errors import PublishError, UsageError

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
# Upload URL -> simple API of the same index, for the hosts we know.
KNOWN_INDEXES = {
    "https://upload.pypi.org/legacy/": "https://pypi.org/simple/",
    "https://test.pypi.org/legacy/": "https://test.pypi.org/simple/",
}


class IndexUnavailable(PublishError):
    """The index could not be read (network error, 5xx): worth retrying."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    sha256: str | None


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_transport(url: str, what: str = "repository") -> None:
    """Refuse plain HTTP except on loopback, and anything that is not HTTP(S)."""
    parts = urllib.parse.urlsplit(url)
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


def redact_url(url: str) -> str:
    """The URL without a password in its user-info part."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def simple_url_for(upload_url: str) -> str:
    """The simple-API root of the index that `upload_url` uploads to."""
    normalized = upload_url if upload_url.endswith("/") else upload_url + "/"
    if normalized in KNOWN_INDEXES:
        return KNOWN_INDEXES[normalized]
    parts = urllib.parse.urlsplit(normalized)
    if parts.path == "/":
        # pypiserver: uploads go to the root, the simple API lives under /simple/. Reads are never
        # authenticated, so user-info (user:password@) never reaches the listing URL.
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc, path="/simple/", query="", fragment=""))
    msg = (
        f"cannot tell the simple-API URL of {redact_url(upload_url)}: pass --index-url "
        "(e.g. https://pypi.example.org/simple/)"
    )
    raise UsageError(msg)


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
        algo, _, digest = fragment.partition("=")
        self.files.append(IndexFile(name, digest.lower() if algo == "sha256" and digest else None))
        self._href = None


def parse_html(text: str) -> list[IndexFile]:
    parser = _Links()
    parser.feed(text)
    parser.close()
    return parser.files


def parse_json(text: str) -> list[IndexFile]:
    data = json.loads(text)
    files = []
    for entry in data.get("files", []):
        hashes = entry.get("hashes") or {}
        digest = hashes.get("sha256")
        files.append(IndexFile(entry["filename"], digest.lower() if digest else None))
    return files


class _NoRedirectAcrossHosts(urllib.request.HTTPRedirectHandler):
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
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            raise _ForeignRedirect(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _ForeignRedirect(Exception):
    pass


def list_files(index_url: str, project: str, *, timeout: float = 30.0) -> dict[str, str | None]:
    """Files of `project` on the index: file name -> sha256 (None when the index gives none)."""
    parts = urllib.parse.urlsplit(index_url)
    index_url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))
    base = index_url if index_url.endswith("/") else index_url + "/"
    url = urllib.parse.urljoin(base, canonicalize_name(project) + "/")
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})  # noqa: S310 (checked scheme)
    opener = urllib.request.build_opener(_NoRedirectAcrossHosts())
    try:
        with opener.open(request, timeout=timeout) as response:
            content_type = response.headers.get("Content-Type", "")
            body = response.read().decode("utf-8", "replace")
    except _ForeignRedirect:
        return {}
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        if exc.code in (401, 403):
            msg = f"the index refused to list {project} (HTTP {exc.code}) at {redact_url(url)}"
            raise PublishError(msg) from None
        msg = f"cannot read {redact_url(url)}: HTTP {exc.code} {exc.reason}"
        raise IndexUnavailable(msg) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        msg = f"cannot read {redact_url(url)}: {reason}"
        raise IndexUnavailable(msg) from None
    except ValueError as exc:  # http.client.InvalidURL and friends: a malformed URL
        msg = f"{redact_url(url)} is not a usable index URL ({redact_url(str(exc))})"
        raise UsageError(msg) from None
    try:
        files = parse_json(body) if "json" in content_type else parse_html(body)
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"{redact_url(url)} answered something that is not a simple-API page ({exc})"
        raise PublishError(msg) from None
    return {f.filename: f.sha256 for f in files}
