"""duplicate-library, debug-info and build-path-rpath on synthetic ELF facts."""

from __future__ import annotations

import pytest

from release.inspect.rules.libraries import classify_rpath
from tests.unit.test_rules_good import CORE, EXT, LIBS, Case, Change, Facts, check_case, elf


def _add(path: str, **facts: object) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(path, **facts))

    return change


def _both(first: Change, second: Change) -> Change:
    def change(f: Facts) -> None:
        first(f)
        second(f)

    return change


DUP = f"{LIBS}/libdup.so.1"
DUP2 = f"{LIBS}/libdup-9f8e7d6c.so.1"
DUPLICATES = [
    Case("every library once", lambda f: None, "pass"),
    Case(
        "same code under two names",
        _both(_add(DUP, soname="libdup.so.1", code_sha256="c" * 64),
              _add(DUP2, soname="libdup-9f8e7d6c.so.1", code_sha256="c" * 64)),
        "fail",
        (DUP, DUP2),
        says="identical code",
    ),
    Case(
        "same soname twice",
        _both(_add(DUP, soname="libdup.so.1"), _add("xfer/libdup.so.1", soname="libdup.so.1")),
        "fail",
        (DUP, "xfer/libdup.so.1"),
        says="SONAME libdup.so.1",
    ),
    Case("different code and sonames", _both(_add(DUP, soname="a.so"), _add(DUP2, soname="b.so")), "pass"),
    Case("no matrix needed", _both(_add(DUP, code_sha256="d" * 64), _add(DUP2, code_sha256="d" * 64)), "fail",
         matrix=False),
]


@pytest.mark.parametrize("case", DUPLICATES, ids=[c.name for c in DUPLICATES])
def test_duplicate_library(case: Case) -> None:
    check_case("duplicate-library", case)


DEBUG = [
    Case("stripped", lambda f: None, "pass"),
    Case("unstripped", _add(f"{LIBS}/libdebug.so", debug_sections=(".debug_info", ".debug_line")), "fail",
         (f"{LIBS}/libdebug.so",), says="2 .debug sections"),
    Case("compressed debug info", _add(CORE, debug_sections=(".zdebug_info",)), "fail", (CORE,)),
    Case("without a matrix too", _add(CORE, debug_sections=(".debug_info",)), "fail", matrix=False),
]


@pytest.mark.parametrize("case", DEBUG, ids=[c.name for c in DEBUG])
def test_debug_info(case: Case) -> None:
    check_case("debug-info", case)


RPATHS = [
    Case("$ORIGIN inside the wheel", lambda f: None, "pass"),
    Case("absolute build path", _add(CORE, runpath=("/tmp/build/lib",)), "fail", (CORE,), says="(absolute)"),
    Case("RPATH relative to the cwd", _add(CORE, rpath=("build/lib",)), "fail", (CORE,), says="(relative)"),
    Case("escapes the wheel", _add(EXT, runpath=("$ORIGIN/../..",)), "fail", (EXT,), says="(escapes)"),
    Case(
        "a script reaching site-packages",
        _add("x-1.0.data/scripts/tool", runpath=("$ORIGIN/../lib/python3.12/site-packages/xfer",)),
        "pass",
    ),
]


@pytest.mark.parametrize("case", RPATHS, ids=[c.name for c in RPATHS])
def test_build_path_rpath(case: Case) -> None:
    check_case("build-path-rpath", case)


@pytest.mark.parametrize(
    ("entry", "install", "expected"),
    [
        ("$ORIGIN", "xfer/_xfer.so", "inside"),
        ("$ORIGIN/../xfer_engine_rocm.libs", "xfer/_xfer.so", "inside"),
        ("${ORIGIN}/lib", "xfer/_xfer.so", "inside"),
        ("$ORIGIN/../..", "xfer/_xfer.so", "escapes"),
        ("$ORIGIN/..", "_top.so", "escapes"),
        ("/tmp/build/lib", "xfer/_xfer.so", "absolute"),
        ("/opt/rocm/lib", "xfer/_xfer.so", "absolute"),
        ("build/lib", "xfer/_xfer.so", "relative"),
        ("$ORIGINAL/x", "xfer/_xfer.so", "relative"),
        ("$ORIGIN/../lib/python3.12/site-packages/xfer.libs", "<scripts>/xfer-master", "inside"),
        ("$ORIGIN/../lib", "<scripts>/xfer-master", "escapes"),
    ],
)
def test_classify_rpath(entry: str, install: str, expected: str) -> None:
    assert classify_rpath(entry, install) == expected


PAD = f"{LIBS}/liburing-2907b6bc.so.1.0.7"
PADDING = [
    Case("little padding", lambda f: None, "pass"),
    Case("a patchelf'd library, 99% padding", _add(PAD, size=2_100_073, padding=2_087_200), "fail", (PAD,),
         says="99% of 2.1 MB"),
    Case("half is not most", _add(PAD, size=4 << 20, padding=2 << 20), "pass"),
    Case("a small library may be mostly padding", _add(PAD, size=600_000, padding=590_000), "pass"),
    Case("no matrix needed", _add(PAD, size=2_100_073, padding=2_087_200), "fail", matrix=False),
]


@pytest.mark.parametrize("case", PADDING, ids=[c.name for c in PADDING])
def test_padding(case: Case) -> None:
    check_case("padding", case)
