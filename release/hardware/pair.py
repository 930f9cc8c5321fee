"""The prefill/decode pair's exchange through the address file: its folder, the detached prefill
leg (--detach, --attach), decode's bounded waits for the address (a local file or this run's
artifact), and prefill's published failure. Every wait has a deadline and ends in one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release import process, settings
from release.config.names import ascii_int
from release.errors import SmokeError, UsageError
from release.hardware import fetch
from release.table import printable
from release.wheel import files


@dataclass(frozen=True)
class PairOptions:
    """What the pair's exchange takes from `release hardware`'s flags, and nothing else."""

    address_file: Path | None
    wait: float = 1800.0
    timeout: float = 600.0
    done_artifact: str | None = None
    address_artifact: str = ""
    repo: str = ""
    """OWNER/NAME of the run whose artifacts the legs exchange (--repo)."""

    def address(self) -> Path:
        """--address-file, which the exchange needs."""
        if self.address_file is None:
            msg = "--address-file: name the file the prefill leg writes the master's address to"
            raise UsageError(msg)
        return Path(self.address_file)


def make_folder(args: PairOptions) -> None:
    """The folder of --address-file exists before any side writes there (made, as `mkdir -p`), or
    one line says why it cannot."""
    if args.address_file is None:
        return
    folder = Path(args.address_file).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"--address-file {args.address_file}: cannot make its folder {folder} ({exc.strerror})"
        raise UsageError(msg) from None
    if Path(args.address_file).is_dir():
        msg = f"--address-file {args.address_file} is a directory: name a file in it (master.json)"
        raise UsageError(msg)


def state(address_file: Path) -> tuple[Path, Path, Path]:
    """The detached prefill leg's pid, record and log files, beside the address file."""
    base = str(address_file)
    return Path(base + ".leg.pid"), Path(base + ".leg.json"), Path(base + ".leg.log")


def detach(argv: list[str], args: PairOptions) -> int:
    """Start this same leg in the background; return once the engine wrote the master's address."""
    address = args.address()
    pid_file, record, log_file = state(address)
    address.parent.mkdir(parents=True, exist_ok=True)
    for old in (address, Path(str(address) + ".done"), pid_file, record):
        old.unlink(missing_ok=True)
    child = [a for a in argv if a != "--detach"]
    if "--json" not in child:
        child.append("--json")
    with record.open("w") as out, log_file.open("w") as err:
        proc = process.start([sys.executable, "-m", "release", *child], stdout=out, stderr=err)
    pid_file.write_text(f"{proc.pid}\n", encoding="utf-8")
    end = time.monotonic() + args.timeout
    while not address.exists():
        failed = None
        if proc.poll() is not None:
            text = read_small(log_file, MAX_LOG_BYTES)
            said = [ln.strip() for ln in text.splitlines() if ln.strip()]
            last = said[-1][-300:] if said else "no output"
            failed = f"the prefill leg ended (exit {proc.returncode}) before writing {address}: {last}"
            failed += f" (log: {log_file})"
        elif time.monotonic() > end:
            failed = (
                f"the prefill leg wrote no address to {address} within {args.timeout:g}s (log: {log_file})"
            )
            os.killpg(proc.pid, signal.SIGTERM)
        if failed:
            publish_failure(address, failed)
            raise SmokeError(failed)
        time.sleep(0.5)
    served = read_small(address, MAX_ADDRESS_BYTES).strip()
    print(f"prefill serving (pid {proc.pid:d}): {printable(served)}")
    print(f"log: {printable(str(log_file))}; `release hardware --attach` waits for it and reports")
    return 0


def publish_failure(address: Path, why: str) -> None:
    """Prefill failed before its master's address existed: its first line goes where the address
    would, so decode reads it and stops at once instead of waiting out --wait."""
    with contextlib.suppress(OSError):
        write_atomic(address, json.dumps({"error": why.splitlines()[0] if why else "failed"}) + "\n")


