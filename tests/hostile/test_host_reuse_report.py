"""Issue 57 cause 11: a damaged report beside an up-to-date wheel means "rebuild", never a
traceback (the last round's report-reading fix, missing in the host build's second reader)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release.builder import host

WHEEL = "xfer_engine_cpu-0.1-cp312-cp312-manylinux_2_28_x86_64.whl"


@pytest.mark.parametrize(
    "text",
    ["[]", "not json", "", '{"rules": 7}', '{"rules": [1]}', "[" * 100_000, '{"runtime_bound": "x"}', "\xff"],
)
def test_a_damaged_report_is_no_report(tmp_path: Path, text: str) -> None:
    wheel = tmp_path / WHEEL
    wheel.write_bytes(b"")
    (tmp_path / (WHEEL + ".verify.json")).write_bytes(text.encode("latin-1"))
    assert host._previous_report(wheel) is None


def test_a_fifo_or_device_report_is_no_report(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL
    os.mkfifo(tmp_path / (WHEEL + ".verify.json"))
    assert host._previous_report(wheel) is None
    (tmp_path / (WHEEL + ".verify.json")).unlink()
    (tmp_path / (WHEEL + ".verify.json")).symlink_to("/dev/zero")
    assert host._previous_report(wheel) is None


def test_a_good_report_is_read(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL
    text = '{"rules": [{"id": "debug-info", "status": "warn"}], "compilers": ["GCC: (x) 14.2.0"]}'
    (tmp_path / (WHEEL + ".verify.json")).write_text(text, encoding="utf-8")
    assert host._previous_report(wheel) == {
        "rules": [{"id": "debug-info", "status": "warn"}], "compilers": ["GCC: (x) 14.2.0"]
    }  # fmt: skip
    assert host.compiler_summary(("GCC: (x) \u0661\u0664.2.0",)) == "GCC: (x) \u0661\u0664.2.0"
