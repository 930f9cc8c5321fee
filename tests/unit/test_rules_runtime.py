"""vendored-runtime, missing-runtime-needed and runtime-abi on synthetic ELF facts."""

from __future__ import annotations

import dataclasses

import pytest

from release.inspect.rules.registry import RuleContext
from tests.unit.test_rules_good import CORE, EXT, LIBS, Case, Change, Facts, apply, check_case, context, elf


def _vendor(name: str, soname: str | None = None) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(f"{LIBS}/{name}", soname=soname))

    return change


def _cpu(f: Facts) -> None:
    f.distribution = "xfer_engine_cpu"


VENDORED = [
    Case("nothing vendored", lambda f: None, "pass"),
    Case("under its own name", _vendor("libamdhip64.so.5"), "fail", (f"{LIBS}/libamdhip64.so.5",)),
    Case("renamed", _vendor("libamdhip64-0a1b2c3d.so.5"), "fail", (f"{LIBS}/libamdhip64-0a1b2c3d.so.5",)),
    Case("runtime soname", _vendor("libfoo.so", "libhsa-runtime64.so.1"), "fail", (f"{LIBS}/libfoo.so",)),
    Case("a library that only looks alike", _vendor("libamdhip64-notahash.so.5"), "pass"),
    Case("non-runtime library", _vendor("libz-12345678.so.1"), "pass"),
    Case("cpu variant: only declared system libraries excluded", _cpu, "pass", says="libdeclared.so.*"),
    Case("no matrix", _vendor("libamdhip64.so.5"), "not-applicable", matrix=False),
]


@pytest.mark.parametrize("case", VENDORED, ids=[c.name for c in VENDORED])
def test_vendored_runtime(case: Case) -> None:
    check_case("vendored-runtime", case)


def _ext_needs(*needed: str) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(EXT, needed=needed))

    return change


def _core_needs(*needed: str) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(CORE, soname="libxfercore-1a2b3c4d.so.0", needed=needed))

    return change


def _no_extension(f: Facts) -> None:
    del f.elves[EXT]
    del f.modes[EXT]


def _no_elf(f: Facts) -> None:
    f.elves.clear()
    f.modes.clear()


def _chain(*changes: object) -> Change:
    def change(f: Facts) -> None:
        for c in changes:
            c(f)

    return change


MISSING = [
    Case("extension NEEDs the runtime", lambda f: None, "pass", (EXT,)),
    Case("extension without it", _ext_needs("libc.so.6"), "fail", (EXT,), says="silent CPU fallback"),
    Case(
        "through the wheel's own library",
        _chain(_ext_needs("libxfercore-1a2b3c4d.so.0"), _core_needs("libamdhip64.so.5")),
        "pass",
        (EXT,),
    ),
    Case("a library NEEDs it, no extension", _chain(_no_extension, _core_needs("libamdhip64.so.5")), "pass"),
    Case("no ELF file at all", _no_elf, "fail", says="no ELF file"),
    Case("cpu variant needs no runtime", _cpu, "not-applicable"),
    Case("no matrix", _ext_needs(), "not-applicable", matrix=False),
]


@pytest.mark.parametrize("case", MISSING, ids=[c.name for c in MISSING])
def test_missing_runtime_needed(case: Case) -> None:
    check_case("missing-runtime-needed", case)


# --- runtime-abi: a driver-API extension binds the driver's library alone (issue 43) ----------------------

CUDA_EXT = "xfer/_xfer.cpython-312-x86_64-linux-gnu.so"


def _driver_api_context(*needed: str) -> RuleContext:
    """A cuda wheel of toolkit 13.0 whose extension NEEDs `needed`, the variant declaring
    `runtime_needed: ["libcuda.so"]` (it calls the driver API only: CUDA::cuda_driver)."""
    facts = Facts(distribution="xfer_engine")
    facts.add_elf(elf(CUDA_EXT, needed=(*needed, "libc.so.6")))
    ctx = context(facts)
    assert ctx.variant is not None and ctx.variant.name == "cuda"
    variant = dataclasses.replace(
        ctx.variant, toolkit="13.0", runtime_sonames=("libcudart.so.13",), runtime_needed=("libcuda.so",)
    )
    return dataclasses.replace(ctx, variant=variant)


def test_runtime_abi_accepts_the_driver_s_library_alone() -> None:
    result = apply("runtime-abi", _driver_api_context("libcuda.so.1"))
    assert result.status == "pass", result
    assert "binds libcuda.so.1 alone (the NVIDIA driver" in result.message, result
    assert apply("missing-runtime-needed", _driver_api_context("libcuda.so.1")).status == "pass"


@pytest.mark.parametrize(
    ("needed", "status"),
    [
        (("libcuda.so.1", "libcudart.so.13"), "pass"),  # driver and the declared runtime
        (("libcuda.so.1", "libcudart.so.12"), "fail"),  # another toolkit's runtime still fails
    ],
)
def test_runtime_abi_still_judges_the_runtime_beside_the_driver(needed: tuple[str, ...], status: str) -> None:
    ctx = _driver_api_context(*needed)
    assert ctx.variant is not None
    ctx = dataclasses.replace(ctx, variant=dataclasses.replace(ctx.variant, runtime_needed=("libcuda",)))
    result = apply("runtime-abi", ctx)
    assert result.status == status, result
