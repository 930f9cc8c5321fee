"""The Pythons a wheel is for (issue 56 item 5): module-suffix, libpython, requires-python and
free-threading-classifier, and stable-abi's abi3t and defined-versus-used symbols, on small real
wheels built in memory and read by `release verify` (no process starts: no module here has a
symbol table naming Python's API, so abi3audit is never asked, or it is stood in for).

The tampered copies of issue 56's "Done when" are here: a suffix that does not fit its tag, abi3
claimed on a t build, a 3.15-style abi3 name in a wheel for 3.12+; each fails naming the module.
"""

from __future__ import annotations

import dataclasses
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from release.inspect.abitags import abi_tags, module_name
from release.inspect.rules import abi as abi_rule
from release.inspect.stableabi import LimitedApiAudit
from release.inspect.verify import inspect_wheel, verify_wheel
from tests.hostile.builders import elf_bytes, record_hash
from tests.hostile.builders import small_wheel as wheel

RULES = ("module-suffix", "libpython", "requires-python", "free-threading-classifier")


def _statuses(path: Path) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    report = verify_wheel(path)
    return {r.id: (r.status, r.message, r.paths) for r in report.rules if r.id in RULES}


def _module(leaf: str) -> dict[str, bytes]:
    return {f"tiny/{leaf}": elf_bytes(soname=leaf)}


GOOD = [
    ("cp314-cp314t-manylinux_2_28_x86_64", "_m.cpython-314t-x86_64-linux-gnu.so"),
    ("cp315-cp315-manylinux_2_28_x86_64", "_m.cpython-315-x86_64-linux-gnu.so"),
    ("cp315-cp315t-manylinux_2_28_x86_64", "_m.cpython-315t-x86_64-linux-gnu.so"),
    ("cp312-abi3-manylinux_2_28_x86_64", "_m.abi3.so"),
    ("cp315-abi3.abi3t-manylinux_2_28_x86_64", "_m.abi3t.so"),
    ("cp315-abi3-manylinux_2_28_x86_64", "_m.abi3-x86_64-linux-gnu.so"),
    ("cp312-cp312-manylinux_2_28_x86_64", "_m.abi3.so"),
]


@pytest.mark.parametrize(
    ("tag", "leaf"), GOOD, ids=[f"{t.split('-manylinux')[0]} {leaf}" for t, leaf in GOOD]
)
def test_a_module_named_for_its_tag_passes(tmp_path: Path, tag: str, leaf: str) -> None:
    status, message, _paths = _statuses(wheel(tmp_path, tag, _module(leaf)))["module-suffix"]
    assert status == "pass", message


