"""Suite-wide rules."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Generator, Mapping
from pathlib import Path

import pytest

from release import settings
from release.builder import store
from release.settings import in_ci
from tests import ci_time


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """In CI a skipped test is a failure: CI installs everything, so a skip means a missing step."""
    outcome = yield
    report = outcome.get_result()
    if report.when in ("setup", "call"):
        _own_time(item, report)
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may be missing: {reason}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (ci_time.LONG_FILES), so xdist hands them out before the quick ones."""
    root = config.rootpath

    def file_of(item: pytest.Item) -> str:
        path = Path(str(item.fspath))
        return path.relative_to(root).as_posix() if root in path.parents else path.as_posix()

    rank = {path: index for index, path in enumerate(ci_time.long_files_first([file_of(i) for i in items]))}
    items.sort(key=lambda item: rank[file_of(item)])


@pytest.fixture(autouse=True)
def _no_job_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables the tests render stay out of a CI run's own job summary ($GITHUB_STEP_SUMMARY)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# ---- the run's account of its time (tests/ci_time.py, docs/records/ci-time.md) ----------------------------

_run: dict[str, object] = {"directory": None, "doing": "collection", "shared_s": 0.0, "setup_s": 0.0}


def _note(entry: Mapping[str, object]) -> None:
    directory = _run["directory"]
    if isinstance(directory, Path):
        ci_time.record(directory, {**entry, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})


def _note_image(entry: Mapping[str, object]) -> None:
    """An image asked for in a test's body (`local_images.make`) is a shared artefact too: its
    seconds count in the account, not in the test's own time (in a fixture, the fixture's do)."""
    _note(entry)
    if not str(_run["doing"]).startswith("fixture "):
        _run["shared_s"] = float(str(_run["shared_s"])) + float(str(entry.get("seconds", 0)))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before collection, so test modules that import `ensure` get the recorded one."""
    config = session.config
    basetemp = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    _run["directory"] = ci_time.run_directory(basetemp, worker=hasattr(config, "workerinput"))
    ci_time.RUN_STORE.append(ci_time.wheel_store(_run["directory"]))
    _run["started"] = time.time()
    from release.machine import images

    images.ensure = ci_time.ensure_recorder(images.ensure, _note_image, lambda: str(_run["doing"]))  # type: ignore[assignment]
    if not config.pluginmanager.has_plugin("release-fixture-clock"):
        config.pluginmanager.register(_FixtureClock(), "release-fixture-clock")


class _FixtureClock:
    """Times shared fixtures' set-ups. Registered as a plugin of its own: a conftest's hooks reach
    only the nodes below it, and a session fixture is set up for the session node."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest
    ) -> Generator[None, None, None]:
        if fixturedef.scope not in ci_time.SHARED_SCOPES:
            yield
            return
        before, started = _run["doing"], time.monotonic()
        _run["doing"] = f"fixture {fixturedef.argname}"
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            _run["doing"] = before
            _run["shared_s"] = float(str(_run["shared_s"])) + seconds
            first = str(before)
            name, scope = fixturedef.argname, fixturedef.scope
            _note({"kind": "fixture", "fixture": name, "scope": scope, "seconds": seconds, "first": first})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """The running test is also who asks for a local image (its calls.log line), its fixtures'
    set-up included: the toolkit reads no test hook, it reads RELEASE_IMAGE_CALLER."""
    _run.update(doing=item.nodeid, shared_s=0.0, setup_s=0.0)
    with settings.given("RELEASE_IMAGE_CALLER", item.nodeid):
        yield
    _run["doing"] = "between tests"


def _own_time(item: pytest.Item, report: pytest.TestReport) -> None:
    """A test's own time: set-up and call, less the shared fixtures it paid for (recorded above)."""
    if report.when == "setup":
        _run["setup_s"] = report.duration
        if report.passed:
            return
    call = report.duration if report.when == "call" else 0.0
    own = float(str(_run["setup_s"])) + call - float(str(_run["shared_s"]))
    if own >= 1.0:
        slow = item.get_closest_marker("slow") is not None
        _note(
            {
                "kind": "test",
                "test": item.nodeid,
                "own_s": round(own, 1),
                "end": round(time.time(), 1),
                "slow": slow,
                **ci_time.machine_load(),
            }
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under CI, a test over ci_time.SLOW_S of its own that is not marked `slow` fails the run
    (RELEASE_SLOW_CHECK=warn: named only, for a run that measures)."""
    if hasattr(session.config, "workerinput") or not in_ci() or not isinstance(_run["directory"], Path):
        return
    if settings.text("RELEASE_SLOW_CHECK") == "warn":
        return
    if ci_time.unmarked_slow(ci_time.read(_run["directory"])) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's wheel store goes with the run (the controller's, after its account is printed)."""
    directory = _run["directory"]
    if hasattr(config, "workerinput") or not isinstance(directory, Path) or not directory.is_dir():
        return
    shutil.rmtree(ci_time.wheel_store(directory), ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    directory = _run["directory"]
    if hasattr(config, "workerinput") or not isinstance(directory, Path):
        return
    entries = ci_time.read(directory)
    if not entries:
        return
    terminalreporter.section("where the time went (tests/ci_time.py)")
    for line in ci_time.account_lines(entries):
        terminalreporter.write_line(line)
    for line in ci_time.store_lines(store.events(ci_time.wheel_store(directory))):
        terminalreporter.write_line(line)
    calls = ci_time.image_calls(ci_time.MAKE_IMAGE_RECORD, float(str(_run.get("started", 0.0))))
    for line in ci_time.image_call_lines(calls, ci_time.MAKE_IMAGE_RECORD):
        terminalreporter.write_line(line)
    near = ci_time.near_slow(entries)
    if near:
        terminalreporter.section(
            f"unmarked tests over half of {ci_time.SLOW_S:.0f} s (a busier machine may tip them)"
        )
        for o in near:
            terminalreporter.write_line(f"  {o.seconds:7.1f} s  {o.test}")
    offenders = ci_time.unmarked_slow(entries)
    if offenders:
        terminalreporter.section(f"tests over {ci_time.SLOW_S:.0f} s of their own, not marked slow")
        for o in offenders:
            busy = f" (load {o.load:.1f}: limit {o.limit:.0f} s)" if o.limit > ci_time.SLOW_S else ""
            terminalreporter.write_line(f"  {o.seconds:7.1f} s  {o.test}{busy}: mark it @pytest.mark.slow")
        if in_ci() and settings.text("RELEASE_SLOW_CHECK") != "warn":
            terminalreporter.write_line("under CI this fails the run: the `slow` marker must tell the truth")
