"""The upload decisions, retries, index client and secret redaction, with fakes (no process, no network)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from release.errors import PublishError, UsageError
from release.publish import index
from release.publish.preflight import publish
from release.publish.upload import Candidate, Credentials, Uploader, classify

SECRET = "hunter2-very-secret"


def candidate(tmp_path: Path, name: str, content: bytes = b"x") -> Candidate:
    path = tmp_path / f"{name}-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    path.write_bytes(content)
    return Candidate(f"cp312-{name}", name, name, path, hashlib.sha256(content).hexdigest())


class FakeIndex:
    """An index in memory that twine (the fake runner) uploads to."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.script: list[str] = []  # per twine call: "ok", "drop-after-landing", "reset", "403", "500"
        self.calls: list[Sequence[str]] = []
        self.down = False

    def list_files(self, index_url: str, project: str, *, timeout: float = 30.0) -> dict[str, str | None]:
        if self.down:
            raise index.IndexUnavailable("cannot read: [Errno 111] Connection refused")
        return {k: v for k, v in self.files.items() if k.startswith(project + "-")}

    def run(self, cmd: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
        self.calls.append(cmd)
        path = Path(cmd[-1])
        action = self.script.pop(0) if self.script else "ok"
        if action in ("ok", "drop-after-landing"):
            self.files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        if action == "ok":
            return 0, f"Uploading {path.name}\n"
        if action == "403":
            url = f"http://u:{env['TWINE_PASSWORD']}@idx/"
            return 1, f"ERROR HTTPError: 403 Forbidden from {url}\nInvalid or non-existent authentication."
        if action == "500":
            return 1, f"ERROR HTTPError: 500 Internal Server Error from http://idx/?{env['TWINE_PASSWORD']}\n"
        return 1, "requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected())\n"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeIndex:
    fake = FakeIndex()
    monkeypatch.setattr(index, "list_files", fake.list_files)
    return fake


def uploader(fake: FakeIndex, log: list[str], tries: int = 4) -> Uploader:
    creds = Credentials.from_env({"TWINE_USERNAME": "alice", "TWINE_PASSWORD": SECRET})
    return Uploader(
        repository="https://upload.example/legacy/",
        index_url="https://example/simple/",
        credentials=creds,
        runner=fake.run,
        tries=tries,
        backoff=1.0,
        sleep=lambda s: log.append(f"sleep {s}"),
        log=log.append,
    )


def test_classify(tmp_path: Path) -> None:
    c = candidate(tmp_path, "a")
    assert classify({}, c) == ("upload", "")
    assert classify({c.filename: c.sha256}, c) == ("skip", "")
    assert classify({c.filename: None}, c)[0] == "unverified"  # a name is not a confirmation
    assert classify({c.filename: "0" * 64}, c)[0] == "conflict"


def test_skips_what_is_there_and_uploads_the_rest(tmp_path: Path, fake: FakeIndex) -> None:
    a, b = candidate(tmp_path, "a", b"1"), candidate(tmp_path, "b", b"2")
    fake.files[a.filename] = a.sha256
    log: list[str] = []
    outcomes = publish([a, b], uploader(fake, log))
    assert [o.status for o in outcomes] == ["skip", "uploaded"]
    assert len(fake.calls) == 1
    cmd = fake.calls[0]
    assert cmd[-1] == str(b.path)
    assert "--non-interactive" in cmd and "--disable-progress-bar" in cmd
    assert SECRET not in " ".join(cmd)  # the password travels in the environment only


def test_conflict_stops_before_any_upload(tmp_path: Path, fake: FakeIndex) -> None:
    a, b = candidate(tmp_path, "a", b"1"), candidate(tmp_path, "b", b"2")
    fake.files[b.filename] = "f" * 64
    with pytest.raises(PublishError, match=f"{b.filename}: index sha256 ffffffffffff"):
        publish([a, b], uploader(fake, []))
    assert fake.calls == []


def test_dry_run_uploads_nothing(tmp_path: Path, fake: FakeIndex) -> None:
    a = candidate(tmp_path, "a")
    log: list[str] = []
    outcomes = publish([a], uploader(fake, log), dry_run=True)
    assert [o.status for o in outcomes] == ["upload"]
    assert fake.calls == []
    assert "would upload" in log[0]
    assert "1 file(s) would be uploaded to https://upload.example/legacy/" in log[-1]


def test_transient_errors_retry_with_exponential_backoff(tmp_path: Path, fake: FakeIndex) -> None:
    a = candidate(tmp_path, "a")
    fake.script = ["reset", "500", "ok"]
    log: list[str] = []
    outcomes = publish([a], uploader(fake, log))
    assert outcomes[0].status == "uploaded"
    assert [line for line in log if line.startswith("sleep")] == ["sleep 1.0", "sleep 2.0"]
    assert len(fake.calls) == 3
    assert any("500 Internal Server Error" in line for line in log)
    assert SECRET not in "\n".join(log)


def test_retries_are_bounded(tmp_path: Path, fake: FakeIndex) -> None:
    a, b = candidate(tmp_path, "a", b"1"), candidate(tmp_path, "b", b"2")
    fake.script = ["reset"] * 10
    with pytest.raises(PublishError, match="upload failed") as info:
        publish([a, b], uploader(fake, [], tries=3))
    assert len(fake.calls) == 3  # b was never attempted
    assert "re-run the same command" in str(info.value)


def test_upload_that_landed_before_the_drop_is_not_repeated(tmp_path: Path, fake: FakeIndex) -> None:
    a = candidate(tmp_path, "a")
    fake.script = ["drop-after-landing"]
    outcomes = publish([a], uploader(fake, []))
    assert outcomes[0].status == "uploaded"
    assert "confirmed on the index" in outcomes[0].note
    assert len(fake.calls) == 1


def test_index_down_during_retry_counts_as_a_try(tmp_path: Path, fake: FakeIndex) -> None:
    a = candidate(tmp_path, "a")
    fake.script = ["reset"]
    up = uploader(fake, [], tries=2)
    original = fake.run

    def run_then_fall(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
        result = original(cmd, env)
        fake.down = True
        return result

    up.runner = run_then_fall
    with pytest.raises(PublishError, match="Connection refused"):
        publish([a], up)


def test_refused_credentials_are_clear_and_redacted(tmp_path: Path, fake: FakeIndex) -> None:
    a, b = candidate(tmp_path, "a", b"1"), candidate(tmp_path, "b", b"2")
    fake.script = ["403"]
    log: list[str] = []
    with pytest.raises(PublishError) as info:
        publish([a, b], uploader(fake, log))
    text = str(info.value)
    assert "the index refused the credentials (HTTP 403) for alice at https://upload.example/legacy/" in text
    assert "nothing was uploaded" in text
    assert len(fake.calls) == 1
    assert SECRET not in text + "\n".join(log)


def test_no_credentials_refuses_before_uploading(tmp_path: Path, fake: FakeIndex) -> None:
    a = candidate(tmp_path, "a")
    up = uploader(fake, [])
    up.credentials = Credentials.from_env({})
    with pytest.raises(PublishError, match="no credentials"):
        publish([a], up)
    assert fake.calls == []


def test_credentials_from_the_environment() -> None:
    token = Credentials.from_env({"PYPI_API_TOKEN": "pypi-abcdef"})
    assert token.username == "__token__"
    assert token.env["TWINE_PASSWORD"] == "pypi-abcdef"
    assert token.available
    assert token.redact("Bearer pypi-abcdef and https://__token__:pypi-abcdef@host/") == (
        "Bearer *** and https://__token__:***@host/"
    )
    explicit = Credentials.from_env({"TWINE_USERNAME": "bob", "TWINE_PASSWORD": "pw-123"}, username="carol")
    assert explicit.env["TWINE_USERNAME"] == "carol"
    assert explicit.redact("pw-123") == "***"
    trusted = Credentials.from_env(
        {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-req"}
    )
    assert trusted.trusted_publishing and trusted.available
    assert trusted.redact("oidc-req") == "***"
    assert not Credentials.from_env({}).available
    assert "pw-123" not in repr(explicit)


@pytest.mark.parametrize(
    ("upload", "simple"),
    [
        ("https://upload.pypi.org/legacy/", "https://pypi.org/simple/"),
        ("https://upload.pypi.org/legacy", "https://pypi.org/simple/"),
        ("https://test.pypi.org/legacy/", "https://test.pypi.org/simple/"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/simple/"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/simple/"),
    ],
)
def test_simple_url_for(upload: str, simple: str) -> None:
    assert index.simple_url_for(upload) == simple


def test_simple_url_unknown_asks_for_index_url() -> None:
    with pytest.raises(UsageError, match="--index-url"):
        index.simple_url_for("https://pypi.example.org/upload/")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/",
        "http://127.1.2.3/",
        "http://[::1]:8080/",
        "http://localhost/",
        "https://x.org/",
    ],
)
def test_transport_allowed(url: str) -> None:
    index.check_transport(url)


@pytest.mark.parametrize(
    "url", ["http://example.org/", "http://10.0.0.1/", "ftp://127.0.0.1/", "http://user:pw@x.org/"]
)
def test_transport_refused(url: str) -> None:
    with pytest.raises(UsageError) as info:
        index.check_transport(url)
    assert "pw" not in str(info.value)


def test_parse_html_and_json() -> None:
    html = f"""<html><body><h1>Links</h1>
    <a href="../../packages/a-1.0-py3-none-any.whl#sha256={"AB" * 32}">a-1.0-py3-none-any.whl</a><br>
    <a href="https://files/b-1.0.tar.gz#md5=123">b-1.0.tar.gz</a>
    <a href="/c/c-2.0-py3-none-any.whl">c-2.0-py3-none-any.whl</a>
    </body></html>"""
    assert index.parse_html(html) == [
        index.IndexFile("a-1.0-py3-none-any.whl", "ab" * 32),
        index.IndexFile("b-1.0.tar.gz", None),
        index.IndexFile("c-2.0-py3-none-any.whl", None),
    ]
    data = json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "name": "a",
            "files": [
                {"filename": "a-1.0.whl", "url": "u", "hashes": {"sha256": "AA" * 32}},
                {"filename": "a-1.1.whl", "url": "u", "hashes": {}},
            ],
        }
    )
    assert index.parse_json(data) == [
        index.IndexFile("a-1.0.whl", "aa" * 32),
        index.IndexFile("a-1.1.whl", None),
    ]


