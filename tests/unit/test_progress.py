"""The heartbeat of long commands: the build's own progress read from its log, and what it does."""

from __future__ import annotations

import pytest

from release.builder.prebuild import activity, build_progress


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b"[1/212] Building CXX object a.o\n[57/212] Building CXX object b.o\n", "[57/212]"),
        (b"[ 12%] Building CXX object a.o\n[ 45%] Linking CXX shared library libx.so\n", "[45%]"),
        (b"[3/9] ninja\n-- Configuring done\n[ 80%] make\n", "[80%]"),  # the last one counts
        (b"-- The CXX compiler identification is GNU 12.2.0\n", None),
        (b"", None),
    ],
)
def test_progress_is_the_last_ninja_or_make_counter(tail: bytes, expected: str | None) -> None:
    assert build_progress(tail) == expected


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        (["cmake", "--build", "core-build", "--parallel", "2"], "compiling"),
        (["/usr/bin/cmake", "-S", "src", "-B", "b"], "configuring"),
        (["cmake", "--install", "b", "--prefix", "p"], "installing"),
        (["/v/bin/python", "-m", "build", "--wheel"], "building the wheel"),
        (["/v/bin/python", "-m", "pip", "install", "x"], "installing build requirements"),
        (["/usr/bin/python3.12", "-m", "venv", "v"], "creating the build environment"),
        (["/usr/bin/ld", "-o", "x"], "running ld"),
    ],
)
def test_activity_names_the_step(cmd: list[str], expected: str) -> None:
    assert activity(cmd) == expected