def write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child of ours that has ended but not been reaped is a zombie: reap it.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def attach(args: PairOptions, log: Callable[[str], None]) -> dict[str, Any]:
    """Wait (bounded by --wait) for the detached prefill leg; pass decode's done artifact on."""
    address = args.address()
    pid_file, record, log_file = state(address)
    try:
        pid = ascii_int(read_small(pid_file, 64).strip(), low=1, high=1 << 22)
    except OSError:
        pid = None
    if pid is None:
        msg = f"{pid_file}: no detached prefill leg to attach to (run --role prefill --detach first)"
        raise UsageError(msg) from None
    done_file = Path(str(address) + ".done")
    end = time.monotonic() + args.wait
    if args.done_artifact and alive(pid):
        with tempfile.TemporaryDirectory(prefix="release-done-") as into:

            def stop() -> str | None:
                return None if alive(pid) else "the prefill leg has ended"

            try:
                fetch.await_artifact(
                    args.done_artifact, run_id=run_id(), repository=args.repo,
                    dest=Path(into), deadline=args.wait, alive=stop, log=log,
                )  # fmt: skip
                fetch.copy_into(Path(into), done_file)
            except SmokeError as exc:
                log(str(exc))
    while alive(pid) and record_of(record) is None:
        if time.monotonic() > end:
            os.kill(pid, 15)
            msg = f"the prefill leg (pid {pid}) still served after {args.wait:g}s; stopped it ({log_file})"
            raise SmokeError(msg)
        time.sleep(1)
    for line in read_small(log_file, MAX_LOG_BYTES).splitlines():
        log(f"  {printable(line)}")
    value = record_of(record)
    if value is None:
        msg = f"the prefill leg left no record in {record} (log: {log_file})"
        raise SmokeError(msg)
    return value


def record_of(path: Path) -> dict[str, Any] | None:
    """The detached leg's record once it is whole (the leg prints it last, when it is done);
    a process that lingers (a zombie no one reaps) does not keep --attach waiting."""
    try:
        value = files.read_json(path, MAX_RECORD_BYTES)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and "checks" in value else None


def run_id() -> str:
    run_id = settings.raw("GITHUB_RUN_ID")
    if not run_id:
        msg = "the artifact exchange needs $GITHUB_RUN_ID (it runs in a GitHub Actions job)"
        raise UsageError(msg)
    return run_id


def await_address_artifact(args: PairOptions, log: Callable[[str], None]) -> None:
    address = args.address()
    address.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="release-address-") as into:
        fetch.await_artifact(
            args.address_artifact, run_id=run_id(), repository=args.repo,
            dest=Path(into), deadline=args.wait, log=log,
        )  # fmt: skip
        fetch.copy_into(Path(into), address)
    error = published_error(address)
    if error:
        msg = f"prefill published no master: {error}"
        raise SmokeError(msg)


def published_error(address: Path) -> str | None:
    """Prefill's published failure in the address file, or None (an address, or not JSON). A file
    that is not a regular one (a FIFO, a link to a device) or is too large ends the wait at once."""
    try:
        published = files.read_json(address, MAX_ADDRESS_BYTES)
    except (files.NotRegularFile, files.TooLargeFile) as exc:
        why = files.reason(exc)
        msg = f"--address-file {printable(str(address))}: {why}: name a regular file (master.json)"
        raise UsageError(msg) from None
    except (OSError, ValueError):
        return None
    if isinstance(published, dict) and published.get("error"):
        return printable(str(published["error"]))
    return None


MAX_ADDRESS_BYTES = 64 << 10
"""The largest address file read (a master's address, or prefill's one-line failure)."""
MAX_LOG_BYTES = 16 << 20
MAX_RECORD_BYTES = 16 << 20


def read_small(path: Path, limit: int) -> str:
    """A small text file of the exchange (regular, at most `limit` bytes, undecodable bytes
    replaced); OSError otherwise, at once (a FIFO never blocks)."""
    return files.read_bounded(path, limit).decode("utf-8", errors="replace")


def await_address_file(args: PairOptions, log: Callable[[str], None]) -> None:
    """decode on this machine: wait (bounded by --wait) for prefill to publish the master's address
    in --address-file; prefill's published failure, or the deadline, ends it in one line."""
    address = args.address()
    end = time.monotonic() + args.wait
    if not address.exists():
        log(f"waiting up to {args.wait:g}s for prefill to write the master's address to {address}")
    while not address.exists():
        if time.monotonic() > end:
            msg = (
                f"no master address in {address} after {args.wait:g}s: start the prefill leg "
                f"(--role prefill --address-file {address}) before or beside decode, or raise --wait"
            )
            raise SmokeError(msg)
        time.sleep(min(0.5, args.wait))
    error = published_error(address)
    if error:
        msg = f"prefill published no master: {error}"
        raise SmokeError(msg)
