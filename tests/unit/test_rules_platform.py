"""platform-floor and external-dependency on synthetic ELF facts, against auditwheel's policies."""

from __future__ import annotations

import pytest

from tests.unit.test_rules_good import CORE, LIBS, Case, Change, Facts, check_case, elf


def _tag(tag: str) -> Change:
    def change(f: Facts) -> None:
        f.tags = (tag,)

    return change


def _add(path: str, **facts: object) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(path, **facts))

    return change


def _both(first: Change, second: Change) -> Change:
    def change(f: Facts) -> None:
        first(f)
        second(f)

    return change


def _no_elf(f: Facts) -> None:
    for path in list(f.elves):
        del f.elves[path]
        del f.modes[path]


NEW = f"{LIBS}/libnew.so"
GLIBC_234 = _add(NEW, version_requirements=(("libc.so.6", "GLIBC_2.34"), ("libc.so.6", "GLIBC_2.2.5")))
FLOOR = [
    Case("fits its tag and the floor", lambda f: None, "pass", says="meets the floor"),
    Case("GLIBC_2.34 in a manylinux_2_17 wheel", _both(GLIBC_234, _tag("cp312-cp312-manylinux_2_17_x86_64")),
         "fail", (NEW,), says="GLIBC_2.34 (> GLIBC_2.17)"),
    Case("GLIBCXX too new for manylinux_2_28",
         _add(NEW, version_requirements=(("libstdc++.so.6", "GLIBCXX_3.4.30"),)), "fail", (NEW,)),
    Case("a version the wheel provides itself",
         _add(NEW, version_requirements=(("libxfercore-1a2b3c4d.so.0", "GLIBC_2.99"),)), "pass"),
    Case("tag newer than the floor: warn", _both(GLIBC_234, _tag("cp312-cp312-manylinux_2_34_x86_64")),
         "warn", says="not releasable"),
    Case("tag newer than the floor, --release: fail", _tag("cp312-cp312-manylinux_2_34_x86_64"), "fail",
         release=True),
    Case("linux_x86_64: warn", _tag("cp312-cp312-linux_x86_64"), "warn", says="no manylinux tag"),
    Case("other architecture than the floor", _tag("cp312-cp312-manylinux_2_28_aarch64"), "warn",
         says="aarch64"),
    Case("legacy manylinux2014 alias", _tag("cp312-cp312-manylinux2014_x86_64"), "pass"),
    Case("pure python with native code", _tag("py3-none-any"), "fail", (CORE,), says="platform 'any'"),
    Case("pure python", _both(_tag("py3-none-any"), _no_elf), "not-applicable"),
    Case("no matrix: tag checked, floor not", _both(GLIBC_234, _tag("cp312-cp312-manylinux_2_34_x86_64")),
         "pass", matrix=False, says="floor not checked"),
    Case("no matrix, too new for the tag", _both(GLIBC_234, _tag("cp312-cp312-manylinux_2_17_x86_64")),
         "fail", (NEW,), matrix=False),
]


@pytest.mark.parametrize("case", FLOOR, ids=[c.name for c in FLOOR])
def test_platform_floor(case: Case) -> None:
    check_case("platform-floor", case)


EXTERNAL = [
    Case("system, vendored and runtime libraries", lambda f: None, "pass"),
    Case("undeclared library", _add(CORE, needed=("libundeclared.so.1",)), "fail", (CORE,),
         says="libundeclared.so.1"),
    Case("declared system library", _add(CORE, needed=("libdeclared.so.1",)), "pass"),
    Case("the loader and libpython", _add(CORE, needed=("ld-linux-x86-64.so.2", "libpython3.12.so.1.0")),
         "pass"),
    Case("vendored by file name", _both(_add(CORE, needed=("libdep.so.1",)), _add(f"{LIBS}/libdep.so.1")),
         "pass"),
    Case("not in the 2_28 policy", _add(CORE, needed=("libnuma.so.1",)), "fail", (CORE,)),
    Case("without a matrix, declared libraries are unknown", _add(CORE, needed=("libdeclared.so.1",)),
         "fail", matrix=False),
]


@pytest.mark.parametrize("case", EXTERNAL, ids=[c.name for c in EXTERNAL])
def test_external_dependency(case: Case) -> None:
    check_case("external-dependency", case)
