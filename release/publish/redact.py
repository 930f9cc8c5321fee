"""The one redactor: every message that can carry an index's or a tool's text passes through here.

A credential reaches a message in many forms: as typed, percent-encoded inside a URL, as the
base64 of `user:password` in a `Basic` authorization header that an index echoes back, as a
bearer token, as a PyPI API token (`pypi-…`) or a GitHub token (`ghp_…`, `github_pat_…`), and as
the password of a URL. `Redactor` knows the secrets of this run and hides each of their forms;
it also hides every credential it can recognise by its shape alone, known or not, so an echoed
header of another run's token is hidden as well.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

MASK = "***"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
# A whole authorization header's value, then credentials after their scheme's name.
_VALUE = r"[^\s\"',;}]+"
_HEADER = re.compile(rf"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)({_VALUE}(?:[ \t]+{_VALUE})?)")
# (A plain lowercase word after "basic" is prose, "Basic authentication required", not a credential.)
_AUTH = re.compile(
    r"\b([Bb]asic|BASIC|[Bb]earer|BEARER)(\s+|%20|\+)(?=[^\s]*[A-Z0-9+/=])([A-Za-z0-9._~+/=%-]{3,})"
)
# Tokens recognisable by their prefix: PyPI (macaroons, base64url), GitHub (classic and fine-grained).
_TOKENS = re.compile(r"\b(pypi-[A-Za-z0-9_-]{8,}|gh[opsur]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})")
_MIN_SECRET = 3


def redact_url(url: str) -> str:
    """The URL without the secret part of its user-info, whatever the URL looks like.

    The user-info runs from after `scheme://` to the last `@` of the string: a password may
    hold `/`, `:`, `#` or `@` (malformed, but typed and printed all the same). Everything
    between the first `:` and that `@` is hidden, or the whole user-info when it has no `:`
    (a token given as the user name). An `@` in a path is hidden too: safe, if not pretty.
    """
    scheme = _SCHEME.match(url)
    start = scheme.end() if scheme else 0
    at = url.rfind("@", start)
    if at < 0:
        return url
    colon = url.find(":", start, at)
    if colon < 0:
        return f"{url[:start]}{MASK}{url[at:]}"
    return f"{url[: colon + 1]}{MASK}{url[at:]}"


def redact_text(text: str) -> str:
    """Every `scheme://…` in free text with `redact_url` applied (a URL ends at whitespace or a
    quote), and every credential recognisable by its shape (authorization headers, tokens) hidden."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _AUTH.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _TOKENS.sub(MASK, text)


def _b64_forms(raw: bytes) -> Iterable[str]:
    """The base64 texts that certainly contain `raw` wherever it sits in an encoded string: the
    encodings of `raw` at each of the three alignments, cut to the groups that encode `raw` alone."""
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        # With a shift the first group mixes in what precedes the secret, and a last partial
        # group what follows it; the complete groups between depend on `raw` alone.
        head = 4 if shift else 0
        body = encoded[head:].rstrip("=")
        stable = body[: len(body) - len(body) % 4]
        if len(stable) >= 4:
            yield stable
            yield stable.replace("+", "-").replace("/", "_")


def forms(secret: str, username: str | None = None) -> tuple[str, ...]:
    """Every form `secret` takes in a message: as typed, percent-encoded (twice), and base64 as in
    `Basic base64(user:password)` (with and without the user), longest first."""
    if len(secret) < _MIN_SECRET:
        return ()
    once = urllib.parse.quote(secret, safe="")
    found = {secret, once, urllib.parse.quote(once, safe=""), urllib.parse.quote_plus(secret)}
    if username:
        found.add(base64.b64encode(f"{username}:{secret}".encode()).decode())
    found.update(_b64_forms(secret.encode()))
    return tuple(sorted(found, key=len, reverse=True))


@dataclass(frozen=True)
class Redactor:
    """Hides the given secrets in every form, then every credential recognised by its shape."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, secrets: Iterable[str | None], username: str | None = None) -> Redactor:
        every = {form for s in secrets if s for form in forms(s, username)}
        return cls(tuple(sorted(every, key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return redact_text(text)
