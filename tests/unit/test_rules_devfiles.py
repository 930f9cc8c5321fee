"""development-files on synthetic wheel facts (issue 43: 650 headers and a .pc under .data/ passed)."""

from __future__ import annotations

import dataclasses

import pytest

from release.inspect.rules.devfiles import ALLOWANCE, kind_of
from tests.unit.test_rules_good import Case, Facts, apply, check_case, context, good_rocm

DATA = "xfer_engine_rocm-0.1.0.data/data"


def _add(*files: tuple[str, int]) -> object:
    def change(f: Facts) -> None:
        for name, size in files:
            f.add_text(name, b"x" * size, 0o644)

    return change


def _headers(count: int, size: int) -> object:
    return _add(*((f"{DATA}/include/sub/h{i:03}.h", size) for i in range(count)))


CASES = [
    Case("none", lambda f: None, "pass", says="no headers"),
    Case("a plugin header within the allowance", _add(("xfer/include/xfer_plugin.h", 4000)), "pass",
         says="within the allowance"),
    Case("a meson subproject's headers and .pc", _headers(650, 400), "warn", says="650 development files"),
    Case("a static archive", _add(("xfer/lib/libcore.a", ALLOWANCE + 1)), "warn", ("xfer/lib/libcore.a",),
         says="static archives"),
    Case("CMake config", _add((f"{DATA}/lib/cmake/xfer/xferConfig.cmake", 70_000)), "warn",
         says="CMake config"),
    Case("with --release still a warning without a declared limit", _headers(300, 400), "warn", release=True),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_development_files(case: Case) -> None:
    check_case("development-files", case)


def test_the_largest_are_named() -> None:
    facts = good_rocm()
    _headers(200, 500)(facts)  # type: ignore[operator]
    _add((f"{DATA}/lib/pkgconfig/zlib.pc", 300), ("xfer/big.hpp", 90_000))(facts)  # type: ignore[operator]
    result = apply("development-files", context(facts))
    assert result.status == "warn" and result.paths[0] == "xfer/big.hpp", result
    assert "the largest: xfer/big.hpp (88 KiB)" in result.message, result.message
    assert "(.pc files, headers)" in result.message or "headers, .pc files" in result.message, result.message


def test_a_declared_limit_fails_only_with_release() -> None:
    facts = good_rocm()
    _headers(100, 1000)(facts)  # type: ignore[operator]
    ctx = context(facts, release=True)
    assert ctx.variant is not None
    within = dataclasses.replace(ctx, variant=dataclasses.replace(ctx.variant, development_files=200_000))
    assert apply("development-files", within).status == "pass"
    over = dataclasses.replace(ctx, variant=dataclasses.replace(ctx.variant, development_files=50_000))
    assert apply("development-files", over).status == "fail"
    assert apply("development-files", dataclasses.replace(over, release=False)).status == "warn"


@pytest.mark.parametrize(
    ("member", "kind"),
    [
        ("pkg/include/a.h", "headers"),
        ("pkg/x.cuh", "headers"),
        ("pkg.data/data/lib/pkgconfig/z.pc", ".pc files"),
        ("pkg/lib/libz.a", "static archives"),
        ("pkg/lib/cmake/Foo/FooConfigVersion.cmake", "CMake config"),
        ("pkg/lib/cmake/Foo/Foo-targets-release.cmake", "CMake config"),
        ("pkg/foo-config.cmake", "CMake config"),
        ("pkg/_ext.cpython-312-x86_64-linux-gnu.so", None),
        ("pkg/data.hdf5", None),
        ("pkg/readme.a.txt", None),
    ],
)
def test_kinds(member: str, kind: str | None) -> None:
    assert kind_of(member) == kind
