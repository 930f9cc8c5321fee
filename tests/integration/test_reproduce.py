"""`release reproduce` on real host-built cpu wheels (the session's host wheelhouse): a rebuild from
the manifest in a build root of its own gives the same bytes, and a published wheel with one
changed byte in its extension is named, member and ELF section."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from release.config.matrix import load
from release.inspect.elf import file_regions
from release.plan.steps import make_plan
from release.publish import handoff, manifest
from release.reproduce import inputs
from release.wheel.names import report_path
from release.wheel.rewrite import rewrite_wheel
from tests.integration.conftest import NEWEST, tag, toolkit


def _entry(wheel: Path, identifier: str) -> manifest.Entry:
    report = json.loads(report_path(wheel).read_text(encoding="utf-8"))
    return manifest.Entry(
        wheel.name, wheel.parent.name, str(report["distribution"]), wheel.stat().st_size,
        handoff.sha256_of(wheel), handoff.sha256_of(report_path(wheel)), identifier=identifier,
        compilers=tuple(report["compilers"]),
    )  # fmt: skip


def _one_byte_changed(wheel: Path, target: Path) -> str:
    """A copy of `wheel` whose extension has one byte of `.text` flipped; the member's name."""
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        data = bytearray(archive.read(member))
    offset, size = next((o, s) for name, o, s in file_regions(bytes(data)) if name == ".text")
    data[offset + size // 2] ^= 0x01
    rewrite_wheel(wheel, target, replace={member: bytes(data)})
    return member


def _unread(tag: str) -> inputs.ImagePackages:
    """A stand-in for reading a local image's packages: a host rebuild never compares them, and this
    test runs no container."""
    return inputs.ImagePackages(None, f"{tag}: not read (a host rebuild)")


def _reproduce(
    host_wheelhouse: tuple[Path, Path], tmp_path: Path, *, tampered: bool
) -> tuple[int, str, str, str]:
    """`release reproduce` of the newest Python's cpu wheel from a manifest of the session's host
    wheelhouse, published as built or with one byte changed: (exit code, output, wheel, member)."""
    matrix, wheelhouse = host_wheelhouse
    plan = make_plan(load(matrix))
    step = next(s for s in plan.builds if s.variant.name == "cpu" and s.python == NEWEST)
    built = next((wheelhouse / "cpu").glob(f"*-{tag(NEWEST)}-*.whl"))
    published = tmp_path / "published" / "cpu" / built.name
    published.parent.mkdir(parents=True)
    member = ""
    if tampered:
        member = _one_byte_changed(built, published)
    else:
        published.write_bytes(built.read_bytes())
    report_path(published).write_bytes(report_path(built).read_bytes())
    version = plan.loaded.matrix.engine.version  # what the fixture built with (no tag)
    document = manifest.assemble(
        [_entry(published, step.identifier)], plan.variants, tag=f"v{version}", version=version,
        inputs=inputs.collect(plan.loaded.root, plan.variants, packages=_unread),
    )  # fmt: skip
    path = manifest.write(tmp_path / "release-manifest.json", document)
    proc = toolkit(
        "--matrix", str(matrix), "reproduce", str(path), "--identifier", step.identifier,
        "--published", str(tmp_path / "published"), "--out", str(tmp_path / "out"), check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr, f"{step.identifier}  {built.name}", member


def test_a_cpu_wheel_rebuilds_from_its_manifest_identical(
    host_wheelhouse: tuple[Path, Path], tmp_path: Path
) -> None:
    code, out, row, _member = _reproduce(host_wheelhouse, tmp_path, tampered=False)
    assert code == 0, out
    assert next(line for line in out.splitlines() if line.startswith(row)).endswith("identical"), out
    assert "1 wheel(s) rebuilt from release-manifest.json: identical, byte for byte" in out


@pytest.mark.slow  # a second rebuild of the same wheel; the comparison itself is unit-tested
def test_a_changed_byte_of_a_published_wheel_is_named(
    host_wheelhouse: tuple[Path, Path], tmp_path: Path
) -> None:
    code, out, row, member = _reproduce(host_wheelhouse, tmp_path, tampered=True)
    assert code == 9, out
    assert next(line for line in out.splitlines() if line.startswith(row)).endswith("DIFFERS"), out
    assert "1 of 1 wheel(s) did not rebuild the same" in out
    assert f"  {member}: ELF parts differ: .text; first differing byte 0x" in out
