"""Digits of another script in wheel and platform tags (issue 57, cause 2): `\\d` and `int()` take
Arabic-Indic digits, so `manylinux_2_34_x86_64` spelled in them read as glibc 2.34 and `cp313` as
CPython 3.13. Tags are parsed in one place (`release.wheel.names`, `release.wheel.cpython`), ASCII
digits only: such a tag names no CPython and no glibc, and a matrix or command that gives one ends
in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from release import cli
from release.config.matrix import loads
from release.errors import MatrixError
from release.wheel.cpython import parse_key, parse_tag
from release.wheel.names import FLOOR, parse_platform_tag, parse_wheel_name, python_tag, tag_python

ROOT = Path(__file__).resolve().parents[2]
ARABIC = str.maketrans("0123456789", "".join(chr(0x0660 + i) for i in range(10)))
FULLWIDTH = str.maketrans("0123456789", "".join(chr(0xFF10 + i) for i in range(10)))


@pytest.mark.parametrize("digits", [ARABIC, FULLWIDTH], ids=["arabic-indic", "fullwidth"])
def test_a_platform_tag_of_other_digits_names_no_glibc(digits: dict[int, str]) -> None:
    tag = "manylinux_2_34_x86_64".translate(digits)
    parsed = parse_platform_tag(tag)
    assert parsed.libc is None and parsed.policy_name is None
    assert parsed.family != "manylinux"
    assert FLOOR.match(tag) is None
    assert parse_platform_tag("manylinux_2_34_x86_64").libc == (2, 34)  # the ASCII one still reads


@pytest.mark.parametrize("digits", [ARABIC, FULLWIDTH], ids=["arabic-indic", "fullwidth"])
def test_an_interpreter_tag_of_other_digits_names_no_cpython(digits: dict[int, str]) -> None:
    for tag in ("cp313", "cp314t"):
        hostile = "cp" + tag[2:].translate(digits)
        assert tag_python(hostile) is None and parse_tag(hostile) is None
    assert parse_key("3.13".translate(digits)) is None
    with pytest.raises(ValueError, match="is not a CPython version"):
        python_tag("3.13".translate(digits))
    assert tag_python("cp313") == (3, 13)


def test_a_wheel_named_with_other_digits_serves_no_python() -> None:
    tag = "cp" + "313".translate(ARABIC)
    name = parse_wheel_name(f"x-1-{tag}-{tag}-manylinux_2_28_x86_64.whl")
    assert name.python_version() is None
    assert not name.serves("3.13")


def test_a_matrix_floor_of_other_digits_is_one_located_error(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["platform"]["floor"] = "manylinux_2_28".translate(ARABIC)
    with pytest.raises(MatrixError) as caught:
        loads(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), path=tmp_path / "matrix.yaml",
              backends_dir=ROOT / "packaging" / "backends")  # fmt: skip
    assert any(p.key == "platform.floor" for p in caught.value.problems)


def test_repair_refuses_a_plat_of_other_digits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wheel = tmp_path / "x-1-cp313-cp313-linux_x86_64.whl"
    wheel.write_bytes(b"")
    plat = "manylinux_2_28_x86_64".translate(ARABIC)
    code = cli.main(["repair", "--plat", plat, "-w", str(tmp_path / "out"), str(wheel)])
    out, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1
