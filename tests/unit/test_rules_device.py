"""device-code on synthetic ELF facts."""

from __future__ import annotations

import pytest

from tests.unit.test_rules_good import LIBS, Case, Change, Facts, check_case, elf

DEV = f"{LIBS}/libdev.so"


def _device(*archs: str, dev: bool = False) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(DEV, device_sections=(".hip_fatbin",), architectures=archs))
        if dev:
            f.distribution = "xfer_engine_rocmdev"

    return change


def _rocmdev(f: Facts) -> None:
    f.distribution = "xfer_engine_rocmdev"


CASES = [
    Case("no code objects, none declared", lambda f: None, "pass"),
    Case("code objects in a device_code: false variant", _device("gfx942"), "fail", (DEV,), says="gfx942"),
    Case("every declared architecture", _device("gfx942", "gfx950", dev=True), "pass", (DEV,)),
    Case("gfx950 missing", _device("gfx942", dev=True), "fail",
         says="missing from the GPU code objects: gfx950"),
    Case("declared but none at all", _rocmdev, "fail", says="found: none"),
    Case("no matrix", _device("gfx942"), "not-applicable", matrix=False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_device_code(case: Case) -> None:
    check_case("device-code", case)
