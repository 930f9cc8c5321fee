"""Issue 31's classes on the release path, without a process: one redactor for every form a
credential takes, only regular files read as wheels, locks that never follow links, bad tags in
one line, listings without hashes never trusted, manifests naming every file once."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from release.errors import BuildError, PublishError, UsageError
from release.machine.lock import LOCK_NAME, build_lock
from release.plan.version import version_from_tag
from release.publish import index, manifest, redact
from release.publish.upload import Candidate, Credentials, Uploader, classify
from release.wheel.archive import WheelReadError, read_metadata
from release.wheel.files import NotRegularFile, file_sha256, not_regular

USER, PASSWORD = "publisher", "s3cret-Pa55-for-tests"
TOKEN = "pypi-AgEIcHlwaS5vcmcCJGY3ZjQ5MDYwLTk0NmItNDk4"


def echoed_headers(user: str, password: str) -> str:
    """What an index that echoes every request header in its error reason says."""
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return (
        f"HTTPError: 400 Bad Request from http://127.0.0.1:1/\n"
        f"Bad Request: headers were {{'Authorization': 'Basic {basic}', 'User-Agent': 'twine'}} "
        f"Authorization: Basic {basic}; bearer: Bearer {password}; raw {password}; "
        f"url http://{user}:{urllib.parse.quote(password, safe='')}@127.0.0.1/ b64 {basic}"
    )


@pytest.mark.parametrize(
    ("user", "password"), [(USER, PASSWORD), ("__token__", TOKEN), ("u", "pw:with@odd/chars")]
)
def test_one_redactor_hides_every_form_of_the_secret(user: str, password: str) -> None:
    creds = Credentials.from_env({"TWINE_USERNAME": user, "TWINE_PASSWORD": password})
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    shown = creds.redact(echoed_headers(user, password))
    for form in (password, urllib.parse.quote(password, safe=""), basic, basic[4:-4]):
        assert form not in shown, shown
    assert "Authorization: ***; bearer: Bearer ***; raw ***" in shown and "'User-Agent': 'twine'" in shown


def test_the_redactor_hides_credentials_it_was_not_told_about() -> None:
    """An echoed header of a token of another run, a bearer token, a PyPI token by its prefix."""
    other = base64.b64encode(b"someone:their-password").decode()
    jwt = "eyJhbGciOiJFUzI1NiJ9.e30.sig"
    text = f"Authorization: Basic {other}\nreason: Bearer {jwt} and {TOKEN} and ghp_{'a' * 36}"
    shown = redact.redact_text(text)
    assert (
        other not in shown
        and "eyJhbGciOiJFUzI1NiJ9" not in shown
        and TOKEN not in shown
        and "ghp_" not in shown
    )
    assert (
        redact.redact_text("HTTP 400 Bad Request: File already exists")
        == "HTTP 400 Bad Request: File already exists"
    )


def test_base64_of_the_secret_is_hidden_at_any_alignment() -> None:
    hide = redact.Redactor.of([PASSWORD], USER)
    for before in ("", "a", "ab", "abc", "user:"):
        for after in ("", "z", "zz"):
            encoded = base64.b64encode(f"{before}{PASSWORD}{after}".encode()).decode()
            shown = hide(f"said {encoded}")
            # At most the partial groups at either end survive: never 6 consecutive secret bytes.
            decoded = base64.b64decode(shown.split()[1].replace("***", "") + "==", validate=False)
            assert PASSWORD[2:8].encode() not in decoded, (before, after, shown)


def test_github_release_errors_use_the_one_redactor() -> None:
    from release.publish import github_release as ghr

    token = "ghs_" + "b" * 36
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()

    def runner(cmd: Sequence[str]) -> tuple[int, str, str]:
        return 1, "", f"HTTP 401: echo Authorization: Basic {basic} / token {token}\n"

    release = ghr.GitHubRelease("gh", "acme/xfer", "v1.0.0", runner=runner, secrets=(token,))
    with pytest.raises(PublishError) as info:
        release.assets()
    assert token not in str(info.value) and basic not in str(info.value)


# -- only regular files are read as wheels -------------------------------------------------------


def test_a_fifo_or_a_device_named_like_a_wheel_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "x-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    os.mkfifo(fifo)  # nobody writes to it: opening it for reading would block for ever
    zero = tmp_path / "y-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    zero.symlink_to("/dev/zero")  # reading it never ends
    for path, kind in ((fifo, "a FIFO"), (zero, "a character device")):
        with pytest.raises(NotRegularFile) as info:
            file_sha256(path)
        assert info.value.kind == kind
        assert not_regular(path) == kind
        with pytest.raises(WheelReadError, match="not a regular file"):
            read_metadata(path)
    assert not_regular(tmp_path / "missing.whl") is not None


# -- locks never follow links -------------------------------------------------------------------


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n", encoding="utf-8")
    build = tmp_path / "build"
    build.mkdir()
    (build / ".publish.lock").symlink_to(precious)
    with (
        pytest.raises(PublishError, match="symbolic link") as info,
        build_lock(build, what="publishing", name=".publish.lock", error=PublishError, say=print),
    ):
        pass
    assert "\n" not in str(info.value)
    (build / LOCK_NAME).hardlink_to(precious)
    with pytest.raises(BuildError, match="2 names"), build_lock(build, what="the cpu build", say=print):
        pass
    assert precious.read_text(encoding="utf-8") == "keep me\n"


# -- bad tags end in one line -------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["v" + "9" * 5000, "v1." + "1" * 40, "v1.0" + ".0" * 200, "v1.0\n"])
def test_a_huge_or_odd_tag_is_one_usage_error(tag: str) -> None:
    with pytest.raises(UsageError) as info:
        version_from_tag(tag, "v*")
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


# -- a listing without hashes is never a confirmation --------------------------------------------


def _candidate(tmp_path: Path, content: bytes = b"wheel bytes") -> Candidate:
    path = tmp_path / "a-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    path.write_bytes(content)
    return Candidate("cp312-a", "a", "a", path, hashlib.sha256(content).hexdigest())


def test_a_listed_name_without_a_hash_is_not_skipped(tmp_path: Path) -> None:
    c = _candidate(tmp_path)
    status, note = classify({c.filename: None}, c)
    assert status == "unverified" and "no sha256" in note


def _uploader(fetched: Mapping[str, bytes], listing: dict[str, str | None], log: list[str]) -> Uploader:
    up = Uploader(
        repository="https://upload.example/legacy/", index_url="https://example/simple/",
        credentials=Credentials.from_env({"TWINE_USERNAME": "u", "TWINE_PASSWORD": "pw-123"}),
        runner=lambda cmd, env: (0, "ok"), sleep=lambda s: None, log=log.append, tries=1,
    )  # fmt: skip
    up.list = lambda project: dict(listing)  # type: ignore[method-assign]
    up.fetch_sha256 = lambda project, name: (  # type: ignore[method-assign]
        hashlib.sha256(fetched[name]).hexdigest() if name in fetched else None
    )
    return up


def test_a_listing_without_hashes_is_confirmed_by_fetching_the_file(tmp_path: Path) -> None:
    from release.publish.preflight import publish

    c = _candidate(tmp_path)
    log: list[str] = []
    same = publish([c], _uploader({c.filename: b"wheel bytes"}, {c.filename: None}, log))
    assert same[0].status == "skip" and "fetched" in same[0].note
    with pytest.raises(PublishError, match="different content"):
        publish([c], _uploader({c.filename: b"other bytes"}, {c.filename: None}, log))
    with pytest.raises(PublishError, match="cannot confirm"):
        publish([c], _uploader({}, {c.filename: None}, log))


def test_after_an_upload_no_hash_is_not_uploaded(tmp_path: Path) -> None:
    c = _candidate(tmp_path)
    log: list[str] = []
    up = _uploader({}, {c.filename: None}, log)
    with pytest.raises(PublishError, match="cannot confirm"):
        up.upload(c)
    good = _uploader({c.filename: b"wheel bytes"}, {c.filename: None}, log)
    assert good.upload(c).status == "uploaded"


def test_verify_release_listing_without_hashes_is_a_problem(tmp_path: Path) -> None:
    wheels = {"a.whl": {"name": "a.whl", "sha256": "0" * 64, "size": 1}}
    assert manifest.check_listing(wheels, {"a.whl": None})
    assert not manifest.check_listing(wheels, {"a.whl": "0" * 64})


# -- a manifest names every file once, by its full relative path -------------------------------


def _manifest(tmp_path: Path, files: list[dict[str, object]]) -> Path:
    path = tmp_path / "release-manifest.json"
    path.write_text(json.dumps({"manifest_version": 1, "wheels": files}), encoding="utf-8")
    return path


def _entry(rel: str, data: bytes) -> dict[str, object]:
    name = rel.rsplit("/", 1)[-1]
    return {"name": name, "path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def test_a_manifest_listing_a_name_twice_is_refused(tmp_path: Path) -> None:
    good = _entry("cpu/a-0.1.0-cp312-cp312-linux_x86_64.whl", b"a")
    bad = {**good, "sha256": "f" * 64}
    with pytest.raises(PublishError, match="twice"):
        manifest.load(_manifest(tmp_path, [bad, good]))


def test_verify_release_refuses_anything_extra_or_moved(tmp_path: Path) -> None:
    release = tmp_path / "release"
    (release / "cpu").mkdir(parents=True)
    name = "a-0.1.0-cp312-cp312-linux_x86_64.whl"
    (release / "cpu" / name).write_bytes(b"a")
    wheels = manifest.load(_manifest(tmp_path, [_entry(f"cpu/{name}", b"a")]))
    assert manifest.check_directory(wheels, release) == []
    (release / "install-helper.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    assert any("install-helper.sh" in p for p in manifest.check_directory(wheels, release))
    (release / "install-helper.sh").unlink()
    (release / "other").mkdir()
    (release / "other" / name).write_bytes(b"tampered")
    assert any(f"other/{name}" in p for p in manifest.check_directory(wheels, release))


def test_index_messages_pass_the_redactor() -> None:
    assert index.redact_text is redact.redact_text