X86 = "manylinux_2_28_x86_64"
TAMPERED = [
    # a suffix that does not fit its tag
    ("cp315-cp315-" + X86, "_m.cpython-314-x86_64-linux-gnu.so", "cpython-314 module in a cp315-cp315"),
    ("cp314-cp314-" + X86, "_m.cpython-314t-x86_64-linux-gnu.so", "cpython-314t module in a cp314-cp314"),
    ("cp314-cp314t-" + X86, "_m.cpython-314-x86_64-linux-gnu.so", "cpython-314 module in a cp314-cp314t"),
    ("cp312-abi3-" + X86, "_m.cpython-312-x86_64-linux-gnu.so", "stable ABI claimed"),
    ("py3-none-" + X86, "_m.cpython-312-x86_64-linux-gnu.so", "tagged for every Python"),
    # abi3 claimed on a t build
    ("cp314-abi3-" + X86, "_m.cpython-314t-x86_64-linux-gnu.so", "a t build never claims abi3"),
    ("cp314-cp314t-" + X86, "_m.abi3.so", "free-threaded Pythons do not import"),
    ("cp315-abi3.abi3t-" + X86, "_m.abi3.so", "in a cp315-abi3t wheel"),
    # a 3.15-style abi3 name in a wheel for 3.12+
    ("cp312-abi3-" + X86, "_m.abi3-x86_64-linux-gnu.so", "3.14 and older do not import it"),
    # abi3t before 3.15
    ("cp312-abi3-" + X86, "_m.abi3t.so", "only CPython 3.15 and later"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tag", "leaf", "says"), TAMPERED, ids=[f"{t.split('-manylinux')[0]} {leaf}" for t, leaf, _ in TAMPERED]
)
def test_a_tampered_copy_fails_naming_the_module(tmp_path: Path, tag: str, leaf: str, says: str) -> None:
    path = wheel(tmp_path, tag, _module(leaf))
    report = verify_wheel(path)
    found = report.rule("module-suffix")
    assert found.status == "fail", found.message
    assert f"tiny/{leaf}" in found.message and says in found.message, found.message
    assert found.paths == (f"tiny/{leaf}",)
    assert not report.ok


def test_abi3t_before_cp315_fails_on_the_tag_alone(tmp_path: Path) -> None:
    status, message, _paths = _statuses(wheel(tmp_path, "cp314-abi3t-manylinux_2_28_x86_64", {}))[
        "module-suffix"
    ]
    assert status == "fail" and "cp314-abi3t: abi3t is the stable ABI of CPython 3.15 and later" in message


def test_a_bare_so_and_a_library_are_not_judged(tmp_path: Path) -> None:
    members = {**_module("_m.so"), "tiny.libs/libfoo-1a2b3c4d.so.1": elf_bytes(soname="libfoo.so.1")}
    status, message, _paths = _statuses(wheel(tmp_path, "cp312-cp312-manylinux_2_28_x86_64", members))[
        "module-suffix"
    ]
    assert status == "not-applicable", message


def test_packaging_reads_the_tags() -> None:
    tags = abi_tags(("cp315-abi3-manylinux_2_28_x86_64", "cp315-abi3t-manylinux_2_28_x86_64"))
    assert [(t.spelled, t.version, t.free_threaded) for t in tags] == [
        ("cp315-abi3", (3, 15), False),
        ("cp315-abi3t", (3, 15), True),
    ]
    [threaded] = abi_tags(("cp314-cp314t-manylinux_2_28_x86_64",))
    assert (threaded.abi_version, threaded.free_threaded) == ((3, 14), True)
    assert module_name("a/b.cpython-3\u0661\u0664-x86_64-linux-gnu.so") is None  # ASCII digits only


# --- libpython ------------------------------------------------------------------------------------


def test_a_grafted_libpython_fails(tmp_path: Path) -> None:
    members = {
        **_module("_m.cpython-314t-x86_64-linux-gnu.so"),
        "tiny.libs/libpython3.14t-1a2b3c4d.so.1.0": elf_bytes(soname="libpython3.14t.so.1.0"),
    }
    status, message, paths = _statuses(wheel(tmp_path, "cp314-cp314t-manylinux_2_28_x86_64", members))[
        "libpython"
    ]
    assert status == "fail" and "tiny.libs/libpython3.14t-1a2b3c4d.so.1.0 is a libpython" in message
    assert paths == ("tiny.libs/libpython3.14t-1a2b3c4d.so.1.0",)


def test_a_needed_libpython_fails(tmp_path: Path) -> None:
    leaf = "_m.cpython-312-x86_64-linux-gnu.so"
    members = {f"tiny/{leaf}": elf_bytes(soname=leaf, needed=("libpython3.12.so.1.0", "libc.so.6"))}
    status, message, paths = _statuses(wheel(tmp_path, "cp312-cp312-manylinux_2_28_x86_64", members))[
        "libpython"
    ]
    assert status == "fail" and f"tiny/{leaf} needs libpython3.12.so.1.0" in message
    assert paths == (f"tiny/{leaf}",)


# --- requires-python and the classifiers ----------------------------------------------------------


def _with_metadata(path: Path, lines: str) -> Path:
    """The wheel again, its METADATA with `lines` added (RECORD rewritten to match)."""
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    info = next(n.split("/")[0] for n in members if n.endswith(".dist-info/METADATA"))
    members[f"{info}/METADATA"] += lines.encode()
    rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in members.items() if not n.endswith("RECORD")]
    members[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data)
    path.write_bytes(buffer.getvalue())
    return path


REQUIRES = [
    ("cp314-cp314t-manylinux_2_28_x86_64", ">=3.9, !=3.9.0, !=3.9.1", "pass"),
    ("cp314-cp314t-manylinux_2_28_x86_64", ">=3.15", "fail"),
    ("cp312-cp312-manylinux_2_28_x86_64", "<3.12", "fail"),
    ("cp39-abi3-manylinux_2_28_x86_64", ">=3.11", "pass"),
    ("cp315-abi3.abi3t-manylinux_2_28_x86_64", "<3.15", "fail"),
    ("cp312-cp312-manylinux_2_28_x86_64", ">=3.x", "fail"),
]


