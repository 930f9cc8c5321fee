"""Where a hardware leg gets its wheel and meets its peer: the GitHub Release of the tag (through
the GitHub CLI, `gh`), and this workflow run's artifacts for the two-node address exchange.

Every wait has a total deadline; `gh` is the only program called, so a local stand-in can take
its place (the rehearsal's)."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from release import process
from release.config import pythons
from release.errors import SmokeError
from release.wheel.files import walk_files
from release.wheel.names import REPORT_SUFFIX

POLL_SECONDS = 5.0


def wheel_pattern(distribution: str, python: str, machine: str | None = None) -> str:
    """The release asset glob of one distribution's wheel for one Python (PEP 427 spelling), and
    one machine where the release has wheels of several (`*_aarch64.whl`)."""
    dist = re.sub(r"[-_.]+", "_", distribution).lower()
    record = pythons.python(python)  # 3.14t: cp314-cp314t
    return f"{dist}-*-{record.interpreter_tag}-{record.abi_tag}-*{f'_{machine}' if machine else ''}.whl"


def _gh(argv: list[str], timeout: float) -> process.Result:
    try:
        return process.run(["gh", *argv], timeout=timeout)
    except FileNotFoundError:
        msg = "gh (the GitHub CLI) is not on PATH: install it, or give --wheel or --wheelhouse"
        raise SmokeError(msg) from None
    except process.TimedOut:
        msg = f"gh {' '.join(argv[:3])}: no answer within {timeout:g}s"
        raise SmokeError(msg) from None


def from_release(tag: str, repository: str, pattern: str, dest: Path, timeout: float = 600) -> Path:
    """The one wheel matching `pattern` in the GitHub Release `tag`, with its verify report."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl*"):
        old.unlink()
    argv = ["release", "download", tag, "--repo", repository, "--dir", str(dest),
            "--pattern", pattern, "--pattern", f"{pattern}{REPORT_SUFFIX}"]  # fmt: skip
    done = _gh(argv, timeout)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        msg = f"gh release download {tag} --repo {repository} --pattern {pattern!r}: {why}"
        raise SmokeError(msg)
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        msg = (
            f"the GitHub Release {tag} of {repository} holds {len(wheels)} wheels matching {pattern!r} "
            f"({', '.join(w.name for w in wheels) or 'none'}); this leg needs exactly one"
        )
        raise SmokeError(msg)
    return wheels[0]


def await_artifact(
    name: str,
    *,
    run_id: str,
    repository: str,
    dest: Path,
    deadline: float,
    alive: Callable[[], str | None] = lambda: None,
    log: Callable[[str], None] = print,
) -> Path:
    """Poll this run's artifact `name` until it exists (uploaded by the peer job), at most
    `deadline` seconds in total. `alive` returns why to stop waiting early (a dead peer process)."""
    end = time.monotonic() + deadline
    log(f"waiting up to {deadline:g}s for artifact {name} of run {run_id}")
    last = ""
    while True:
        done = _gh(
            ["run", "download", run_id, "--repo", repository, "--name", name, "--dir", str(dest)],
            timeout=max(10.0, min(120.0, end - time.monotonic())),
        )
        if done.returncode == 0:
            log(f"artifact {name} arrived")
            return dest
        last = (done.stderr.strip().splitlines() or [""])[-1]
        stop = alive()
        if stop:
            msg = f"stopped waiting for artifact {name}: {stop}"
            raise SmokeError(msg)
        if time.monotonic() + POLL_SECONDS > end:
            msg = f"artifact {name} of run {run_id} did not appear within {deadline:g}s (gh: {last})"
            raise SmokeError(msg)
        time.sleep(POLL_SECONDS)


def copy_into(source_dir: Path, target: Path) -> None:
    """The single file of a downloaded artifact directory, written to `target` atomically."""
    files = walk_files(source_dir)  # regular files: a link in a downloaded artifact is not followed
    if len(files) != 1:
        msg = f"{source_dir}: expected one file in the artifact, found {len(files)}"
        raise SmokeError(msg)
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(files[0], partial)
    partial.replace(target)
