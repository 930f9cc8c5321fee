"""`python -m release publish` against a real index (pypiserver), with faults injected.

Every fault case ends by comparing the index (on disk and over the simple API) with the
expected files and their sha256.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from release.errors import PublishError
from release.publish import index
from release.publish.upload import Credentials, Uploader
from tests.integration.conftest import HOST_HIP_PYTHONS, fresh_venv, processes_naming
from tests.integration.publish_support import (
    USER,
    FaultProxy,
    HostileIndex,
    IndexServer,
    drip,
    expected_files,
    flood,
    gh_calls,
    index_server,
    json_page,
    make_wheel,
    make_wheelhouse,
    raw,
    relay,
    run_release,
    send,
    sha256_file,
    wheel_name,
    write_fake_gh,
    write_matrix,
    write_report,
)

pytestmark = pytest.mark.integration
__all__ = ["index_server"]  # the fixture, imported so pytest sees it

FAST = ("--tries", "3", "--backoff", "0.2")


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny matrix (cpu, rocm x 3.10, 3.13) and its complete wheelhouse."""
    matrix = write_matrix(tmp_path)
    wheelhouse = make_wheelhouse(tmp_path / "wheelhouse")
    return matrix, wheelhouse


def publish(
    matrix: Path,
    repository: str,
    *extra: str,
    env: dict[str, str] | None = None,
    tag: str = "v0.1.0",
    debug: bool = False,
) -> subprocess.CompletedProcess[str]:
    wheelhouse = str(matrix.parent / "wheelhouse")
    return run_release(
        "publish", "--tag", tag, "--repository", repository, "--wheelhouse", wheelhouse,
        *extra, matrix=matrix, env=env, debug=debug,
    )  # fmt: skip


def assert_index_is(server: IndexServer, expected: dict[str, str]) -> None:
    assert server.files() == expected
    assert server.listing() == expected


