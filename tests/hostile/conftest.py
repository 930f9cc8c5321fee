"""Unit tier (RELEASE_TEST_TIER=unit): the same rule as tests/unit, no test starts a process."""

from tests.unit.conftest import _no_processes

__all__ = ["_no_processes"]
