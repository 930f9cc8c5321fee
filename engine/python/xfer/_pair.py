"""python -m xfer selftest --role prefill|decode --master HOST:PORT

The two-node tier of disaggregated serving: a prefill engine registers a buffer (GPU memory with
--device) filled with a known pattern and serves it; a decode engine on another machine finds it
through the master, reads it and checks every byte, then writes its own pattern into the prefill
buffer and reads it back. Prefill serves until SIGTERM (or --serve-seconds) and then checks that
the decode's write landed. Each side prints one JSON report with "ok".

Without --master, prefill starts the packaged xfer-master itself and writes its address to
--address-file (under a temporary name, then renamed); decode waits a bounded time for that file,
and when it is done writes `<address-file>.done`, which ends prefill's serving at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from . import _build_info
from ._engine import Engine, resolve

PREFILL = "prefill"
DECODE = "decode"


def pattern(n: int, label: str) -> bytes:
    """n deterministic bytes both machines can produce without talking to each other."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{label}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def local_address(master: str) -> str:
    """The address of this machine that the master (and so the peer) can reach."""
    host, _, port = master.rpartition(":")
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((host or "127.0.0.1", int(port or 0) or 9))
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


class _Buffer:
    """n bytes of host memory, or device memory staged through a host copy."""

    def __init__(self, engine: Engine, n: int, device: bool) -> None:
        self.engine, self.n = engine, n
        self.device = device and engine.device_count > 0
        self.host = bytearray(n)
        self.host_ptr = resolve(self.host)[0]
        self.ptr = engine.device_alloc(n) if self.device else self.host_ptr

    def fill(self, data: bytes) -> None:
        self.host[:] = data
        if self.device:
            self.engine.copy(self.ptr, self.host_ptr, self.n)

    def fetch(self) -> bytes:
        if self.device:
            self.engine.copy(self.host_ptr, self.ptr, self.n)
        return bytes(self.host)

    def register(self) -> dict:
        return self.engine.register(self.ptr, self.n) if self.device else self.engine.register(self.host)

    def free(self) -> None:
        if self.device:
            self.engine.device_free(self.ptr)


def _base(role: str, master: str, n: int, device: bool) -> dict[str, Any]:
    return {"ok": False, "role": role, "master": master, "bytes": n, "device_requested": device,
            "backend": _build_info.BACKEND, "version": _build_info.VERSION}


def done_path(address_file: str) -> Path:
    return Path(address_file + ".done")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def wait_for_address(address_file: str, wait_seconds: float) -> str:
    """The master address prefill wrote, waiting at most wait_seconds for the file."""
    path = Path(address_file)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return str(json.loads(path.read_text())["master"])
        except (OSError, ValueError, KeyError):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no master address in {address_file} after {wait_seconds:g}s") from None
            time.sleep(0.1)


def _serve(stop: threading.Event, serve_seconds: float, done: Path | None) -> str:
    """Wait for SIGTERM, decode's done file or the deadline; say which."""
    deadline = time.monotonic() + serve_seconds
    while True:
        left = deadline - time.monotonic()
        if stop.is_set():
            return "signal"
        if done is not None and done.exists():
            return "decode done"
        if left <= 0:
            return f"deadline ({serve_seconds:g}s)"
        stop.wait(min(0.1, left))


def prefill(master: str | None, n: int, device: bool, serve_seconds: float, ready: Any = None,
            address_file: str | None = None, master_host: str = "127.0.0.1") -> dict:
    """Serve a pattern-filled buffer; without `master`, start the packaged master and publish its address."""
    from ._selftest import find_master, start_master, stop_master

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    proc = None
    if not master:
        path = find_master()
        if path is None:
            report = _base(PREFILL, "", n, device)
            report["error"] = "xfer-master not found (not in the scripts directory nor on PATH; set XFER_MASTER)"
            return report
        proc, master = start_master(path, master_host)
        host, _, port = master.rpartition(":")
        if host in ("0.0.0.0", ""):
            master = f"{local_address('192.0.2.1:9')}:{port}"
    report = _base(PREFILL, master, n, device)
    report["master_started"] = proc is not None
    done = done_path(address_file) if address_file else None
    if done is not None:
        done.unlink(missing_ok=True)
    try:
        engine = Engine(PREFILL, master, host=local_address(master))
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        if proc is not None:
            report["master_exit_code"] = stop_master(proc)
        return report
    buf = _Buffer(engine, n, device)
    try:
        served = pattern(n, PREFILL)
        buf.fill(served)
        report["registration"] = buf.register()
        report.update(endpoint=engine.endpoint, device=buf.device, served_sha256=_sha(served))
        if address_file:
            _write_atomic(Path(address_file), json.dumps({"master": master, "prefill": engine.endpoint}) + "\n")
        if ready is not None:
            print(f"prefill serving {n} bytes at {engine.endpoint} (segment {PREFILL!r}, master {master})",
                  file=ready, flush=True)
        report["served_until"] = _serve(stop, serve_seconds, done)
        got = buf.fetch()
        expected = pattern(n, DECODE)
        report["received"] = {"bytes": n, "sha256": _sha(got), "verified": got == expected}
        report["ok"] = got == expected
        if not report["ok"]:
            report["error"] = "the decode side's write did not arrive (buffer does not hold its pattern)"
    except Exception as exc:  # the JSON report is the product
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        buf.free()
        engine.close()
        if proc is not None:
            report["master_exit_code"] = stop_master(proc)
    return report


def decode(master: str | None, n: int, device: bool, address_file: str | None = None,
           wait_seconds: float = 120.0) -> dict:
    """Read prefill's buffer and verify it, write ours back; with `address_file`, find the master there."""
    report = _base(DECODE, master or "", n, device)
    try:
        if not master:
            if not address_file:
                raise ValueError("decode needs --master or --address-file")
            master = wait_for_address(address_file, wait_seconds)
            report["master"] = master
        engine = Engine(DECODE, master, host=local_address(master))
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        if address_file:
            _write_atomic(done_path(address_file), "failed\n")
        return report
    local = back = None
    try:
        regions = engine.peer(PREFILL)["regions"]
        region = next(r for r in regions if r["length"] >= n)
        remote = region["addr"]
        local, back = _Buffer(engine, n, device), _Buffer(engine, n, device)
        local.register()
        back.register()
        report["device"] = local.device
        engine.read([(local.ptr, PREFILL, remote, n)])
        got = local.fetch()
        expected = pattern(n, PREFILL)
        report["read"] = {"bytes": n, "sha256": _sha(got), "verified": got == expected}
        mine = pattern(n, DECODE)
        local.fill(mine)
        engine.write([(local.ptr, PREFILL, remote, n)])
        engine.read([(back.ptr, PREFILL, remote, n)])
        again = back.fetch()
        report["write"] = {"bytes": n, "sha256": _sha(mine), "verified": again == mine}
        report["ok"] = report["read"]["verified"] and report["write"]["verified"]
    except StopIteration:
        report["error"] = f"segment {PREFILL!r} registers no region of {n} bytes"
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for buf in (local, back):
            if buf is not None:
                buf.free()
        engine.close()
        if address_file:
            _write_atomic(done_path(address_file), "ok\n" if report["ok"] else "failed\n")
    return report
