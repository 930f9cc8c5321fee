"""A store of container-built wheels named by their inputs, shared by every build of one run.

`release build --container` keys each wheel by everything it is made from (`container_keys`: the
project cibuildwheel copies in, the image's ID, cibuildwheel's version and settings for that one
identifier, `SOURCE_DATE_EPOCH`). Its stamps live in the checkout, so a second checkout of the same
project (each job of a rehearsal, each test's copy of the repository) compiles the same wheel again.
Where `RELEASE_WHEEL_STORE` names a directory, a build first looks there: `<store>/<key>/` holds the
wheel, its verify report and a stamp of its SHA-256, and a build of that key takes it (verified
again, as an up-to-date wheel of the checkout is). What it builds it puts there. The test suite
sets it for the whole run (issue 60), so each wheel is compiled once per run; `release reproduce`
never looks (it exists to compile again).

Two builds of one key at once: the second waits on the key's lock and then takes the first's
wheel. Each put is a rename of a complete directory, and every event is a file of `events/` (key,
wheel, `built` or `reused`) that the test run's account counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from release import atomic, settings
from release.builder.reuse import remember, up_to_date
from release.machine.lock import build_lock
from release.wheel.files import read_json
from release.wheel.names import report_path

STAMP = "stamp.json"
EVENTS = "events"


def store_directory() -> Path | None:
    """The run's store (`RELEASE_WHEEL_STORE`), or None: no store, each checkout its own stamps."""
    return settings.path("RELEASE_WHEEL_STORE")


def _shared_dir(store: Path, *parts: str) -> Path:
    """The store, or a directory in it, that every user of the run writes in (a rehearsal's jobs run
    as `runner`, the test process as root): each level sticky and world-writable, as /tmp."""
    levels = [store, *(store.joinpath(*parts[: i + 1]) for i in range(len(parts)))]
    for path in levels:
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):  # made by another user, who opened it already
            path.chmod(0o1777)
    return levels[-1]


def _shared_file(path: Path) -> None:
    """A lock file that another user can open for writing too (build_lock opens it read-write)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with contextlib.suppress(PermissionError):
            os.fchmod(fd, 0o666)
    finally:
        os.close(fd)


@contextlib.contextmanager
def holding(store: Path | None, keys: Sequence[str], *, wait_s: float) -> Iterator[None]:
    """Hold the locks of `keys` (sorted: two builds of overlapping keys cannot wait on each other);
    no store, nothing to hold."""
    if store is None:
        yield
        return
    locks = _shared_dir(store, "locks")
    with contextlib.ExitStack() as stack:
        for key in sorted(set(keys)):
            _shared_file(locks / f"{key}.lock")
            stack.enter_context(
                build_lock(locks, what=f"the stored wheel {key[:12]}", wait_s=wait_s, name=f"{key}.lock")
            )
        yield


def take(store: Path | None, key: str | None) -> Path | None:
    """The stored wheel of `key`, unchanged (its SHA-256) and beside its report, noted as reused;
    None when absent (or no store, no key)."""
    if store is None or key is None:
        return None
    home = store / key
    wheel = up_to_date(home / STAMP, key, home)
    if wheel is not None:
        note(store, key, wheel.name, "reused")
    return wheel


def keep(store: Path | None, key: str, wheel: Path, *, did: str = "built") -> None:
    """Put the wheel of `key` in the store, noted as `did`: `built` here, or `kept` (a checkout's
    own last build, up to date, that other checkouts may now take). No store, or the key stored
    already: nothing."""
    if store is None or (store / key).is_dir():
        return
    put(store, key, wheel)
    note(store, key, wheel.name, did)


def put(store: Path, key: str, wheel: Path) -> None:
    """Keep `wheel` (and its report) as the wheel of `key`: copied into a scratch directory of the
    store, stamped, then renamed into place; a key already stored keeps the first."""
    if (store / key).is_dir():
        return
    _shared_dir(store)
    scratch = Path(tempfile.mkdtemp(prefix=".put-", dir=store))
    try:
        scratch.chmod(0o755)
        atomic.copy_file(report_path(wheel), report_path(scratch / wheel.name))
        atomic.copy_file(wheel, scratch / wheel.name)
        remember(scratch / STAMP, key, scratch / wheel.name, scratch)
        with contextlib.suppress(FileExistsError, OSError):
            scratch.rename(store / key)
    finally:
        atomic.remove_tree(scratch, root=store)


def note(store: Path, key: str, wheel: str, did: str) -> None:
    """One event, a file of its own in `<store>/events/` (no two processes write one file)."""
    directory = _shared_dir(store, EVENTS)
    record = {"key": key, "wheel": wheel, "did": did, "when": round(time.time(), 3)}
    name = f"{time.time_ns()}-{os.getpid()}-{key[:12]}-{did}.json"
    atomic.write_text(directory / name, json.dumps(record))


def events(store: Path) -> list[dict[str, object]]:
    """The store's events, each a dict (files that are not one are left out)."""
    directory = store / EVENTS
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            entry = read_json(path, 64 << 10)
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found
