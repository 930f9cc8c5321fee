"""The upload machinery of `release publish`: credentials, the index listing, twine with retries.

Credentials come from the environment only: `TWINE_USERNAME`/`TWINE_PASSWORD`, or
`PYPI_API_TOKEN` (username `__token__`), or trusted publishing in GitHub Actions, which twine
(>= 6.1) performs itself when `ACTIONS_ID_TOKEN_REQUEST_URL` is set and no password is given.
Secrets are removed from everything that is printed or raised. Each file goes up in its own twine
call, with bounded retries and exponential backoff that re-check the index first (an upload that
landed before the connection dropped is recognised, not repeated).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release.errors import PublishError
from release.publish import index

DEFAULT_TRIES = 4
# twine prints e.g. "HTTPError: 403 Forbidden from http://127.0.0.1:8080/"
_HTTP_STATUS = re.compile(r"\b(\d{3}) [A-Za-z][A-Za-z ]*? from \S+|HTTPError: (\d{3})")
_FATAL_TWINE = ("InvalidDistribution", "InvalidConfiguration", "InvalidPyPIUploadURL", "Credential not found")

Runner = Callable[[Sequence[str], Mapping[str, str]], tuple[int, str]]


@dataclass(frozen=True)
class Candidate:
    """One wheel of the expected set, found and checked by preflight."""

    step: str
    variant: str
    project: str
    path: Path
    sha256: str

    @property
    def filename(self) -> str:
        return self.path.name


@dataclass
class Outcome:
    candidate: Candidate
    status: str
    note: str = ""


# ---------------------------------------------------------------------------------------------
# Secrets


@dataclass(frozen=True)
class Credentials:
    """Who uploads, and the child environment twine gets; `secrets` are redacted from output."""

    username: str | None
    env: Mapping[str, str] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)
    trusted_publishing: bool = False

    @property
    def available(self) -> bool:
        return bool(self.env.get("TWINE_PASSWORD")) or self.trusted_publishing

    @property
    def who(self) -> str:
        if self.username:
            return self.username
        return "trusted publishing" if self.trusted_publishing else "(no username)"

    @classmethod
    def from_env(cls, environ: Mapping[str, str], username: str | None = None) -> Credentials:
        env = dict(environ)
        token = env.get("PYPI_API_TOKEN")
        if token and not env.get("TWINE_PASSWORD"):
            env["TWINE_USERNAME"] = "__token__"
            env["TWINE_PASSWORD"] = token
        if username:
            env["TWINE_USERNAME"] = username
        env["TWINE_NON_INTERACTIVE"] = "1"
        raw = (env.get("TWINE_PASSWORD"), token, env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"))
        # As typed, and as it appears percent-encoded inside a URL.
        forms = (form for s in raw if s and len(s) >= 3 for form in (s, urllib.parse.quote(s, safe="")))
        secrets = tuple(dict.fromkeys(forms))
        trusted = bool(env.get("ACTIONS_ID_TOKEN_REQUEST_URL")) and not env.get("TWINE_PASSWORD")
        user = env.get("TWINE_USERNAME") or ("__token__" if trusted else None)
        return cls(username=user, env=env, secrets=secrets, trusted_publishing=trusted)

    def redact(self, text: str) -> str:
        """`text` without the known secrets, and without the password of any URL in it."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return index.redact_text(text)


# ---------------------------------------------------------------------------------------------
# Upload


def classify(index_files: Mapping[str, str | None], candidate: Candidate) -> tuple[str, str]:
    """("upload" | "skip" | "conflict", note) for one file given the index listing."""
    if candidate.filename not in index_files:
        return "upload", ""
    remote = index_files[candidate.filename]
    if remote is None:
        return "skip", "the index gives no sha256: assumed identical"
    if remote == candidate.sha256:
        return "skip", ""
    return "conflict", f"index sha256 {remote[:12]}…, local {candidate.sha256[:12]}…"


def run_process(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=dict(env), check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _http_status(output: str) -> int | None:
    for match in _HTTP_STATUS.finditer(output):
        code = match.group(1) or match.group(2)
        if code:
            return int(code)
    return None


@dataclass
class Uploader:
    repository: str
    index_url: str
    credentials: Credentials
    runner: Runner = run_process
    tries: int = DEFAULT_TRIES
    backoff: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = print

    def list(self, project: str) -> dict[str, str | None]:
        return index.list_files(self.index_url, project)

    def listing(self, projects: Iterable[str]) -> dict[str, dict[str, str | None]]:
        """Each project's files on the index, retrying an unreachable index like an upload."""
        result = {}
        for project in sorted(set(projects)):
            for attempt in range(1, self.tries + 1):
                try:
                    result[project] = self.list(project)
                    break
                except index.IndexUnavailable as exc:
                    if attempt == self.tries:
                        raise
                    self._wait(attempt, str(exc))
        return result

    def _wait(self, attempt: int, why: str) -> None:
        delay = self.backoff * 2 ** (attempt - 1)
        why = self.credentials.redact(why)
        self.log(f"  try {attempt}/{self.tries} failed: {why}; retrying in {delay:g}s")
        self.sleep(delay)

    def _refused(self, status: int, uploaded: int) -> PublishError:
        before = f"{uploaded} file(s) were uploaded before this" if uploaded else "nothing was uploaded"
        msg = (
            f"the index refused the credentials (HTTP {status}) for {self.credentials.who} at "
            f"{index.redact_url(self.repository)}; {before}. Check TWINE_USERNAME/TWINE_PASSWORD "
            "(or PYPI_API_TOKEN, or the trusted publisher configured on the index)"
        )
        return PublishError(msg)

    def upload(self, candidate: Candidate, uploaded_so_far: int = 0) -> Outcome:
        cmd = [
            sys.executable, "-m", "twine", "upload",
            "--repository-url", self.repository,
            "--non-interactive", "--disable-progress-bar",
            str(candidate.path),
        ]  # fmt: skip
        last = ""
        recheck = False
        for attempt in range(1, self.tries + 1):
            if recheck:
                try:
                    present = self.list(candidate.project)
                except index.IndexUnavailable as exc:
                    last = str(exc)
                    if attempt < self.tries:
                        self._wait(attempt, last)
                    continue
                status, note = classify(present, candidate)
                if status == "skip":
                    return Outcome(candidate, "uploaded", "confirmed on the index after an interrupted try")
                if status == "conflict":
                    return Outcome(candidate, "conflict", f"after an interrupted try: {note}")
            rc, output = self.runner(cmd, self.credentials.env)
            output = self.credentials.redact(output)
            if rc == 0:
                return Outcome(candidate, "uploaded")
            code = _http_status(output)
            if code in (401, 403):
                raise self._refused(code, uploaded_so_far)
            last = _last_lines(output)
            recheck = True
            if code is not None and 400 <= code < 500 and code not in (400, 408, 409, 429):
                break
            if code is None and any(marker in output for marker in _FATAL_TWINE):
                break
            if code in (400, 409) and "exist" not in output.lower():
                break
            if code in (400, 409):
                continue  # "already exists": the re-check at the top of the loop decides
            if attempt < self.tries:
                self._wait(attempt, last)
        msg = f"{candidate.filename}: upload failed ({last})"
        raise PublishError(msg)


def _last_lines(output: str, count: int = 3) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "no output"
