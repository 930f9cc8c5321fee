"""wheel-integrity on synthetic wheel facts: what pip and installers refuse."""

from __future__ import annotations

import pytest

from release.inspect.rules.integrity import path_problem
from tests.unit.test_rules_good import CORE, EXT, Case, Change, Facts, check_case, elf

INIT = "xfer/__init__.py"
WHEEL_AARCH64 = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_17_aarch64\n"
WHEEL_2 = "Wheel-Version: 2.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_28_x86_64\n"


def _text(name: str, data: bytes = b"x = 1\n", *, symlink: bool = False) -> Change:
    def change(f: Facts) -> None:
        f.add_text(name, data)
        if symlink:
            f.symlinks.add(name)

    return change


def _dist_info(leaf: str, text: str | None) -> Change:
    def change(f: Facts) -> None:
        f.dist_info[leaf] = text

    return change


def _rows(edit: object) -> Change:
    def change(f: Facts) -> None:
        f.record_rows = edit  # type: ignore[assignment]

    return change


def _drop_row(name: str) -> Change:
    return _rows(lambda rows: [r for r in rows if r[0] != name])


def _set_row(name: str, column: int, value: str) -> Change:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        return [[*r[:column], value, *r[column + 1 :]] if r[0] == name else r for r in rows]

    return _rows(edit)


def _machine(machine: str) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(CORE, soname="libxfercore-1a2b3c4d.so.0", machine=machine))

    return change


def _tags(*tags: str) -> Change:
    def change(f: Facts) -> None:
        f.tags = tags

    return change


def _dist(name: str) -> Change:
    def change(f: Facts) -> None:
        f.distribution = name

    return change


def _two_dist_info(f: Facts) -> None:
    f.add_text("other-1.0.dist-info/METADATA", b"Name: other\n")


CASES = [
    Case("a wheel installers accept", lambda f: None, "pass"),
    Case("member ../../x", _text("../../x"), "fail", says="'..' component"),
    Case("member /tmp/x", _text("/tmp/x"), "fail", says="absolute path"),
    Case("member C:/x", _text("C:/x"), "fail", says="absolute path"),
    Case("member ..\\..\\x", _text("..\\..\\x"), "fail", says="backslash"),
    Case("NUL in a name", _text("xfer/x.py\0/../../evil.so"), "fail", says="NUL"),
    Case("symlink member", _text("xfer/libevil.so", b"/etc/passwd", symlink=True), "fail",
         says="symbolic link"),
    Case("a file and a directory", _text("xfer"), "fail", says="both a file and the directory"),
    Case("RECORD misses a file", _drop_row(INIT), "fail", says="does not list xfer/__init__.py"),
    Case("RECORD's sha256 is another file's", _set_row(INIT, 1, "sha256=AAAA"), "fail",
         says="not its content's"),
    Case("RECORD's size is wrong", _set_row(EXT, 2, "7"), "fail", says="7 bytes"),
    Case("RECORD uses md5", _set_row(INIT, 1, "md5=abc"), "fail", says="md5"),
    Case("RECORD uses sha512", _set_row(INIT, 1, "sha512=abc"), "pass"),
    Case("RECORD lists ../../etc/passwd", _rows(lambda r: [*r, ["../../etc/passwd", "", ""]]), "fail",
         says="'..' component"),
    Case("RECORD without a hash", _set_row(INIT, 1, ""), "fail", says="no hash"),
    Case("RECORD is no CSV of 3 columns", _dist_info("RECORD", "a,b\n"), "fail", says="RECORD line 1"),
    Case("no RECORD", _dist_info("RECORD", None), "fail", says="no xfer_engine_rocm-0.1.0.dist-info/RECORD"),
    Case("no WHEEL", _dist_info("WHEEL", None), "fail", says="/WHEEL"),
    Case("WHEEL tags differ from the file name", _dist_info("WHEEL", WHEEL_AARCH64), "fail",
         says="cp311-cp311-manylinux_2_17_aarch64"),
    Case("Wheel-Version 2.0", _dist_info("WHEEL", WHEEL_2), "fail", says="Wheel-Version"),
    Case("two .dist-info directories", _two_dist_info, "fail", says="2 .dist-info"),
    Case("platform any with native code", _tags("py3-none-any"), "fail", says="platform 'any'"),
    Case("aarch64 code in an x86_64 wheel", _machine("aarch64"), "fail", says="aarch64"),
    Case("32-bit code in an x86_64 wheel", _machine("i686"), "fail", says="i686"),
    Case("ELF files in a macOS wheel", _tags("cp312-cp312-macosx_11_0_arm64"), "fail", says="macosx"),
    Case("foreign wheels are checked too", _dist("someone_else"), "pass"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_wheel_integrity(case: Case) -> None:
    check_case("wheel-integrity", case)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("xfer/__init__.py", None),
        ("xfer_engine-0.1.0.data/scripts/tool", None),
        ("../x", "a '..' component"),
        ("a/../../x", "a '..' component"),
        ("/x", "an absolute path"),
        ("c:x", "an absolute path"),
        ("a\\b", "a backslash in the name"),
        ("a\tb", "a control character or NUL in the name"),
        ("..foo/x", None),
    ],
)
def test_path_problem(name: str, problem: str | None) -> None:
    assert path_problem(name) == problem
