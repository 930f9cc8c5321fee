"""The hardware leg's bench step: numbers are reported; only a gated leg fails on a missed goal."""

from __future__ import annotations

from typing import Any

import pytest

from release.hardware.leg import bench_check


def _report(write: float, read: float, goal: float = 0.9) -> dict[str, Any]:
    return {
        "memory": "device",
        "write_gib_s": 3.0 * write,
        "read_gib_s": 3.0 * read,
        "tcp_gib_s": 3.0,
        "write_ratio": write,
        "read_ratio": read,
        "goal_ratio": goal,
        "ok": write >= goal and read >= goal,
    }


@pytest.mark.parametrize(("gate", "status"), [(False, "pass"), (True, "fail")])
def test_a_missed_goal_fails_only_a_gated_leg(gate: bool, status: str) -> None:
    check = bench_check(_report(0.4, 1.3), gate=gate)
    assert check.status == status
    assert "ratio 0.40" in check.detail and "not met" in check.detail.lower()
    assert ("--bench-gate" in check.detail) is not gate


def test_a_met_goal_passes_gated_or_not() -> None:
    for gate in (False, True):
        check = bench_check(_report(1.0, 1.1), gate=gate)
        assert check.status == "pass" and check.detail.endswith(": met")
