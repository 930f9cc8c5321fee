"""`release reproduce` without a compiler: the manifest's inputs, the wheel comparison (a changed
byte is named by member and ELF section), and the stage around a rebuild handed in as a function."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from release.config import matrix
from release.errors import ReproduceError, UsageError
from release.inspect.elf import file_regions
from release.plan.steps import BuildStep, make_plan
from release.publish import handoff, manifest
from release.reproduce import compare, inputs, rebuild
from release.wheel.rewrite import rewrite_wheel
from tests.hostile.builders import Section, elf_bytes
from tests.hostile.cases import init_py, make_wheel

ROOT = Path(__file__).resolve().parents[2]
LIB = "hostile/_core.so"
COMMIT = "a" * 40


def _library(**options: object) -> bytes:
    note = Section(
        ".note.gnu.build-id", 7, b"\x04\x00\x00\x00\x08\x00\x00\x00\x03\x00\x00\x00GNU\x00" + bytes(8)
    )
    return elf_bytes(extra_sections=(note,), **options)


def _wheels(tmp_path: Path, lib: bytes, changed: bytes) -> tuple[Path, Path]:
    """Two wheels written by the toolkit's wheel writer from one base: the library differs."""
    built = make_wheel([init_py()])
    base = tmp_path / "base" / built.filename
    base.parent.mkdir()
    base.write_bytes(built.data)
    one, two = tmp_path / "published" / built.filename, tmp_path / "rebuilt" / built.filename
    one.parent.mkdir()
    two.parent.mkdir()
    rewrite_wheel(base, one, add={LIB: lib})
    rewrite_wheel(base, two, add={LIB: changed})
    return one, two


def _section(data: bytes, name: str) -> tuple[int, int]:
    return next((offset, size) for n, offset, size in file_regions(data) if n == name)


