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
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release import process, settings
from release.errors import PublishError
from release.publish import handoff, index, redact

DEFAULT_TRIES = 4
DEFAULT_UPLOAD_TIMEOUT = 900.0
"""Seconds one twine upload may take before it is stopped (its process group is killed)."""
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
# twine prints e.g. "HTTPError: 403 Forbidden from http://127.0.0.1:8080/"
_HTTP_STATUS = re.compile(r"(?a)\b(\d{3}) [A-Za-z][A-Za-z ]*? from \S+|HTTPError: (\d{3})")
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
    """Every form of every secret (see `release.publish.redact`)."""
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
        token = settings.raw("PYPI_API_TOKEN", environ) or None
        password = settings.raw("TWINE_PASSWORD", environ) or None
        env = dict(environ)  # what twine runs with
        as_token = bool(token and not password)
        if token and as_token:
            env["TWINE_USERNAME"] = "__token__"
            env["TWINE_PASSWORD"] = password = token
        if username:
            env["TWINE_USERNAME"] = username
        env["TWINE_NON_INTERACTIVE"] = "1"
        raw = (password, token, settings.raw("ACTIONS_ID_TOKEN_REQUEST_TOKEN", environ) or None)
        trusted = bool(settings.raw("ACTIONS_ID_TOKEN_REQUEST_URL", environ)) and not password
        named = username or ("__token__" if as_token else settings.raw("TWINE_USERNAME", environ))
        user = named or ("__token__" if trusted else None)
        secrets = redact.Redactor.of(raw, user).secrets
        return cls(username=user, env=env, secrets=secrets, trusted_publishing=trusted)

    def redact(self, text: str) -> str:
        """`text` without the known secrets in any form (plain, %-encoded, base64 as in `Basic`
        credentials), and without anything shaped like a credential (bearer tokens, PyPI tokens,
        URL passwords): the one redactor, `release.publish.redact`."""
        return redact.Redactor(self.secrets)(text)


# ---------------------------------------------------------------------------------------------
# Upload


def classify(index_files: Mapping[str, str | None], candidate: Candidate) -> tuple[str, str]:
    """("upload" | "skip" | "conflict" | "unverified", note) for one file given the index listing;
    "unverified" when the listing names it without a sha256."""
    if candidate.filename not in index_files:
        return "upload", ""
    remote = index_files[candidate.filename]
    if remote is None:  # a name is not a confirmation: `Uploader.judge` fetches the file and hashes it
        return "unverified", "the index lists it with no sha256"
    if remote == candidate.sha256:
        return "skip", ""
    return "conflict", f"index sha256 {remote[:12]}…, local {candidate.sha256[:12]}…"


TIMED_OUT = process.TIMED_OUT


def run_process(
    cmd: Sequence[str], env: Mapping[str, str], timeout: float = DEFAULT_UPLOAD_TIMEOUT
) -> tuple[int, str]:
    """Run `cmd` under a deadline, tracked: past the deadline, or on SIGTERM/SIGINT, its whole
    process group is stopped and reaped (exit 124 at the deadline; `Interrupted` on a signal)."""
    # Wide lines: rich (twine's output) folds a long word, and a credential split across lines
    # would slip past the redactor.
    wide = {**env, "COLUMNS": "4000"}
    try:
        return process.run_bounded(list(cmd), timeout=timeout, env=wide)
    except OSError as exc:
        return 127, f"cannot run {cmd[0]}: {exc.strerror or exc}"