def test_publish_once_then_rerun_uploads_nothing(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    first = publish(matrix, index_server.url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count(" uploaded") >= 4
    assert_index_is(index_server, expected_files(wheelhouse))

    again = publish(matrix, index_server.url)
    assert again.returncode == 0, again.stderr
    assert "uploading" not in again.stdout
    assert again.stdout.count("skipped (already there)") == 4
    assert "nothing to upload: all 4 file(s) were already on" in again.stdout
    assert_index_is(index_server, expected_files(wheelhouse))


def test_dry_run_says_what_and_where_without_uploading(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    one = sorted(wheelhouse.glob("cpu/*.whl"))[0]
    shutil.copy(one, index_server.packages / one.name)
    result = publish(matrix, index_server.url, "--dry-run", env={"TWINE_PASSWORD": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("would upload") == 3
    assert f"{one.name}" in result.stdout
    assert "would skip (already there)" in result.stdout
    assert f"3 file(s) would be uploaded to {index_server.url}, 1 already there" in result.stdout
    assert index_server.files() == {one.name: sha256_file(one)}


def test_server_killed_mid_run_then_rerun_completes(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    expected = expected_files(wheelhouse)
    killed = threading.Event()

    def kill_after_first_upload() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            on_disk = index_server.files() if index_server.packages.exists() else {}
            if any(expected.get(name) == sha for name, sha in on_disk.items()):
                index_server.kill()
                killed.set()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=kill_after_first_upload, daemon=True)
    watcher.start()
    interrupted = publish(matrix, index_server.url, *FAST)
    watcher.join(timeout=5)
    assert killed.is_set()
    assert interrupted.returncode == 8
    assert "re-run" in interrupted.stderr
    landed = index_server.files()
    assert 1 <= len(landed) < 4
    assert all(expected[name] == sha for name, sha in landed.items())

    index_server.start()  # same directory, same port
    rerun = publish(matrix, index_server.url, *FAST)
    assert rerun.returncode == 0, rerun.stderr
    rows = {line.split()[0]: line for line in rerun.stdout.splitlines() if ".whl  " in line}
    for name in expected:
        assert ("skipped (already there)" in rows[name]) == (name in landed), rows[name]
    assert_index_is(index_server, expected)


def test_connection_cut_in_the_middle_of_a_file(tmp_path: Path, index_server: IndexServer) -> None:
    matrix = write_matrix(tmp_path)
    wheelhouse = make_wheelhouse(tmp_path / "wheelhouse", payload_size=200_000)
    proxy = FaultProxy(index_server.port, cut_after=100_000)
    try:
        result = publish(matrix, proxy.url, "--index-url", index_server.simple, *FAST)
    finally:
        proxy.close()
    assert result.returncode == 0, result.stdout + result.stderr
    assert proxy.faults == 1
    assert "try 1/3 failed" in result.stdout
    assert_index_is(index_server, expected_files(wheelhouse))


def test_upload_landed_but_answer_lost_is_recognised(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    proxy = FaultProxy(index_server.port, drop_response=True)
    try:
        result = publish(matrix, proxy.url, "--index-url", index_server.simple, *FAST)
    finally:
        proxy.close()
    assert result.returncode == 0, result.stdout + result.stderr
    assert proxy.faults == 1
    assert "confirmed on the index after an interrupted try" in result.stdout
    assert "conflict" not in result.stdout
    assert_index_is(index_server, expected_files(wheelhouse))


def test_index_that_keeps_partial_uploads_is_never_overwritten(tmp_path: Path) -> None:
    """pypiserver itself (without the strict wrapper) stores the part that arrived."""
    matrix = write_matrix(tmp_path)
    wheelhouse = make_wheelhouse(tmp_path / "wheelhouse", payload_size=200_000)
    server = IndexServer(tmp_path / "index", strict=False)
    server.workdir.mkdir()
    server.start()
    proxy = FaultProxy(server.port, cut_after=100_000)
    try:
        result = publish(matrix, proxy.url, "--index-url", server.simple, *FAST)
        partial = server.files()
    finally:
        proxy.close()
        server.stop()
    first = sorted(expected_files(wheelhouse))[0]
    assert result.returncode == 8
    assert f"{first}: the index now holds a different file under this name" in result.stderr
    assert list(partial) == [first]
    assert partial[first] != expected_files(wheelhouse)[first]


def test_conflicting_file_on_index_stops_before_any_upload(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, _ = project
    name = wheel_name("xfer-engine-rocm", "0.1.0", "3.13")
    other = make_wheel(
        index_server.workdir / "other", "xfer-engine-rocm", "0.1.0", "3.13", payload=b"# other\n"
    )
    shutil.copy(other, index_server.packages / name)
    result = publish(matrix, index_server.url)
    assert result.returncode == 8
    assert name in result.stderr
    assert "nothing was uploaded" in result.stderr
    assert_index_is(index_server, {name: sha256_file(other)})


def test_missing_python_uploads_nothing(project: tuple[Path, Path], index_server: IndexServer) -> None:
    matrix, wheelhouse = project
    missing = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.13")
    missing.unlink()
    Path(str(missing) + ".verify.json").unlink()
    result = publish(matrix, index_server.url)
    assert result.returncode == 8
    assert "missing cp313-rocm-manylinux_x86_64 (Python 3.13)" in result.stderr
    assert index_server.files() == {}


def test_wheel_renamed_to_another_variant_uploads_nothing(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    cpu = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.10")
    rocm = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.10")
    shutil.copy(cpu, rocm)
    write_report(rocm, "rocm", "xfer-engine-rocm")  # even with a matching report
    result = publish(matrix, index_server.url)
    assert result.returncode == 8
    assert f"rocm/{rocm.name}: its METADATA says xfer-engine-cpu 0.1.0: the file was renamed" in result.stderr
    assert index_server.files() == {}


def test_tag_that_does_not_match_the_wheels(project: tuple[Path, Path], index_server: IndexServer) -> None:
    matrix, _ = project
    result = publish(matrix, index_server.url, tag="v0.2.0")
    assert result.returncode == 8
    assert result.stderr.count("does not match the tag's version 0.2.0") == 4
    assert result.stderr.count("missing cp3") == 4
    assert index_server.files() == {}


def test_every_problem_is_listed_at_once(project: tuple[Path, Path], index_server: IndexServer) -> None:
    matrix, wheelhouse = project
    (wheelhouse / "cpu" / "notes.txt").write_text("stray")
    bad = wheelhouse / "cpu" / wheel_name("xfer-engine-cpu", "0.1.0", "3.13")
    write_report(bad, "cpu", "xfer-engine-cpu", ok=False)
    unverified = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.10")
    Path(str(unverified) + ".verify.json").unlink()
    nodesc = wheelhouse / "rocm" / wheel_name("xfer-engine-rocm", "0.1.0", "3.13")
    _rewrite_without_description(nodesc)  # twine check --strict refuses a missing long description
    write_report(nodesc, "rocm", "xfer-engine-rocm")
    result = publish(matrix, index_server.url)
    assert result.returncode == 8
    err = result.stderr
    assert "cpu/notes.txt: unknown file" in err
    assert f"cpu/{bad.name}.verify.json: not releasable (failed or warned: vendored-runtime)" in err
    assert f"rocm/{unverified.name}: no verify report" in err
    assert "twine check --strict failed" in err
    assert index_server.files() == {}


def _rewrite_without_description(wheel: Path) -> None:
    import zipfile

    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/METADATA"):
                data = data.split(b"Description-Content-Type")[0]
            dst.writestr(info, data)
    tmp.replace(wheel)


def test_wrong_password_is_a_clear_message_and_uploads_nothing(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, _ = project
    wrong = "wr0ng-Passw0rd-xyz"
    result = publish(matrix, index_server.url, env={"TWINE_PASSWORD": wrong})
    assert result.returncode == 8
    assert f"the index refused the credentials (HTTP 403) for {USER} at {index_server.url}" in result.stderr
    assert "nothing was uploaded" in result.stderr
    assert wrong not in result.stdout + result.stderr
    assert index_server.files() == {}


def test_token_from_pypi_api_token_is_never_printed(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, _ = project
    token = "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZg-not-a-real-token"
    env = {"TWINE_USERNAME": "", "TWINE_PASSWORD": "", "PYPI_API_TOKEN": token}
    result = publish(matrix, index_server.url, env=env, debug=True)
    assert result.returncode == 8
    assert "for __token__ at" in result.stderr
    assert token not in result.stdout + result.stderr


def test_plain_http_elsewhere_is_refused(project: tuple[Path, Path]) -> None:
    matrix, _ = project
    result = publish(matrix, "http://example.org/legacy/", "--index-url", "http://example.org/simple/")
    assert result.returncode == 2
    assert "refusing plain-HTTP repository http://example.org/legacy/" in result.stderr


@pytest.mark.slow
def test_end_to_end_with_built_wheels(
    host_wheelhouse: tuple[Path, Path], index_server: IndexServer, tmp_path: Path
) -> None:
    """The real wheels of the session's `host_wheelhouse` fixture: publish, install, selftest."""
    matrix_path, built = host_wheelhouse
    # A copy: the session's wheelhouse is shared; the release flow verifies it in release mode.
    wheelhouse = tmp_path / "wheelhouse"
    shutil.copytree(built, wheelhouse)
    verify = run_release(
        "verify", "--release", "--write-reports", str(wheelhouse), matrix=matrix_path, timeout=300
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    expected = expected_files(wheelhouse)
    args = ("publish", "--tag", "v0.1.0", "--repository", index_server.url, "--wheelhouse", str(wheelhouse))
    first = run_release(*args, matrix=matrix_path, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert_index_is(index_server, expected)
    again = run_release(*args, matrix=matrix_path, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"nothing to upload: all {len(expected)} file(s) were already on" in again.stdout

    from release.config import matrix as matrix_mod
    from release.machine.interpreters import require_interpreter

    loaded = matrix_mod.load(matrix_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    for name, variant in loaded.matrix.variants.items():
        for py in loaded.matrix.python:
            venv = tmp_path / f"venv-{name}-{py}"
            fresh_venv(require_interpreter(py), venv)
            python = str(venv / "bin" / "python")
            install = subprocess.run(
                [python, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
                 "--index-url", index_server.simple, f"{variant.distribution}==0.1.0"],
                capture_output=True, text=True, env=env, check=False,
            )  # fmt: skip
            assert install.returncode == 0, install.stdout + install.stderr
            if name == "rocm" and py not in HOST_HIP_PYTHONS:
                # This host's HIP 5.2 asks for an executable stack, which the C library of a Python
                # that brings its own (3.14, Debian sid's) refuses: its ROCm legs run in the images.
                continue
            selftest = subprocess.run(
                [python, "-m", loaded.matrix.engine.import_name, "selftest", "--json"],
                capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
            )  # fmt: skip
            assert selftest.returncode == 0, f"{name} {py}: {selftest.stdout}{selftest.stderr}"
            assert json.loads(selftest.stdout)["ok"] is True


def test_twine_is_the_one_this_interpreter_runs() -> None:
    """Trusted publishing needs twine >= 6.1 (it mints the token itself in GitHub Actions)."""
    out = subprocess.run(
        [sys.executable, "-m", "twine", "--version"], capture_output=True, text=True, check=True
    )
    major, minor = (int(x) for x in out.stdout.split("twine version ")[1].split(".")[:2])
    assert (major, minor) >= (6, 1)


def test_prerelease_skipped_as_the_matrix_says(project: tuple[Path, Path]) -> None:
    matrix, _ = project  # the tiny matrix says prerelease: skip
    result = run_release("publish", "--tag", "v0.2.0rc1", matrix=matrix)
    assert result.returncode == 0, result.stderr
    assert "0.2.0rc1 is a pre-release and publish.prerelease is skip: nothing is published" in result.stdout


# ------------------------------------------------------------------------------------------------
# A hostile index: every broken answer is retried, then one error line; no answer is unbounded

JSON = "application/vnd.pypi.simple.v1+json"
OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n"

BROKEN = {
    "bad-status-line": raw(b"SPDY/9 what\r\n\r\n"),
    "no-status-line": raw(b"\x00\x01\x02 binary garbage\r\n\r\n"),
    "over-long-header": raw(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"),
    "too-many-headers": raw(b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 150 + b"\r\n"),
    "incomplete-body": raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 900\r\n\r\n<a>"),
    "broken-chunks": raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"),
    "hang-up": raw(b""),
    "server-error": send("502 Bad Gateway", {}, b"upstream down"),
}


def _one_error_line(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert [line for line in stderr.splitlines() if line.startswith("error:")] == stderr.splitlines()[:1]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_answers_are_retried_then_reported(project: tuple[Path, Path], name: str) -> None:
    matrix, _ = project
    with HostileIndex(BROKEN[name]) as hostile:
        result = publish(matrix, "http://127.0.0.1:9/", "--index-url", hostile.simple, *FAST)
        connections = hostile.connections
    assert result.returncode == 8, result.stdout + result.stderr
    _one_error_line(result.stderr)
    assert f"cannot read {hostile.simple}xfer-engine-cpu/" in result.stderr
    assert "re-run when the index answers" in result.stderr
    assert result.stdout.count("retrying in") == 2
    assert connections == 3  # --tries 3


def test_a_broken_answer_then_a_good_one_publishes(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    with HostileIndex(BROKEN["bad-status-line"], relay(index_server.url)) as hostile:
        result = publish(matrix, index_server.url, "--index-url", hostile.simple, *FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "try 1/3 failed: cannot read" in result.stdout
    assert "not an HTTP answer (bad status line)" in result.stdout
    assert index_server.files() == expected_files(wheelhouse)


MALFORMED = {
    "a-list": send("200 OK", {"Content-Type": JSON}, b"[]"),
    "null": send("200 OK", {"Content-Type": JSON}, b"null"),
    "files-of-strings": send("200 OK", {"Content-Type": JSON}, b'{"files": ["x"]}'),
    "integer-sha256": send(
        "200 OK", {"Content-Type": JSON}, b'{"files": [{"filename": "a.whl", "hashes": {"sha256": 5}}]}'
    ),
    "deep-nesting": send("200 OK", {"Content-Type": JSON}, b"[" * 200_000 + b"]" * 200_000),
    "bad-html-digest": send("200 OK", {"Content-Type": "text/html"}, b'<a href="a.whl#sha256=zz">a.whl</a>'),
    "a-picture": send("200 OK", {"Content-Type": "image/png"}, b"\x89PNG"),
    "declared-1.2-gb": raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1200000000\r\n\r\n" + b"0" * 65536
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_answers_not_shaped_like_the_simple_api_are_one_line(project: tuple[Path, Path], name: str) -> None:
    matrix, _ = project
    with HostileIndex(MALFORMED[name]) as hostile:
        result = publish(matrix, "http://127.0.0.1:9/", "--index-url", hostile.simple, *FAST)
        connections = hostile.connections
    assert result.returncode == 8, result.stdout + result.stderr
    _one_error_line(result.stderr)
    assert len(result.stderr.splitlines()) == 1
    assert f"error: {hostile.simple}xfer-engine-cpu/ answered " in result.stderr
    assert connections == 1  # not a transport failure: not retried


@pytest.mark.parametrize(
    "behaviour",
    [
        drip(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: "),  # headers never end
        drip(OK_HEAD + b"<html>"),  # the body never ends
    ],
    ids=["dripping-headers", "dripping-body"],
)
def test_a_dripping_index_meets_the_total_deadline(behaviour: Callable[..., None]) -> None:
    """One byte every 0.5 s: each read is quick, the request as a whole is not."""
    with HostileIndex(behaviour) as hostile:
        started = time.monotonic()
        with pytest.raises(index.IndexUnavailable, match="no complete answer within 2s"):
            index.list_files(hostile.simple, "demo", timeout=2)
        assert time.monotonic() - started < 5

        log: list[str] = []
        uploader = Uploader(
            repository="http://127.0.0.1:9/",
            index_url=hostile.simple,
            credentials=Credentials.from_env({}),
            tries=2,
            backoff=0.1,
            log=log.append,
        )
        uploader.list = lambda project: index.list_files(hostile.simple, project, timeout=1)  # type: ignore[method-assign]
        started = time.monotonic()
        with pytest.raises(index.IndexUnavailable):
            uploader.listing(["demo"])
        assert time.monotonic() - started < 5
        assert "try 1/2 failed" in log[0]


def test_an_endless_body_is_cut_at_the_cap() -> None:
    """No Content-Length, a stream of zeros: memory stays near the cap, not the stream."""
    with HostileIndex(flood(OK_HEAD, 1200 << 20)) as hostile:
        tracemalloc.start()
        try:
            with pytest.raises(PublishError, match="answered more than 4,194,304 bytes"):
                index.list_files(hostile.simple, "demo", max_bytes=4 << 20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 24 << 20


def test_a_password_with_a_slash_is_never_printed(project: tuple[Path, Path]) -> None:
    matrix, _ = project
    for repository in ("http://user:pa/ss-Word9@127.0.0.1:8080/", "http://user:p@ss-Word9@127.0.0.1:9/"):
        result = publish(matrix, repository, "--index-url", "http://127.0.0.1:9/simple/", *FAST, debug=True)
        assert result.returncode in (2, 8), result.stdout + result.stderr
        assert "Word9" not in result.stdout + result.stderr


# ------------------------------------------------------------------------------------------------
# `release github-release` against a stand-in gh: add what is missing, never replace an asset

REPO = "acme/xfer"


def github_release(
    matrix: Path, gh: Path, *paths: Path, tag: str = "v0.1.0", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    args = ("github-release", "--tag", tag, "--repo", REPO, "--gh", str(gh), *map(str, paths))
    return run_release(*args, matrix=matrix, env=env)


def release_files(root: Path, tag: str = "v0.1.0") -> dict[str, str]:
    directory = root / REPO / tag
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir()) if p.name != ".release.json"}


def local_files(wheelhouse: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(wheelhouse.glob("*/*")) if p.is_file()}


def commands(calls: list[list[str]]) -> list[str]:
    return [call[1] for call in calls]


def test_github_release_is_created_then_a_rerun_adds_nothing(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    matrix, wheelhouse = project
    gh, root = write_fake_gh(tmp_path / "gh")
    first = github_release(matrix, gh, wheelhouse)
    assert first.returncode == 0, first.stdout + first.stderr
    assert release_files(root) == local_files(wheelhouse)
    assert len(release_files(root)) == 8  # 4 wheels, 4 verify reports
    assert commands(gh_calls(root)) == ["view", "create"]
    create = gh_calls(root)[1]
    assert {"--verify-tag", "--generate-notes"} <= set(create) and "--prerelease" not in create
    assert f"{REPO} v0.1.0: 8 added, 0 already there" in first.stdout

    again = github_release(matrix, gh, wheelhouse)
    assert again.returncode == 0, again.stdout + again.stderr
    assert commands(gh_calls(root)) == ["view", "create", "view"]
    assert again.stdout.count("already there") == 9
    assert release_files(root) == local_files(wheelhouse)


def test_a_missing_asset_is_added_without_clobber(project: tuple[Path, Path], tmp_path: Path) -> None:
    matrix, wheelhouse = project
    gh, root = write_fake_gh(tmp_path / "gh")
    assert github_release(matrix, gh, wheelhouse).returncode == 0
    lost = sorted((root / REPO / "v0.1.0").glob("*.whl"))[0]
    lost.unlink()
    result = github_release(matrix, gh, wheelhouse)
    assert result.returncode == 0, result.stdout + result.stderr
    upload = gh_calls(root)[-1]
    assert upload[:3] == ["release", "upload", "v0.1.0"]
    assert [Path(a).name for a in upload[3:] if a.endswith(".whl")] == [lost.name]
    assert not any("--clobber" in call for call in gh_calls(root))
    assert release_files(root) == local_files(wheelhouse)


def test_an_asset_that_differs_stops_the_run_before_any_upload(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    matrix, wheelhouse = project
    gh, root = write_fake_gh(tmp_path / "gh")
    assert github_release(matrix, gh, wheelhouse).returncode == 0
    assets = sorted((root / REPO / "v0.1.0").glob("*.whl"))
    changed, lost = assets[0], assets[1]
    changed.write_bytes(bytes(b ^ 1 for b in changed.read_bytes()))  # same size, other bytes
    lost.unlink()
    before = release_files(root)
    result = github_release(matrix, gh, wheelhouse)
    assert result.returncode == 8
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: 1 asset(s) of release v0.1.0 in acme/xfer differ")
    assert f"  - {changed.name}: sha256 " in result.stderr
    assert lost.name not in result.stderr
    assert commands(gh_calls(root))[-1] == "view"  # nothing uploaded, not even the missing one
    assert release_files(root) == before


def test_without_digests_the_asset_is_downloaded_and_hashed(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    matrix, wheelhouse = project
    gh, root = write_fake_gh(tmp_path / "gh")
    assert github_release(matrix, gh, wheelhouse).returncode == 0
    older_github = {"FAKE_GH_NO_DIGEST": "1"}
    same = github_release(matrix, gh, wheelhouse, env=older_github)
    assert same.returncode == 0, same.stdout + same.stderr
    assert commands(gh_calls(root)).count("download") == 8

    assets = sorted((root / REPO / "v0.1.0").glob("*.whl"))
    assets[0].write_bytes(bytes(b ^ 1 for b in assets[0].read_bytes()))
    assets[1].write_bytes(assets[1].read_bytes() + b"longer")
    result = github_release(matrix, gh, wheelhouse, env=older_github)
    assert result.returncode == 8
    assert f"  - {assets[0].name}: sha256 " in result.stderr
    assert f"  - {assets[1].name}: {assets[1].stat().st_size:,} bytes on the release" in result.stderr


def test_a_prerelease_tag_makes_a_prerelease(project: tuple[Path, Path], tmp_path: Path) -> None:
    matrix, wheelhouse = project
    gh, root = write_fake_gh(tmp_path / "gh")
    result = github_release(matrix, gh, wheelhouse, tag="v0.2.0rc1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--prerelease" in gh_calls(root)[-1]


def test_gh_missing_or_failing_is_one_line(project: tuple[Path, Path], tmp_path: Path) -> None:
    matrix, wheelhouse = project
    missing = github_release(matrix, tmp_path / "no-such-gh", wheelhouse)
    assert missing.returncode == 4
    hint = "not found (install the GitHub CLI, or pass --gh PATH)"
    assert missing.stderr == f"error: {tmp_path / 'no-such-gh'}: {hint}\n"

    broken = tmp_path / "gh-broken"
    broken.write_text("#!/bin/sh\necho 'HTTP 401: Bad credentials (https://api.github.com)' >&2; exit 1\n")
    broken.chmod(0o755)
    result = github_release(matrix, broken, wheelhouse, env={"GH_TOKEN": "ghp-secret-token"})
    assert result.returncode == 8
    assert result.stderr.startswith("error: gh release view failed for acme/xfer v0.1.0: HTTP 401: Bad")
    assert len(result.stderr.splitlines()) == 1


def test_a_silent_index_fails_the_upload_within_its_deadline(tmp_path: Path) -> None:
    """The listing answers; the upload is never answered: twine is stopped at --upload-timeout."""
    wheel = make_wheel(tmp_path, "xfer-engine-cpu", "0.1.0", "3.12")
    sha = sha256_file(wheel)
    from release.publish.upload import Candidate

    c = Candidate("cp312-cpu", "cpu", "xfer-engine-cpu", wheel, sha)
    silent: Callable[..., None] = lambda conn, path: time.sleep(30)  # noqa: E731
    with HostileIndex(silent, json_page()) as stub:  # twine's POST first, then listings
        env = {"TWINE_USERNAME": "u", "TWINE_PASSWORD": "p4ss", "PATH": os.environ["PATH"]}
        creds = Credentials.from_env(env)
        up = Uploader(
            repository=f"http://127.0.0.1:{stub.port}/", index_url=stub.simple, credentials=creds,
            tries=1, upload_timeout=3.0, index_timeout=3.0, log=lambda text: None,
        )  # fmt: skip
        started = time.monotonic()
        with pytest.raises(PublishError, match="no answer within 3s"):
            up.upload(c)
        assert time.monotonic() - started < 15
        assert "twine" in up.totals()


# ------------------------------------------------------------------------------------------------
# Issue 31: one redactor, every wait bounded (also after a signal), nothing unverified trusted


def _secret_forms(user: str, secret: str) -> list[str]:
    import base64
    import urllib.parse

    basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return [secret, urllib.parse.quote(secret, safe=""), basic, basic[4:-4]]


@pytest.mark.parametrize("credential", ["password", "token"])
def test_an_index_echoing_every_header_never_gets_a_secret_printed(
    project: tuple[Path, Path], credential: str
) -> None:
    """twine's error shows the index's reason, which here holds `Authorization: Basic base64(user:pw)`."""
    from tests.integration.publish_support import PASSWORD, echo_headers

    matrix, _ = project
    token = "pypi-AgEIcHlwaS5vcmcCJGRlYWRiZWVmLWVjaG9lZC1ieS10aGUtaW5kZXg"
    env = {"TWINE_PASSWORD": "", "PYPI_API_TOKEN": token} if credential == "token" else None
    user, secret = ("__token__", token) if credential == "token" else (USER, PASSWORD)
    with HostileIndex(echo_headers()) as echo:
        result = publish(matrix, f"http://127.0.0.1:{echo.port}/", "--index-url", echo.simple, *FAST, env=env)
    said = result.stdout + result.stderr
    assert result.returncode == 8, said
    assert "you sent" in said and "Authorization: ***" in said  # the echo arrived, redacted
    for form in _secret_forms(user, secret):
        assert form not in said, form


def _listed_without_hashes(wheelhouse: Path, same: bool = True) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if same else b"another file" for p in wheelhouse.glob("*/*.whl")}


def test_a_listing_without_hashes_is_confirmed_by_fetching_each_file(project: tuple[Path, Path]) -> None:
    from tests.integration.publish_support import files_without_hashes

    matrix, wheelhouse = project
    with HostileIndex(files_without_hashes(_listed_without_hashes(wheelhouse))) as stub:
        same = publish(matrix, f"http://127.0.0.1:{stub.port}/", "--index-url", stub.simple, "--dry-run")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "fetched and hashed" in same.stdout and "would upload" not in same.stdout


@pytest.mark.parametrize("served", ["another-file", "not-fetchable"])
def test_a_listing_without_hashes_is_never_a_confirmation(project: tuple[Path, Path], served: str) -> None:
    """Today: 'skipped (already there) … assumed identical', 0 uploads, exit 0."""
    from tests.integration.publish_support import files_without_hashes

    matrix, wheelhouse = project
    files = _listed_without_hashes(wheelhouse, same=served != "another-file")
    with HostileIndex(files_without_hashes(files, fetchable=served != "not-fetchable")) as stub:
        result = publish(matrix, f"http://127.0.0.1:{stub.port}/", "--index-url", stub.simple, *FAST)
    assert result.returncode == 8, result.stdout + result.stderr
    _one_error_line(result.stderr)
    assert "assumed identical" not in result.stdout + result.stderr
    assert ("different content" if served == "another-file" else "cannot confirm") in result.stderr



@pytest.mark.parametrize("signum", [15, 2])
def test_a_signal_during_the_upload_stops_and_reaps_twine(project: tuple[Path, Path], signum: int) -> None:
    """Today twine, in its own session and untracked, ran on for 600 s after SIGTERM."""
    import signal as signals

    matrix, _ = project
    posted = threading.Event()

    def silent(conn: object, path: str, request: bytes) -> None:
        if request.startswith(b"POST"):
            posted.set()
            time.sleep(120)  # never answers the upload
        else:
            json_page()(conn, path)  # type: ignore[arg-type]

    silent.wants_request = True  # type: ignore[attr-defined]
    with HostileIndex(silent) as stub:
        repository = f"http://127.0.0.1:{stub.port}/"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TWINE_", "PYPI_", "GITHUB_", "ACTIONS_"))
        }
        env.update({"TWINE_USERNAME": USER, "TWINE_PASSWORD": "pw-for-signal", "PYTHONPATH": str(Path.cwd())})
        cmd = [
            sys.executable, "-m", "release", "--matrix", str(matrix), "publish", "--tag", "v0.1.0",
            "--repository", repository, "--index-url", stub.simple, "--upload-timeout", "600",
            "--wheelhouse", str(matrix.parent / "wheelhouse"), "--tries", "1",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert posted.wait(120), "twine never started the upload"
            proc.send_signal(signum)
            _out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 128 + signum, err
        assert processes_naming(repository) == []  # twine and all under it: stopped and reaped
        assert ("terminated" if signum == signals.SIGTERM else "interrupted") in err