def test_an_index_that_lists_another_sha256_fails_the_upload(tmp_path: Path, fake: FakeIndex) -> None:
    c = candidate(tmp_path, "pkg")

    def accept_other(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
        fake.files[c.filename] = "f" * 64
        return 0, "Uploading\n"

    up = uploader(fake, [])
    up.runner = accept_other
    with pytest.raises(PublishError) as info:
        up.upload(c)
    assert "f" * 64 in str(info.value) and c.sha256 in str(info.value)


def test_a_wheel_swapped_while_twine_runs_stops_naming_both_digests(tmp_path: Path, fake: FakeIndex) -> None:
    c = candidate(tmp_path, "pkg")

    def swap(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
        c.path.write_bytes(b"swapped")
        return fake.run(cmd, env)

    up = uploader(fake, [])
    up.runner = swap
    with pytest.raises(PublishError) as info:
        up.upload(c)
    assert c.sha256 in str(info.value) and hashlib.sha256(b"swapped").hexdigest() in str(info.value)


def test_a_duplicate_400_is_listed_again_not_final(tmp_path: Path, fake: FakeIndex) -> None:
    c = candidate(tmp_path, "pkg")

    def other_publish_won(cmd: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
        fake.files[c.filename] = c.sha256  # a concurrent publish uploaded the same bytes
        return 1, "ERROR HTTPError: 400 Bad Request from http://idx/\nBad Request\n"

    up = uploader(fake, [], tries=1)
    up.runner = other_publish_won
    assert up.upload(c).status == "uploaded"


def test_terminal_escapes_never_reach_our_errors(tmp_path: Path, fake: FakeIndex) -> None:
    c = candidate(tmp_path, "pkg")
    up = uploader(fake, [], tries=1)
    up.runner = lambda cmd, env: (1, "\x1b[31mERROR\x1b[0m \x1b]0;owned\x07boom\r\n")
    with pytest.raises(PublishError) as info:
        up.upload(c)
    assert "\x1b" not in str(info.value) and "\x07" not in str(info.value) and "boom" in str(info.value)