@pytest.mark.parametrize(
    ("tag", "spec", "status"), REQUIRES, ids=[f"{t.split('-manylinux')[0]} {s}" for t, s, _ in REQUIRES]
)
def test_requires_python_admits_every_tag(tmp_path: Path, tag: str, spec: str, status: str) -> None:
    path = _with_metadata(wheel(tmp_path, tag, {}), f"Requires-Python: {spec}\n")
    found, message, _paths = _statuses(path)["requires-python"]
    assert found == status, message


def test_a_free_threaded_wheel_without_the_classifier_warns(tmp_path: Path) -> None:
    path = wheel(
        tmp_path, "cp314-cp314t-manylinux_2_28_x86_64", _module("_m.cpython-314t-x86_64-linux-gnu.so")
    )
    status, message, _paths = _statuses(path)["free-threading-classifier"]
    assert (
        status == "warn"
        and "no 'Programming Language :: Python :: Free Threading :: …' classifier" in message
    )


def test_a_free_threaded_wheel_with_the_classifier_passes(tmp_path: Path) -> None:
    classifier = "Classifier: Programming Language :: Python :: Free Threading :: 3 - Stable\n"
    path = _with_metadata(wheel(tmp_path, "cp315-abi3.abi3t-manylinux_2_28_x86_64", {}), classifier)
    status, message, _paths = _statuses(path)["free-threading-classifier"]
    assert status == "pass", message


# --- stable-abi: abi3t, and what a module defines -------------------------------------------------


def _audited(monkeypatch: pytest.MonkeyPatch, found: dict[str, LimitedApiAudit]) -> list[str]:
    asked: list[str] = []

    def auditor(contents: Any, paths: Any, floor: str) -> list[LimitedApiAudit]:
        asked.append(floor)
        return [found.get(p, LimitedApiAudit(p, (), ())) for p in paths]

    monkeypatch.setattr(abi_rule, "audit_limited_api", auditor)
    return asked


def test_an_abi3t_module_that_builds_a_moduledef_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    member = "tiny/_m.abi3t.so"
    uses = LimitedApiAudit(member, (), (), uses=("PyLong_FromLong", "PyModuleDef_Init"))
    asked = _audited(monkeypatch, {member: uses})
    ctx = inspect_wheel(wheel(tmp_path, "cp315-abi3.abi3t-manylinux_2_28_x86_64", _module("_m.abi3t.so")))
    found = abi_rule.stable_abi(ctx)
    assert asked == ["3.15"]
    assert (
        found.status == "fail" and f"{member} uses PyModuleDef_Init, which abi3t cannot use" in found.message
    )
    assert found.paths == (member,)


def test_the_same_module_in_an_abi3_wheel_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    member = "tiny/_m.abi3.so"
    _audited(monkeypatch, {member: LimitedApiAudit(member, (), (), uses=("PyModuleDef_Init",))})
    ctx = inspect_wheel(wheel(tmp_path, "cp312-abi3-manylinux_2_28_x86_64", _module("_m.abi3.so")))
    assert abi_rule.stable_abi(ctx).status == "pass"


def test_hooks_a_module_defines_are_not_api_it_uses(tmp_path: Path) -> None:
    """abi3audit names `PyModExport__rust` (cryptography 50.0.2's hook) as outside the limited API;
    the names the module defines are taken out of its findings, what it leaves undefined stays."""
    from release.inspect.stableabi import _own

    copy = tmp_path / "copy.so"
    copy.write_bytes(
        elf_bytes(
            symbols=(("PyModExport__rust", True), ("PyInit__rust", True), ("_PyObject_GetDictPtr", False))
        )
    )
    said = LimitedApiAudit(
        "m/_rust.abi3t.so", ("PyModExport__rust", "_PyObject_GetDictPtr"), (("PyInit__rust", "3.15"),)
    )
    own = _own(said, copy)
    assert own.outside == ("_PyObject_GetDictPtr",) and own.newer == ()
    assert own.defined == ("PyInit__rust", "PyModExport__rust") and own.uses == ("_PyObject_GetDictPtr",)
    assert dataclasses.replace(own, outside=()).ok
