"""python -m xfer selftest --role prefill|decode --master HOST:PORT

The two-node tier of disaggregated serving: a prefill engine registers a buffer (GPU memory with
--device) filled with a known pattern and serves it; a decode engine on another machine finds it
through the master, reads it and checks every byte, then writes its own pattern into the prefill
buffer and reads it back. Prefill serves until SIGTERM (or --serve-seconds) and then checks that
the decode's write landed. Each side prints one JSON report with "ok".
"""

from __future__ import annotations

import hashlib
import signal
import socket
import threading
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


def prefill(master: str, n: int, device: bool, serve_seconds: float, ready: Any = None) -> dict:
    report = _base(PREFILL, master, n, device)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    engine = Engine(PREFILL, master, host=local_address(master))
    buf = _Buffer(engine, n, device)
    try:
        served = pattern(n, PREFILL)
        buf.fill(served)
        report["registration"] = buf.register()
        report.update(endpoint=engine.endpoint, device=buf.device, served_sha256=_sha(served))
        if ready is not None:
            print(f"prefill serving {n} bytes at {engine.endpoint} (segment {PREFILL!r})", file=ready, flush=True)
        stop.wait(serve_seconds)
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
    return report


def decode(master: str, n: int, device: bool) -> dict:
    report = _base(DECODE, master, n, device)
    engine = Engine(DECODE, master, host=local_address(master))
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
    return report