def _changed_byte(data: bytes, section: str) -> bytes:
    offset, size = _section(data, section)
    changed = bytearray(data)
    changed[offset + size // 2] ^= 0xFF
    return bytes(changed)


def test_the_elf_parts_of_a_library_in_file_order() -> None:
    lib = _library()
    names = [name for name, _offset, _size in file_regions(lib)]
    assert names[0] == "ELF header"
    assert {".text", ".dynstr", ".note.gnu.build-id", "section headers"} <= set(names)
    offsets = [offset for _name, offset, _size in file_regions(lib)]
    assert offsets == sorted(offsets)


@pytest.mark.parametrize("section", [".text", ".note.gnu.build-id", ".dynstr"])
def test_one_changed_byte_names_the_member_and_the_section(tmp_path: Path, section: str) -> None:
    lib = _library()
    published, rebuilt = _wheels(tmp_path, lib, _changed_byte(lib, section))
    differences = compare.compare_wheels(published, rebuilt)
    members = [d.member for d in differences]
    assert LIB in members
    library = next(d for d in differences if d.member == LIB)
    assert library.sections == (section,)
    assert f"ELF parts differ: {section}; first differing byte 0x" in library.what
    assert f"({section})" in library.what
    # RECORD lists the library's new hash: it differs too, as plain content
    assert any(m.endswith(".dist-info/RECORD") for m in members)
    text = compare.describe(differences, published, rebuilt)
    assert text.startswith(f"{published.name}: the rebuild {rebuilt} differs:")
    assert f"  {LIB}: ELF parts differ: {section}" in text


def test_identical_wheels_have_no_differences(tmp_path: Path) -> None:
    lib = _library()
    published, rebuilt = _wheels(tmp_path, lib, lib)
    assert published.read_bytes() == rebuilt.read_bytes()
    assert compare.compare_wheels(published, rebuilt) == []


def test_a_time_stamp_and_a_member_only_in_one_wheel_are_named(tmp_path: Path) -> None:
    built = make_wheel([init_py()])
    base = tmp_path / built.filename
    base.write_bytes(built.data)
    extra = tmp_path / "extra" / built.filename
    extra.parent.mkdir()
    rewrite_wheel(base, extra, add={"hostile/data.txt": b"x"})
    found = {d.member: d.what for d in compare.compare_wheels(base, extra)}
    assert found["hostile/data.txt"] == "only in the rebuilt wheel"
    back = {d.member: d.what for d in compare.compare_wheels(extra, base)}
    assert back["hostile/data.txt"] == "only in the published wheel"


def test_a_changed_byte_outside_any_section_is_padding(tmp_path: Path) -> None:
    lib = _library()
    regions = file_regions(lib)
    gap = next((i for i in range(len(lib)) if not any(s <= i < s + z for _n, s, z in regions)), None)
    if gap is None:
        pytest.skip("the built library has no padding")
    changed = bytearray(lib)
    changed[gap] ^= 0xFF
    assert compare.differing_parts(lib, bytes(changed)) == []
    assert compare.region_at(lib, gap) == "between sections (padding)"


# --- the manifest's inputs -------------------------------------------------------------------------


def test_the_manifest_records_inputs_identifiers_and_compilers(tmp_path: Path) -> None:
    entry = manifest.Entry(
        "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "cpu", "x", 10, "b" * 64, "c" * 64,
        identifier="cp312-cpu-manylinux_x86_64", compilers=("GCC: (GNU) 14.2.1",),
    )  # fmt: skip
    recorded = {"source": {"commit": COMMIT}, "source_date_epoch": "1700000000"}
    document = manifest.assemble([entry], {}, tag="v1.0", version="1.0", inputs=recorded)
    path = manifest.write(tmp_path / "m.json", document)
    whole, wheels = manifest.load_document(path)
    assert whole["inputs"] == recorded
    listed = wheels[entry.name]
    assert listed["identifier"] == "cp312-cpu-manylinux_x86_64"
    assert listed["compilers"] == ["GCC: (GNU) 14.2.1"]
    assert manifest.load(path) == wheels


def test_variant_inputs_name_the_image_by_digest_and_the_build_settings() -> None:
    plan = make_plan(matrix.load(ROOT / "matrix.yaml"))
    found = inputs.variant_inputs(plan.variants["rocm"])
    assert set(found) >= {"toolkit", "floor", "excludes", "build_image", "config_settings", "env"}
    assert found["toolkit"] == plan.variants["rocm"].toolkit
    image = found["build_image"]
    assert isinstance(image, dict)
    assert image["release"] == "manylinux_2_28"
    assert str(image["release_pinned"]).startswith("quay.io/pypa/manylinux_2_28_x86_64@sha256:")
    assert image["local_recipe"] is not None and len(str(image["local_recipe_sha256"])) == 64
    json.dumps(found)  # the manifest is JSON


def test_pinned_images_come_from_cibuildwheel() -> None:
    pinned = inputs.pinned_image("manylinux_2_28", "x86_64")
    assert pinned is not None and "@sha256:" in pinned and "#" not in pinned
    assert inputs.pinned_image("quay.io/pypa/manylinux_2_28_x86_64:latest", "x86_64") is None
    assert inputs.pinned_image("no_such_image", "x86_64") is None


# --- the stage ---------------------------------------------------------------------------------------


def _release(tmp_path: Path, wheel: Path, *, with_inputs: bool = True) -> Path:
    entry = manifest.Entry(
        wheel.name, "cpu", "hostile", wheel.stat().st_size, handoff.sha256_of(wheel), "c" * 64,
        identifier="cp312-cpu-manylinux_x86_64",
    )  # fmt: skip
    recorded = {"source": {"commit": COMMIT, "engine_commit": None}, "source_date_epoch": "1700000000"}
    document = manifest.assemble(
        [entry], {}, tag="v1.0", version="1.0", inputs=recorded if with_inputs else None
    )
    return manifest.write(tmp_path / "release-manifest.json", document)


def test_a_manifest_without_inputs_is_refused(tmp_path: Path) -> None:
    lib = _library()
    published, _ = _wheels(tmp_path, lib, lib)
    with pytest.raises(ReproduceError, match="records no build inputs"):
        rebuild.read(_release(tmp_path, published, with_inputs=False))


def test_another_head_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _library()
    published, _ = _wheels(tmp_path, lib, lib)
    release = rebuild.read(_release(tmp_path, published))
    monkeypatch.setattr(inputs, "git_head", lambda _d: "b" * 40)
    with pytest.raises(ReproduceError) as caught:
        rebuild.check_checkout(release, tmp_path, [])
    message = str(caught.value)
    assert "\n" not in message
    assert f"this checkout is at {'b' * 40}, release-manifest.json was built from {COMMIT}" in message
    monkeypatch.setattr(inputs, "git_head", lambda _d: COMMIT)
    monkeypatch.setattr(inputs, "git_changes", lambda _d: [])
    assert rebuild.check_checkout(release, tmp_path, []) == []


def test_no_commit_on_either_side_is_a_note_and_one_recorded_side_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = _library()
    published, _ = _wheels(tmp_path, lib, lib)
    path = _release(tmp_path, published)
    document = json.loads(path.read_text(encoding="utf-8"))
    document["inputs"]["source"] = {"commit": None, "engine_commit": None}
    path.write_text(json.dumps(document), encoding="utf-8")
    release = rebuild.read(path)
    monkeypatch.setattr(inputs, "git_head", lambda _d: None)
    monkeypatch.setattr(inputs, "git_changes", lambda _d: [])
    assert "the source is not checked" in rebuild.check_checkout(release, tmp_path, [])[0]
    monkeypatch.setattr(inputs, "git_head", lambda _d: COMMIT)
    with pytest.raises(ReproduceError, match="records no source commit"):
        rebuild.check_checkout(release, tmp_path, [])


def test_an_unknown_identifier_names_the_ones_the_manifest_has(tmp_path: Path) -> None:
    lib = _library()
    published, _ = _wheels(tmp_path, lib, lib)
    release = rebuild.read(_release(tmp_path, published))
    with pytest.raises(UsageError, match="it lists cp312-cpu-manylinux_x86_64"):
        rebuild.choose(release, ["cp313-*"])
    assert rebuild.choose(release, ["cp312-*"]) == release.wheels


@pytest.mark.parametrize("same", [True, False])
def test_a_rebuild_is_compared_with_the_manifest_and_the_published_wheel(tmp_path: Path, same: bool) -> None:
    lib = _library()
    published, rebuilt = _wheels(tmp_path, lib, lib if same else _changed_byte(lib, ".text"))
    release = rebuild.read(_release(tmp_path, published))
    seen: list[str | None] = []

    def fake(steps: tuple[BuildStep, ...], out: Path, version: str) -> list[Path]:
        seen.append(os.environ.get("SOURCE_DATE_EPOCH"))
        assert version == "1.0"
        return [rebuilt]

    outcomes = rebuild.reproduce(
        release, {"cpu": ()}, release.wheels, rebuild=fake, out=tmp_path / "out", published=published.parent
    )
    assert seen == ["1700000000"]
    assert [o.identical for o in outcomes] == [same]
    if not same:
        assert f"{LIB}: ELF parts differ: .text" in outcomes[0].report
    unpublished = rebuild.reproduce(
        release, {"cpu": ()}, release.wheels, rebuild=fake, out=tmp_path / "out", published=None
    )
    assert same or "pass --published DIR" in unpublished[0].report


def test_the_release_plan_names_one_second_build_per_variant_its_newest_python() -> None:
    from release.commands.plan import github_outputs

    plan = make_plan(matrix.load(ROOT / "matrix.yaml"))
    chosen = json.loads(github_outputs(plan, "release", tag="v0.1.0")["second-build"])["include"]
    # one per variant and machine: cpu and cuda on x86_64 and aarch64, rocm on x86_64 (its backend's)
    assert sorted((c["variant"], c["machine"]) for c in chosen) == sorted(
        (name, machine) for name, v in plan.variants.items() for machine in v.floors
    )
    assert ("cuda", "aarch64") in {(c["variant"], c["machine"]) for c in chosen}
    assert {c["python"] for c in chosen} == {"3.15"}  # the newest GIL build, not 3.15t
    assert {c["identifier"] for c in chosen} <= {s.identifier for s in plan.builds}


def test_inputs_that_differ_here_are_noted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _library()
    published, _ = _wheels(tmp_path, lib, lib)
    path = _release(tmp_path, published)
    document = json.loads(path.read_text(encoding="utf-8"))
    document["inputs"]["tools"] = {"auditwheel": "6.5.0", "cibuildwheel": "4.3.5"}
    document["inputs"]["variants"] = {"cpu": {"toolkit": None, "excludes": ["libx.so.*"]}}
    path.write_text(json.dumps(document), encoding="utf-8")
    release = rebuild.read(path)
    monkeypatch.setattr(inputs, "tool_versions", lambda: {"auditwheel": "6.8.2", "cibuildwheel": "4.3.5"})
    notes = rebuild.input_notes(release, {"cpu": {"toolkit": None, "excludes": ("libx.so.*",)}})
    assert "note: auditwheel 6.5.0 built the release, 6.8.2 is here" in notes
    assert not [n for n in notes if "cibuildwheel" in n or "cpu:" in n]  # a tuple is the JSON list
    notes = rebuild.input_notes(release, {"cpu": {"toolkit": "7.2", "excludes": ("libx.so.*",)}})
    assert "note: cpu: the matrix here resolves toolkit otherwise than recorded" in notes


def test_another_machines_wheel_is_rebuilt_by_the_cross_build_here(tmp_path: Path) -> None:
    """An aarch64 step of a second build on this x86_64 machine takes the cross build, as `release
    build --arch aarch64` built it (cibuildwheel would pull the local image for linux/arm64 and
    fail); the release image is refused in one line, since it builds on the machine itself."""
    import argparse

    from release.commands.reproduce import _builder, by_machine
    from release.config.machines import host_machine

    if host_machine() != "x86_64":
        pytest.fail("this test reads an aarch64 step as another machine's: run it on x86_64")
    two = matrix.load(ROOT / "matrix.yaml")  # x86_64 and aarch64
    (step,) = (s for s in make_plan(two).builds if s.identifier == "cp313-cpu-manylinux_aarch64")
    args = argparse.Namespace(container=True, image=None, release_image=True, jobs=1)
    here = _builder(args, tmp_path, rebuild.RecordedRelease.__new__(rebuild.RecordedRelease), [])
    rebuild_with = by_machine(args, here)
    refused = r"cp313-cpu-manylinux_aarch64: this machine is x86_64; aarch64 wheels are rebuilt here by the"
    with pytest.raises(UsageError, match=refused):
        rebuild_with((step,), tmp_path / "out", "0.1.0")
