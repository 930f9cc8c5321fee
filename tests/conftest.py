"""Suite-wide rules."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from release.environment import in_ci


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """In CI a skipped test is a failure: CI installs everything, so a skip means a missing step."""
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may be missing: {reason}"


@pytest.fixture(autouse=True)
def _no_job_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables the tests render stay out of a CI run's own job summary ($GITHUB_STEP_SUMMARY)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
