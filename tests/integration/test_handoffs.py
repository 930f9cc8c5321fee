"""Published = verified: a wheel swapped, or a report edited, at each hand-off stops the release
naming both digests (release-checks, `dist/`, preflight, the index listing, a downloaded release)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.publish_support import (
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
