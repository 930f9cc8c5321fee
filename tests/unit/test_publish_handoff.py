"""The hand-off checks: a report re-validated, the bytes re-hashed, the manifest compared; and
verify's hash taken from exactly the bytes it read."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from release.errors import PublishError, VerifyError
from release.inspect import reader
from release.inspect.verify import verify_wheel
from release.publish import handoff, manifest
from tests.integration.publish_support import make_wheel, make_wheelhouse, write_matrix


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    write_matrix(root)
    make_wheelhouse(root / "wheelhouse")
    return root


@pytest.fixture
def wheelhouse(template: Path, tmp_path: Path) -> Path:
    shutil.copytree(template, tmp_path / "project")
    return tmp_path / "project" / "wheelhouse"


def first(wheelhouse: Path) -> tuple[Path, Path, dict[str, Any]]:
    wheel = sorted(wheelhouse.glob("cpu/*.whl"))[0]
    report = wheel.with_name(wheel.name + ".verify.json")
    return wheel, report, json.loads(report.read_text())


def test_a_good_report_vouches(wheelhouse: Path) -> None:
    wheel, _, _ = first(wheelhouse)
    assert handoff.check_wheel(wheel)[2] == []


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r.update(schema_version=999), "schema_version 999"),
        (lambda r: r.update(rules="x"), "not a list of rule results"),
        (lambda r: r.update(releasable=False), "says releasable False"),
        (lambda r: r.update(ok=False), "says ok False"),
        (lambda r: r.update(release_mode=False), "not a release-mode report"),
        (lambda r: r["rules"].pop(), "rules missing or repeated"),
        (lambda r: r["rules"][0].update(status="fail"), "not releasable"),
        (lambda r: r.update(sha256="0" * 64), "is not the wheel's sha256"),
    ],
)
def test_an_edited_report_does_not_vouch(wheelhouse: Path, edit: Any, needle: str) -> None:
    wheel, report, data = first(wheelhouse)
    edit(data)
    report.write_text(json.dumps(data))
    assert any(needle in p for p in handoff.check_wheel(wheel)[2])


def test_a_swapped_wheel_names_both_digests(wheelhouse: Path) -> None:
    wheel, _, data = first(wheelhouse)
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    problems = " ".join(handoff.check_wheel(wheel)[2])
    assert data["sha256"] in problems and hashlib.sha256(wheel.read_bytes()).hexdigest() in problems
    with pytest.raises(handoff.DigestMismatch) as info:
        handoff.require_digest(wheel, data["sha256"])
    assert data["sha256"] in str(info.value)


def test_a_fresh_verify_that_disagrees_is_named(wheelhouse: Path) -> None:
    wheel, _, data = first(wheelhouse)
    fresh = verify_wheel(wheel, release=True)
    assert any("outcome differs" in p for p in handoff.compare_outcome(data, fresh))


def test_manifest_round_trip_and_directory_check(wheelhouse: Path, tmp_path: Path) -> None:
    wheels = sorted(wheelhouse.glob("*/*.whl"))
    entries = []
    for wheel in wheels:
        report, digest, problems = handoff.check_wheel(wheel)
        assert report is not None and not problems
        entries.append(
            manifest.Entry(wheel.name, wheel.parent.name, str(report["distribution"]),
                           wheel.stat().st_size, str(report["sha256"]), digest)
        )  # fmt: skip
    path = manifest.write(tmp_path / "m.json", manifest.assemble(entries, {}, tag="v0.1.0", version="0.1.0"))
    listed = manifest.load(path)
    assert manifest.check_directory(listed, wheelhouse) == []
    extra = make_wheel(wheelhouse / "cpu", "xfer-engine-cpu", "0.1.0", "3.12")
    assert any("not in the manifest (refused)" in p for p in manifest.check_directory(listed, wheelhouse))
    extra.unlink()
    report = wheels[0].with_name(wheels[0].name + ".verify.json")
    report.write_text(report.read_text() + " ")
    assert any("report changed" in p for p in manifest.check_directory(listed, wheelhouse))
    other = {name: "f" * 64 for name in listed}
    assert all("f" * 64 in p for p in manifest.check_listing(listed, other))
    assert all("not listed" in p for p in manifest.check_listing(listed, {}))


def test_not_a_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"manifest_version": 2, "wheels": []}')
    with pytest.raises(PublishError, match="not a release manifest"):
        manifest.load(path)


def test_verify_hashes_the_bytes_it_read(wheelhouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel, _, data = first(wheelhouse)
    assert verify_wheel(wheel, release=True).sha256 == data["sha256"]
    original = reader._read_all

    def change_midway(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        with wheel.open("r+b") as fh:  # same size, other bytes: only a hash tells
            fh.seek(-1, 2)
            last = fh.read(1)
            fh.seek(-1, 2)
            fh.write(bytes([last[0] ^ 0xFF]))
        return result

    monkeypatch.setattr(reader, "_read_all", change_midway)
    with pytest.raises(VerifyError, match="changed while it was verified") as info:
        verify_wheel(wheel, release=True)
    assert data["sha256"] in str(info.value)


def _consistency(report: Any, status: str) -> Any:
    import dataclasses

    rules = tuple(dataclasses.replace(r, status=status) if r.id == "consistency" else r for r in report.rules)
    return dataclasses.replace(report, rules=rules)


def test_a_rule_across_the_release_judged_only_over_the_set_is_no_disagreement(wheelhouse: Path) -> None:
    """A build job verifies its wheel alone (consistency: not-applicable); preflight verifies the
    whole set, where consistency passes: that is not a report that disagrees. Any other change is."""
    wheel, _, data = first(wheelhouse)
    fresh = verify_wheel(wheel, release=True)
    alone = _consistency(fresh, "not-applicable")
    written = {**data, "rules": [r.to_json() for r in alone.rules]}
    assert all("outcome differs" not in p for p in handoff.compare_outcome(written, alone))
    problems = handoff.compare_outcome(written, _consistency(fresh, "pass"))
    assert not [p for p in problems if "outcome differs" in p], problems
    written["rules"] = [r.to_json() for r in _consistency(fresh, "pass").rules]
    problems = handoff.compare_outcome(written, alone)
    assert any("consistency 'pass' -> 'not-applicable'" in p for p in problems), problems
