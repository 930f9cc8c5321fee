"""elf-machine: every ELF file is code for the machine the wheel's tag names (EM_X86_64 = 62,
EM_AARCH64 = 183), on synthetic facts and on ELF headers built in memory and read by the ELF layer."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from release.inspect.elf import inspect_elf
from release.inspect.verify import verify_wheel
from release.plan.machine import for_machine
from tests.hostile.builders import EM_AARCH64, elf_bytes, record_hash
from tests.unit.test_rules_good import (
    CORE,
    EXT,
    Case,
    Change,
    Facts,
    apply,
    check_case,
    context,
    good_rocm,
)

RULE = "elf-machine"
ARM = ("cp312-cp312-manylinux_2_28_aarch64",)


def _tags(*tags: str) -> Change:
    def change(f: Facts) -> None:
        f.tags = tags

    return change


def _machine(path: str, machine: str) -> Change:
    def change(f: Facts) -> None:
        f.elves[path] = dataclasses.replace(f.elves[path], machine=machine)

    return change


def _both(*changes: Change) -> Change:
    def change(f: Facts) -> None:
        for c in changes:
            c(f)

    return change


def _no_elves(f: Facts) -> None:
    f.elves.clear()


CASES = [
    Case("x86_64 code in an x86_64 wheel", lambda f: None, "pass", says="all x86_64 (e_machine 62)"),
    Case("aarch64 code in an aarch64 wheel", _both(_tags(*ARM), _machine(EXT, "aarch64"),
         _machine(CORE, "aarch64")), "pass", variant=None, says="all aarch64 (e_machine 183)"),
    Case("an x86_64 library in an aarch64 wheel", _both(_tags(*ARM), _machine(EXT, "aarch64")), "fail",
         paths=(EXT, CORE), says="mixes machines (aarch64, x86_64)"),
    Case("all x86_64 code, tagged aarch64", _tags(*ARM), "fail", paths=(EXT, CORE), variant=None,
         says=f"tagged for aarch64, but {EXT} is x86_64 (e_machine 62)"),
    Case("all aarch64 code, tagged x86_64", _both(_machine(EXT, "aarch64"), _machine(CORE, "aarch64")),
         "fail", paths=(EXT,), says=f"x86_64, but {EXT} is aarch64"),
    Case("a machine the toolkit does not build", _both(_machine(EXT, "riscv64"), _machine(CORE, "riscv64")),
         "fail", says="is riscv64"),
    Case("a rocm wheel for aarch64 (rocm has no aarch64 machines)",
         _both(_tags(*ARM), _machine(EXT, "aarch64"), _machine(CORE, "aarch64")), "fail",
         says="variant 'rocm' is released for x86_64 only"),
    Case("no ELF files", _no_elves, "not-applicable"),
    Case("a platform of no machine", _tags("cp312-cp312-win_amd64"), "not-applicable", says="win_amd64"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_table(case: Case) -> None:
    check_case(RULE, case)


def test_the_rule_reads_the_facts_the_elf_layer_parsed() -> None:
    assert inspect_elf("a.so", elf_bytes(machine=EM_AARCH64)).machine == "aarch64"
    assert inspect_elf("b.so", elf_bytes()).machine == "x86_64"


def test_an_aarch64_variant_with_its_machines_floor_passes() -> None:
    facts = good_rocm()
    for change in (_tags(*ARM), _machine(EXT, "aarch64"), _machine(CORE, "aarch64")):
        change(facts)
    ctx = context(facts, variant=None)
    floors = {"x86_64": "manylinux_2_28_x86_64", "aarch64": "manylinux_2_28_aarch64"}
    cpu = dataclasses.replace(context(good_rocm(), "cpu").variant, floors=floors)  # type: ignore[arg-type]
    assert for_machine(cpu, "aarch64").floor == "manylinux_2_28_aarch64"
    assert apply(RULE, dataclasses.replace(ctx, variant=cpu)).status == "pass"


def _wheel(path: Path, tag: str, members: dict[str, bytes]) -> Path:
    """A small real wheel: the members, WHEEL with `tag`, METADATA and a complete RECORD."""
    info = "tiny-0.1.0.dist-info"
    files = {
        **members,
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: tiny\nVersion: 0.1.0\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    rows = [f"{name},{record_hash(data)},{len(data)}" for name, data in files.items()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name), data)
        zf.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    wheel = path / f"tiny-0.1.0-{tag}.whl"
    wheel.write_bytes(buffer.getvalue())
    return wheel


def test_verify_names_the_x86_64_library_of_an_aarch64_wheel(tmp_path: Path) -> None:
    members = {
        "tiny/_arm.so": elf_bytes(machine=EM_AARCH64, soname="_arm.so"),
        "tiny/_x86.so": elf_bytes(soname="_x86.so"),
    }
    report = verify_wheel(_wheel(tmp_path, ARM[0], members), variant=None)
    result = next(r for r in report.rules if r.id == RULE)
    assert result.status == "fail" and "tiny/_x86.so (x86_64)" in result.message
    assert "tiny/_arm.so (aarch64)" in result.message
    assert not report.ok
    assert hashlib.sha256((tmp_path / f"tiny-0.1.0-{ARM[0]}.whl").read_bytes()).hexdigest() == report.sha256


def test_verify_passes_an_all_aarch64_wheel(tmp_path: Path) -> None:
    members = {"tiny/_arm.so": elf_bytes(machine=EM_AARCH64, soname="_arm.so")}
    report = verify_wheel(_wheel(tmp_path, ARM[0], members), variant=None)
    result = next(r for r in report.rules if r.id == RULE)
    assert result.status == "pass", result