def clean_output(text: str) -> str:
    """Tool output fit for our messages: terminal escapes removed, other control characters shown."""
    return "\n".join(index.printable(line) for line in _ESCAPES.sub("", text).splitlines())


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
    runner: Runner | None = None
    tries: int = DEFAULT_TRIES
    backoff: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = print
    upload_timeout: float = DEFAULT_UPLOAD_TIMEOUT
    index_timeout: float = index.DEFAULT_TIMEOUT
    waited: dict[str, float] = field(default_factory=dict)
    """Seconds spent waiting, by what was waited for (twine, listing, backoff): the summary's totals."""

    def _count(self, what: str, started: float) -> None:
        self.waited[what] = self.waited.get(what, 0.0) + time.monotonic() - started

    def totals(self) -> str:
        shown = ", ".join(f"{what} {seconds:.1f}s" for what, seconds in sorted(self.waited.items()))
        return (
            f"waited: {shown or 'nothing'} (deadlines: {self.upload_timeout:g}s an upload, "
            f"{self.index_timeout:g}s a listing, {self.tries} tries)"
        )

    def list(self, project: str) -> dict[str, str | None]:
        started = time.monotonic()
        try:
            return index.list_files(self.index_url, project, timeout=self.index_timeout)
        finally:
            self._count("listing", started)

    def _run(self, cmd: Sequence[str]) -> tuple[int, str]:
        started = time.monotonic()
        try:
            if self.runner is None:
                return run_process(cmd, self.credentials.env, self.upload_timeout)
            return self.runner(cmd, self.credentials.env)
        finally:
            self._count("twine", started)

    def fetch_sha256(self, project: str, filename: str) -> str | None:
        """The sha256 of the file the index serves under `filename` (fetched, hashed), or None
        when it does not list it; `IndexUnavailable` when it cannot be fetched."""
        started = time.monotonic()
        try:
            return index.fetch_sha256(self.index_url, project, filename, timeout=self.index_timeout)
        finally:
            self._count("fetch", started)

    def judge(self, listing: Mapping[str, str | None], candidate: Candidate) -> tuple[str, str]:
        """`classify`, with a name listed without a sha256 settled by fetching the file and hashing
        it: "skip" (the same bytes), "conflict", or still "unverified" (it could not be fetched)."""
        status, note = classify(listing, candidate)
        if status != "unverified":
            return status, note
        try:
            remote = self.fetch_sha256(candidate.project, candidate.filename)
        except PublishError as exc:
            return status, f"{note}, and fetching it to hash it failed: {self.credentials.redact(str(exc))}"
        if remote is None:
            return status, f"{note}, and then no longer lists it"
        if remote == candidate.sha256:
            return "skip", "listed without a sha256: the file it serves was fetched and hashed"
        return "conflict", f"the file it serves has sha256 {remote[:12]}…, local {candidate.sha256[:12]}…"

    def _confirm(self, candidate: Candidate, why: str) -> Outcome | None:
        """What the index lists for the file now: uploaded (our sha256), a mismatch naming both
        digests, or None when it does not list it. A listing without a sha256 is settled by
        fetching the file and hashing it; when that fails the release stops (nothing unverified
        counts as uploaded)."""
        present = self.list(candidate.project)
        if candidate.filename not in present:
            return None
        remote = present[candidate.filename]
        if remote is None:
            status, note = self.judge(present, candidate)
            if status == "unverified":
                msg = f"{candidate.filename}: cannot confirm the upload: {note}; the release stops"
                raise PublishError(msg)
            if status == "conflict":
                msg = f"{candidate.filename}: {note} ({why}); the release stops"
                raise handoff.DigestMismatch(msg)
            return Outcome(candidate, "uploaded", note)
        if remote != candidate.sha256:
            msg = (
                f"{candidate.filename}: the index lists sha256 {remote}, but the verified sha256 is "
                f"{candidate.sha256} ({why}); the release stops"
            )
            raise handoff.DigestMismatch(msg)
        return Outcome(candidate, "uploaded", why if why != "answered" else "")

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
        started = time.monotonic()
        self.sleep(delay)
        self._count("backoff", started)

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
                settled = self._after_interrupted(candidate, present)
                if settled is not None:
                    return settled
            rc, output = self._run_checked(cmd, candidate)
            if rc == 0:
                confirmed = self._listed_after(candidate, "answered")
                if confirmed is not None:
                    return confirmed
                last, recheck = "accepted, but the index does not list it", True
                if attempt < self.tries:
                    self._wait(attempt, last)
                continue
            last, recheck = _last_lines(output), True
            verdict = self._after_failure(candidate, output, uploaded_so_far)
            if isinstance(verdict, Outcome):
                return verdict
            if not verdict:
                break
            if attempt < self.tries:
                self._wait(attempt, last)
        msg = f"{candidate.filename}: upload failed ({last})"
        raise PublishError(msg)

    def _after_interrupted(self, candidate: Candidate, present: Mapping[str, str | None]) -> Outcome | None:
        """After a try that may have landed, the index listing `present` decides: the outcome when
        the file is there (or conflicts), None to upload it again."""
        status, note = self.judge(present, candidate)
        if status == "unverified":
            msg = f"{candidate.filename}: cannot confirm it after an interrupted try: {note}"
            raise PublishError(msg)
        if status == "skip":
            return Outcome(candidate, "uploaded", "confirmed on the index after an interrupted try")
        if status == "conflict":
            return Outcome(candidate, "conflict", f"after an interrupted try: {note}")
        return None

    def _run_checked(self, cmd: Sequence[str], candidate: Candidate) -> tuple[int, str]:
        """One twine upload, the file's bytes checked against its sha256 before and after."""
        handoff.require_digest(candidate.path, candidate.sha256, f"{candidate.filename} before upload")
        rc, output = self._run(cmd)
        output = clean_output(self.credentials.redact(output))
        handoff.require_digest(candidate.path, candidate.sha256, f"{candidate.filename} after upload")
        return rc, output

    def _after_failure(self, candidate: Candidate, output: str, uploaded_so_far: int) -> Outcome | bool:
        """After twine failed: the outcome when the index turns out to hold the file, False when
        another try cannot help, True to try again. Refused credentials raise at once."""
        code = _http_status(output)
        if code in (401, 403):
            raise self._refused(code, uploaded_so_far)
        if code is not None and 400 <= code < 500 and code not in (400, 408, 409, 429):
            return False
        if code is None and any(marker in output for marker in _FATAL_TWINE):
            return False
        if code in (400, 409):
            # A duplicate answer (pypiserver's bare 400, PyPI's "File already exists") is
            # decided by listing the index again now, never taken as final.
            duplicate = self._listed_after(candidate, f"HTTP {code}: the index already held it")
            if duplicate is not None:
                return duplicate
            if "exist" not in output.lower():
                return False
        return True

    def _listed_after(self, candidate: Candidate, why: str) -> Outcome | None:
        try:
            return self._confirm(candidate, why)
        except index.IndexUnavailable as exc:
            why = self.credentials.redact(str(exc))
            self.log(f"  cannot list {candidate.project} after the upload: {why}")
            return None


def _last_lines(output: str, count: int = 3) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "no output"
