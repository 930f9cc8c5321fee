"""Load and fault suite of the reference engine and its master.

Real processes on a real CPU build (engine core, xfer-master, Python binding), on loopback and
across two network namespaces joined by a veth pair (the servers in one, the clients in the
other). It covers 10,000 register/unregister cycles under a 1,024-descriptor limit, 5,000 idle
connections against each server, thread creation failing under an address-space limit, stalled
writers and readers during registration, peers killed in the middle of a frame, and the master
restarted under a live engine.

Asserted: nothing crashes, descriptor and thread counts (/proc/PID/fd, /proc/PID/status) come back
to where they were, registration latency with stalled peers stays within a generous ratio of the
latency without them, and every completed transfer is verified by hash. The figures are printed
at the end of the module, with or without -s.

The helper processes are this file run as a script: ``python test_engine_faults.py ROLE ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import queue
import random
import resource
import select
import selectors
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "engine"
HERE = Path(__file__).resolve()

# Wire format (engine/include/xfer/wire.h).
MAGIC = 0x31524658
OP_WRITE, OP_READ, OP_RESPONSE = 1, 2, 3
ST_OK, ST_OUT_OF_BOUNDS, ST_BUSY = 0, 1, 4
HEADER = struct.Struct("<IBBHIIQQQ")  # magic, version, opcode, flags, status, reserved, id, addr, length


def frame(op: int, addr: int, length: int, request_id: int = 1) -> bytes:
    return HEADER.pack(MAGIC, 1, op, 0, 0, 0, request_id, addr, length)


def pattern(label: str, n: int) -> bytes:
    """n deterministic bytes, the same in every process."""
    return random.Random(label).randbytes(n)


def sha(data: bytes | bytearray) -> str:
    return hashlib.sha256(data).hexdigest()


def raise_nofile(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, max(n, hard)))


# =========================================================================== helper processes


def _reply(**kw: Any) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def role_engine(argv: list[str]) -> int:
    """A live engine driven by JSON lines on stdin: serve, register, transfer, measure."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args(argv)
    import xfer

    eng = xfer.Engine(a.name, a.master, host=a.host)
    keep: dict[int, bytearray] = {}
    loops: dict[str, dict] = {}

    def serve(size: int, label: str) -> dict:
        buf = bytearray(pattern(label, size))
        info = eng.register(buf)
        keep[info["addr"]] = buf
        return {"addr": info["addr"], "length": size, "sha256": sha(buf)}

    def digest(addr: int, offset: int = 0, length: int | None = None) -> dict:
        buf = keep[addr]
        end = len(buf) if length is None else offset + length
        return {"sha256": sha(buf[offset:end])}

    def unregister(addr: int) -> dict:
        t0 = time.perf_counter()
        eng.unregister(addr)
        ms = (time.perf_counter() - t0) * 1e3
        keep.pop(addr, None)
        return {"ms": ms}

    def cycles(n: int, size: int) -> dict:
        buf = bytearray(size)
        errors, first = 0, ""
        t0 = time.perf_counter()
        for _ in range(n):
            try:
                eng.register(buf)
                eng.unregister(buf)
            except Exception as exc:  # counted, the loop goes on
                errors += 1
                first = first or f"{type(exc).__name__}: {exc}"
        return {"n": n, "errors": errors, "first_error": first, "seconds": time.perf_counter() - t0}

    def latency(n: int, size: int) -> dict:
        buf = bytearray(size)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            eng.register(buf)
            eng.unregister(buf)
            samples.append((time.perf_counter() - t0) * 1e3)
        samples.sort()
        return {
            "median_ms": statistics.median(samples),
            "p90_ms": samples[int(0.9 * n)],
            "max_ms": samples[-1],
        }

    def register_try(size: int) -> dict:
        buf = bytearray(size)
        try:
            info = eng.register(buf)
        except Exception as exc:
            return {"registered": False, "error": f"{type(exc).__name__}: {exc}"}
        keep[info["addr"]] = buf
        return {"registered": True, "addr": info["addr"]}

    def peer(segment: str) -> dict:
        return {"regions": eng.peer(segment)["regions"]}

    def transfer(segment: str, remote: int, length: int, label: str) -> dict:
        src = pattern(label, length)
        eng.write([(src, segment, remote, length)])
        back = bytearray(length)
        eng.read([(back, segment, remote, length)])
        return {"written_sha256": sha(src), "read_sha256": sha(back), "verified": sha(back) == sha(src)}

    def read(segment: str, remote: int, length: int) -> dict:
        back = bytearray(length)
        eng.read([(back, segment, remote, length)])
        return {"sha256": sha(back)}

    def loop(tag: str, kind: str, segment: str, remote: int, length: int) -> dict:
        state = {"stop": False, "iterations": 0, "error": ""}
        buf = bytearray(pattern(tag, length))

        def run() -> None:
            try:
                while not state["stop"]:
                    op = eng.write if kind == "write" else eng.read
                    op([(buf, segment, remote, length)])
                    state["iterations"] += 1
            except Exception as exc:
                state["error"] = f"{type(exc).__name__}: {exc}"

        state["thread"] = threading.Thread(target=run, daemon=True)
        state["thread"].start()
        loops[tag] = state
        return {"started": True}

    def join_loop(tag: str, wait: float) -> dict:
        state = loops.pop(tag)
        state["stop"] = True
        state["thread"].join(wait)
        return {
            "finished": not state["thread"].is_alive(),
            "iterations": state["iterations"],
            "error": state["error"],
        }

    ops = {
        f.__name__: f
        for f in (
            serve,
            digest,
            unregister,
            cycles,
            latency,
            register_try,
            peer,
            transfer,
            read,
            loop,
            join_loop,
        )
    }
    _reply(ready=True, pid=os.getpid(), port=eng.port, endpoint=eng.endpoint)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.pop("op")
        if op == "quit":
            eng.close()
            _reply(ok=True)
            return 0
        try:
            _reply(ok=True, **ops[op](**cmd))
        except Exception as exc:
            _reply(ok=False, error=f"{type(exc).__name__}: {exc}")
    eng.close()
    return 0


def _classify(data: bytes, proto: str) -> str | None:
    """The refusal text in what a server sent first, or None when it is not a refusal."""
    if proto == "engine":
        if len(data) < HEADER.size:
            return None
        fields = HEADER.unpack(data[: HEADER.size])
        if fields[0] != MAGIC or fields[2] != OP_RESPONSE or fields[4] != ST_BUSY:
            return None
        return data[HEADER.size : HEADER.size + fields[8]].decode(errors="replace")
    text = data.decode(errors="replace").strip()
    return text if text.startswith("ERR busy:") else None


def role_idle(argv: list[str]) -> int:
    """Opens COUNT connections and leaves them idle; reports which the server kept or refused."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--proto", choices=("engine", "master"), required=True)
    a = ap.parse_args(argv)
    raise_nofile(a.count + 256)
    socks: list[socket.socket] = []
    failed, first_failure = 0, ""
    t0 = time.perf_counter()
    # Non-blocking connects, 250 in flight at a time.
    for start in range(0, a.count, 250):
        group: dict[int, socket.socket] = {}
        poller = select.poll()
        for _ in range(min(250, a.count - start)):
            s = socket.socket()
            s.setblocking(False)
            rc = s.connect_ex((a.host, a.port))
            if rc not in (0, errno.EINPROGRESS):
                failed += 1
                first_failure = first_failure or os.strerror(rc)
                s.close()
                continue
            group[s.fileno()] = s
            poller.register(s, select.POLLOUT)
        deadline = time.monotonic() + 30
        while group and time.monotonic() < deadline:
            for fd, _ in poller.poll(1000):
                s = group.pop(fd)
                poller.unregister(fd)
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    failed += 1
                    first_failure = first_failure or os.strerror(err)
                    s.close()
                else:
                    socks.append(s)
        for s in group.values():
            failed += 1
            first_failure = first_failure or "connect timed out"
            s.close()
    connect_s = time.perf_counter() - t0
    time.sleep(0.5)  # refusals in flight arrive
    kept: list[socket.socket] = []
    refused, closed, reset = 0, 0, 0
    reasons: dict[str, int] = {}
    for s in socks:
        try:
            data = s.recv(8192)
        except BlockingIOError:
            kept.append(s)
            continue
        except ConnectionResetError:
            reset += 1
            s.close()
            continue
        why = _classify(data, a.proto) if data else None
        if why is not None:
            refused += 1
            reasons[why] = reasons.get(why, 0) + 1
        else:
            closed += 1
        s.close()
    _reply(
        count=a.count,
        connected=len(socks),
        failed=failed,
        first_failure=first_failure,
        kept=len(kept),
        refused=refused,
        closed_without_reason=closed,
        reset=reset,
        reasons=reasons,
        connect_seconds=connect_s,
    )
    for line in sys.stdin:
        words = line.split()
        if words and words[0] == "watch":
            # How many of the kept connections the server closes (idle timeout) within N seconds.
            deadline = time.monotonic() + float(words[1])
            sel = selectors.DefaultSelector()
            for s in kept:
                sel.register(s, selectors.EVENT_READ)
            open_left, last = len(kept), 0.0
            start = time.monotonic()
            while open_left and time.monotonic() < deadline:
                for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    try:
                        data = key.fileobj.recv(64)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fileobj)
                        open_left -= 1
                        last = time.monotonic() - start
            _reply(closed_by_server=len(kept) - open_left, still_open=open_left, last_close_s=last)
        else:
            break
    for s in kept:
        s.close()
    _reply(done=True)
    return 0


def role_stall(argv: list[str]) -> int:
    """COUNT peers that start a frame and stop: writers after 1 KiB of payload, readers never read."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--kind", choices=("write", "read"), required=True)
    ap.add_argument("--addr", type=int, required=True)
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--count", type=int, default=1)
    a = ap.parse_args(argv)
    payload = bytes(a.length) if a.kind == "write" else b""
    socks = []
    for i in range(a.count):
        s = socket.create_connection((a.host, a.port), timeout=30)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        if a.kind == "write":
            s.sendall(frame(OP_WRITE, a.addr, a.length, i) + payload[:1024])
        else:
            s.sendall(frame(OP_READ, a.addr, a.length, i))
        socks.append(s)
    _reply(stalled=a.count)
    sys.stdin.readline()  # "resume"
    results = []
    for s in socks:
        if a.kind == "write":
            s.sendall(payload[1024:])
            head = _recv_exact(s, HEADER.size)
            status = HEADER.unpack(head)[4] if len(head) == HEADER.size else None
            results.append({"status": status})
        else:
            got = 0
            while True:
                try:
                    chunk = s.recv(1 << 20)
                except OSError:
                    break
                if not chunk:
                    break
                got += len(chunk)
            results.append({"bytes": got, "complete": got == a.length + HEADER.size})
        s.close()
    _reply(results=results)
    return 0


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        try:
            chunk = s.recv(n - len(out))
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out


def role_midframe(argv: list[str]) -> int:
    """Peers that stop in the middle of a frame, COUNT per mode, in one process that waits to be killed:
    in a header (20 of its 40 bytes), in a WRITE payload (half sent), in a READ (1 MiB of it read)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--addr", type=int, required=True)
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--read-length", type=int, required=True)
    ap.add_argument("--count", type=int, default=1)
    a = ap.parse_args(argv)
    socks = []
    for mode in ("header", "write", "read"):
        for _ in range(a.count):
            s = socket.create_connection((a.host, a.port), timeout=30)
            if mode == "header":
                s.sendall(frame(OP_WRITE, a.addr, a.length)[:20])
            elif mode == "write":
                s.sendall(frame(OP_WRITE, a.addr, a.length) + bytes(a.length // 2))
            else:
                s.sendall(frame(OP_READ, a.addr, a.read_length))
                _recv_exact(s, 1 << 20)
            socks.append(s)
    _reply(ready=len(socks))
    time.sleep(3600)
    return 0


def _open_many(host: str, port: int, count: int, rcvbuf: int | None = None) -> list[socket.socket]:
    """count blocking connections (loopback connects are quick), made non-blocking."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(30)
        s.connect((host, port))
        s.setblocking(False)
        socks.append(s)
    return socks


def _closed_by_peer(s: socket.socket) -> bool:
    """True when the peer has closed s (EOF or reset); reads and drops whatever it had sent."""
    try:
        while True:
            data = s.recv(1 << 16)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def role_drip(argv: list[str]) -> int:
    """Slowloris: COUNT connections that each send one byte of a request line every EVERY seconds and
    never finish it; reports when the server closed them (seconds after they were all open)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--every", type=float, default=0.2)
    ap.add_argument("--limit", type=float, default=30)
    a = ap.parse_args(argv)
    raise_nofile(a.count + 256)
    socks = _open_many(a.host, a.port, a.count)
    start = time.monotonic()
    _reply(connected=len(socks))
    open_, closes, drips = set(range(len(socks))), [], 0
    while open_ and time.monotonic() - start < a.limit:
        for i in list(open_):
            s = socks[i]
            gone = _closed_by_peer(s)
            if not gone:
                try:
                    s.send(b"G")
                    drips += 1
                except OSError:
                    gone = True
            if gone:
                open_.discard(i)
                closes.append(time.monotonic() - start)
        time.sleep(a.every)
    _reply(
        count=len(socks),
        closed=len(closes),
        still_open=len(open_),
        drips=drips,
        first_close_s=min(closes, default=None),
        last_close_s=max(closes, default=None),
    )
    for s in socks:
        s.close()
    return 0


def role_nonreader(argv: list[str]) -> int:
    """COUNT connections that pipeline BYTES of PING requests each and never read a reply; reports how
    many the server disconnected, and when."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--bytes", type=int, required=True)
    ap.add_argument("--limit", type=float, default=60)
    a = ap.parse_args(argv)
    raise_nofile(a.count + 256)
    socks = _open_many(a.host, a.port, a.count, rcvbuf=4096)
    payload = b"PING\n" * (a.bytes // 5)
    sent = [0] * len(socks)
    start = time.monotonic()
    _reply(connected=len(socks))
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_WRITE, i)
    closes: list[float] = []
    full = 0
    while sel.get_map() and time.monotonic() - start < a.limit:
        for key, _ in sel.select(timeout=0.5):
            i, s = key.data, key.fileobj
            try:
                sent[i] += s.send(payload[sent[i] : sent[i] + (256 << 10)])
            except BlockingIOError:
                continue
            except OSError:
                sel.unregister(s)
                closes.append(time.monotonic() - start)
                continue
            if sent[i] >= len(payload):
                sel.unregister(s)
                full += 1
    # Those that sent everything: wait for the server to close them too.
    waiting = [s for i, s in enumerate(socks) if sent[i] >= len(payload)]
    while waiting and time.monotonic() - start < a.limit:
        still = []
        for s in waiting:
            if _closed_by_peer(s):
                closes.append(time.monotonic() - start)
            else:
                still.append(s)
        waiting = still
        time.sleep(0.1)
    _reply(
        count=len(socks),
        disconnected=len(closes),
        sent_everything=full,
        sent_mib=sum(sent) / (1 << 20),
        last_close_s=max(closes, default=None),
    )
    for s in socks:
        s.close()
    return 0


def role_slowread(argv: list[str]) -> int:
    """COUNT connections that each send REQUEST once and then read its reply one byte every EVERY
    seconds (a 4 KiB receive buffer); reports once every reply has begun (its first byte says OK or
    ERR), and again, with how many the server closed, on "quit" on stdin or after LIMIT seconds."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--request", required=True)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--limit", type=float, default=40)
    a = ap.parse_args(argv)
    raise_nofile(a.count + 256)
    socks = _open_many(a.host, a.port, a.count, rcvbuf=4096)
    for s in socks:
        s.setblocking(True)
        s.sendall(a.request.encode() + b"\n")
        s.setblocking(False)
    _reply(connected=len(socks))
    first: list[bytes] = [b""] * len(socks)
    closed = [False] * len(socks)
    got = [0] * len(socks)
    start, announced = time.monotonic(), False
    while time.monotonic() - start < a.limit:
        for i, s in enumerate(socks):
            if closed[i]:
                continue
            try:
                data = s.recv(1)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed[i] = True
                continue
            got[i] += 1
            if not first[i]:
                first[i] = data
        begun = sum(1 for i in range(len(socks)) if first[i] or closed[i])
        if not announced and begun == len(socks):
            announced = True
            _reply(begun=begun, ok=first.count(b"O"), err=first.count(b"E"), closed=sum(closed))
        ready, _, _ = select.select([sys.stdin], [], [], a.every)
        if ready and sys.stdin.readline().strip() == "quit":
            break
    _reply(count=len(socks), ok=first.count(b"O"), err=first.count(b"E"), closed=sum(closed), read=sum(got))
    for s in socks:
        s.close()
    return 0


ROLES = {
    "slowread": role_slowread,
    "engine": role_engine,
    "idle": role_idle,
    "stall": role_stall,
    "midframe": role_midframe,
    "drip": role_drip,
    "nonreader": role_nonreader,
}

if __name__ == "__main__":
    sys.exit(ROLES[sys.argv[1]](sys.argv[2:]))


# =========================================================================== test-side plumbing

pytestmark = pytest.mark.integration

FIGURES: list[tuple[str, str, str]] = []  # (case, topology, figures)
PROCESSES: dict[str, int] = {"started": 0, "crashed": 0}


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("check", True)
    kw.setdefault("text", True)
    kw.setdefault("capture_output", True)
    try:
        return subprocess.run([str(c) for c in cmd], **kw)  # noqa: PLW1510 (check is in kw)
    except subprocess.CalledProcessError as exc:
        msg = f"{cmd} failed ({exc.returncode}):\n{exc.stdout}\n{exc.stderr}"
        raise AssertionError(msg) from exc


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    msg = f"no Threads line for {pid}"
    raise AssertionError(msg)


def settle(pid: int, fds: int, threads: int, timeout: float = 10.0) -> tuple[int, int]:
    """Waits until pid holds no more descriptors and threads than before; returns what it holds."""
    deadline = time.monotonic() + timeout
    while True:
        now = proc_fds(pid), proc_threads(pid)
        if (now[0] <= fds and now[1] <= threads) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def _with_nofile(argv: list, nofile: int | None) -> list:
    """argv run under RLIMIT_NOFILE=nofile (soft and hard): prlimit sets it and execs, same pid."""
    return argv if nofile is None else ["prlimit", f"--nofile={nofile}:{nofile}", "--", *argv]


class Proc:
    """A child process that talks JSON lines; stdout is read on a thread so reads can time out."""

    def __init__(self, argv: list, *, env: dict, nofile: int | None = None, label: str) -> None:
        self.label = label
        self.p = subprocess.Popen(
            [str(a) for a in _with_nofile(argv, nofile)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        PROCESSES["started"] += 1
        self.lines: queue.Queue = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._pump, args=(self.p.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._collect, daemon=True).start()
        self.killed = False

    @staticmethod
    def _pump(stream: Any, q: queue.Queue) -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    def _collect(self) -> None:
        for line in self.p.stderr:
            self.err.append(line)

    @property
    def pid(self) -> int:
        return self.p.pid

    def line(self, timeout: float = 30) -> str:
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            msg = f"{self.label}: no answer within {timeout} s"
            raise AssertionError(msg) from None
        if got is None:
            msg = f"{self.label} exited ({self.p.wait()}): {''.join(self.err)[-2000:]}"
            raise AssertionError(msg)
        return got

    def json(self, timeout: float = 30) -> dict:
        return json.loads(self.line(timeout))

    def send(self, text: str) -> None:
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()

    def kill(self) -> None:
        self.killed = True
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)

    def alive(self) -> bool:
        return self.p.poll() is None

    def finish(self, timeout: float = 30) -> int:
        """Ends the process the way it is meant to end; counts a crash otherwise."""
        if self.killed:
            return 0
        if self.p.poll() is None:
            with contextlib.suppress(OSError):
                self.p.stdin.close()
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        rc = self.p.returncode
        if rc != 0:
            PROCESSES["crashed"] += 1
        return rc


class EngineProc(Proc):
    def __init__(
        self,
        topo: Topology,
        side: str,
        name: str,
        master: str,
        *,
        env: dict | None = None,
        nofile: int | None = None,
    ) -> None:
        host = topo.addr(side)
        argv = [*topo.prefix(side), sys.executable, HERE, "engine", "--name", name, "--master", master]
        argv += ["--host", host]
        super().__init__(argv, env={**topo.env, **(env or {})}, nofile=nofile, label=f"engine {name}")
        try:
            ready = self.json(60)
            assert ready.get("ready"), ready
        except BaseException:
            self.kill()  # not in anyone's cleanup list yet
            raise
        self.port = ready["port"]

    def call(self, op: str, timeout: float = 60, **kw: Any) -> dict:
        self.send(json.dumps({"op": op, **kw}))
        return self.json(timeout)

    def ok(self, op: str, timeout: float = 60, **kw: Any) -> dict:
        res = self.call(op, timeout, **kw)
        assert res["ok"], f"{self.label} {op}: {res.get('error')}"
        return res

    def quit(self) -> int:
        if self.alive():
            self.send(json.dumps({"op": "quit"}))
        return self.finish()


class MasterProc(Proc):
    def __init__(
        self,
        topo: Topology,
        master_bin: Path,
        *,
        port: int = 0,
        nofile: int | None = None,
        extra: list | None = None,
    ) -> None:
        argv = [*topo.prefix("server"), master_bin, "--host", "0.0.0.0", "--port", port, *(extra or [])]
        super().__init__(argv, env=topo.env, nofile=nofile, label="xfer-master")
        try:
            first = self.line(30)
            assert first.startswith("xfer-master listening on "), first
            self.limits_line = self.line(30).strip()
        except BaseException:
            self.kill()  # not in anyone's cleanup list yet
            raise
        self.port = int(first.rsplit(":", 1)[1])
        self.endpoint = f"{topo.addr('server')}:{self.port}"

    def stop(self) -> int:
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
        return self.finish()


class Topology:
    """Where the servers (master, serving engine) and the clients run."""

    name = "loopback"

    def __init__(self, env: dict) -> None:
        self.env = env

    def addr(self, side: str) -> str:
        return "127.0.0.1"

    def prefix(self, side: str) -> list:
        return []

    def helper(self, role: str, *args: Any, nofile: int | None = None, side: str = "client") -> Proc:
        argv = [*self.prefix(side), sys.executable, HERE, role, *map(str, args)]
        return Proc(argv, env=self.env, nofile=nofile, label=role)

    def close(self) -> None:
        pass


class Namespaces(Topology):
    """Two network namespaces joined by a veth pair: servers in one, clients in the other."""

    name = "netns"

    def __init__(self, env: dict) -> None:
        super().__init__(env)
        tag = f"{os.getpid() % 100000}"
        self.ns = {"server": f"xffs{tag}", "client": f"xffc{tag}"}
        self.ip = {"server": "10.213.9.1", "client": "10.213.9.2"}
        s, c = self.ns["server"], self.ns["client"]
        cmds = [
            ["ip", "netns", "add", s],
            ["ip", "netns", "add", c],
            ["ip", "link", "add", f"v{s}", "type", "veth", "peer", "name", f"v{c}"],
            ["ip", "link", "set", f"v{s}", "netns", s],
            ["ip", "link", "set", f"v{c}", "netns", c],
            ["ip", "-n", s, "addr", "add", f"{self.ip['server']}/24", "dev", f"v{s}"],
            ["ip", "-n", c, "addr", "add", f"{self.ip['client']}/24", "dev", f"v{c}"],
        ]
        cmds += [["ip", "-n", ns, "link", "set", dev, "up"] for ns in (s, c) for dev in ("lo", f"v{ns}")]
        try:
            for cmd in cmds:
                _run(cmd)
        except BaseException:
            self.close()
            raise

    def addr(self, side: str) -> str:
        return self.ip[side]

    def prefix(self, side: str) -> list:
        return ["ip", "netns", "exec", self.ns[side]]

    def close(self) -> None:
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


# =========================================================================== fixtures


def _binding_available() -> bool:
    for mod in ("pybind11", "nanobind"):
        if (
            subprocess.run(
                [sys.executable, "-c", f"import {mod}"], capture_output=True, check=False
            ).returncode
            == 0
        ):
            return True
    return False


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    """The CPU engine with its Python binding, built once (importable from <build>/python).
    XFER_FAULTS_BUILD names an existing build tree to reuse instead (a quicker edit-run loop)."""
    reuse = os.environ.get("XFER_FAULTS_BUILD")
    if reuse:
        return Path(reuse)
    if shutil.which("cmake") is None or (shutil.which("c++") is None and shutil.which("g++") is None):
        pytest.skip("cmake and a C++ compiler are required")
    if not _binding_available():
        pytest.skip("the Python binding's generator (pybind11 or nanobind) is not installed")
    out = tmp_path_factory.mktemp("faults-build")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    _run(
        [
            "cmake",
            "-S",
            ENGINE,
            "-B",
            out,
            *gen,
            *launcher,
            "-DXFER_BACKEND=cpu",
            "-DXFER_BUILD_TESTS=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DXFER_VERSION=0.1.0",
        ]
    )
    _run(["cmake", "--build", out, "-j", str(os.cpu_count() or 2)])
    assert (out / "xfer-master").is_file() and list((out / "python" / "xfer").glob("_xfer*.so"))
    return out


@pytest.fixture(scope="module")
def base_env(build) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "XFER_"))}
    env["PYTHONPATH"] = str(build / "python")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="module")
def master_bin(build) -> Path:
    return build / "xfer-master"


def _can_netns() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


@pytest.fixture(params=["loopback", "netns"])
def topo(request, base_env):
    if request.param == "netns":
        why = _can_netns()
        if why:
            pytest.skip(why)
        t: Topology = Namespaces(base_env)
    else:
        t = Topology(base_env)
    try:
        yield t
    finally:
        t.close()


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    """Prints every case's figures when the module is done, outside output capturing."""
    started = time.monotonic()
    yield
    lines = ["", "=" * 30 + " engine fault suite: figures " + "=" * 30]
    for case, topology, figures in FIGURES:
        lines.append(f"[{topology:8}] {case}")
        lines += [f"             {part}" for part in figures.split("\n")]
    lines.append(
        f"cases reported: {len(FIGURES)}; helper processes started: {PROCESSES['started']}, "
        f"crashed: {PROCESSES['crashed']}; module time {time.monotonic() - started:.1f} s"
    )
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print("\n".join(lines), flush=True)
    else:
        print("\n".join(lines), flush=True)


def report(case: str, topo: Topology, *figures: str) -> None:
    FIGURES.append((case, topo.name, "\n".join(figures)))


class Cleanup:
    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def add(self, p: Proc) -> Proc:
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.alive():
                p.p.kill()
                p.p.wait(timeout=10)


@pytest.fixture
def procs():
    c = Cleanup()
    try:
        yield c
    finally:
        c.close()


def counts(pid: int) -> str:
    return f"{proc_fds(pid)} fds, {proc_threads(pid)} threads"


# =========================================================================== cases


def test_register_cycles_under_a_1024_descriptor_limit(topo, master_bin, procs):
    """10,000 register/unregister cycles (20,000 master calls), plus 2,000 one-shot clients of the
    master, with engine and master both limited to 1,024 descriptors."""
    master = procs.add(MasterProc(topo, master_bin, nofile=1024))
    eng = procs.add(EngineProc(topo, "server", "cycler", master.endpoint, nofile=1024))
    eng.ok("cycles", n=50, size=4096)  # warm up: the master connection is open
    e0, m0 = (proc_fds(eng.pid), proc_threads(eng.pid)), (proc_fds(master.pid), proc_threads(master.pid))
    res = eng.ok("cycles", timeout=240, n=10_000, size=4096)
    # One-shot clients, each its own connection (what `xfer-master` used to leak one fd and one thread per).
    oneshot_s = _oneshot_pings(topo, master.port, 2000)
    e1 = settle(eng.pid, *e0)
    m1 = settle(master.pid, *m0)
    report(
        "10,000 register/unregister cycles, RLIMIT_NOFILE=1024 for engine and master",
        topo,
        f"cycles {res['n']}, errors {res['errors']}, {res['seconds']:.1f} s "
        f"({res['seconds'] / res['n'] * 1e6:.0f} us per cycle)",
        f"engine fds {e0[0]} -> {e1[0]}, threads {e0[1]} -> {e1[1]}",
        f"master fds {m0[0]} -> {m1[0]}, threads {m0[1]} -> {m1[1]}; "
        f"2,000 one-shot PING clients in {oneshot_s:.1f} s",
    )
    assert res["errors"] == 0, res["first_error"]
    assert e1 == e0 and m1 == m0
    assert eng.quit() == 0 and master.stop() == 0


def _oneshot_pings(topo: Topology, port: int, n: int) -> float:
    """n clients, each connects, PINGs, reads the reply and closes (run on the client side)."""
    code = (
        "import socket,sys,time\n"
        "h,p,n=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]);t=time.perf_counter()\n"
        "for _ in range(n):\n"
        " s=socket.create_connection((h,p),timeout=10);s.sendall(b'PING\\n')\n"
        " assert s.recv(100).startswith(b'OK xfer-master'),'bad reply';s.close()\n"
        "print(time.perf_counter()-t)\n"
    )
    out = _run(
        [*topo.prefix("client"), sys.executable, "-c", code, topo.addr("server"), port, n], timeout=120
    )
    return float(out.stdout)


IDLE_S = 3


def test_five_thousand_idle_connections(topo, master_bin, procs):
    """5,000 idle connections against the engine (limit 256) and against the master (limit 512), both
    under RLIMIT_NOFILE=1024 with a 3 s idle timeout: the excess is refused with a reason, the kept
    ones are closed when idle, nothing crashes, and the engine serves a verified transfer afterwards."""
    master = procs.add(
        MasterProc(topo, master_bin, nofile=1024, extra=["--max-connections", 512, "--idle-timeout", IDLE_S])
    )
    # The engine's own master connection stays busy (heartbeat 1 s < the master's idle timeout).
    limits = {
        "XFER_MAX_CONNECTIONS": "256",
        "XFER_IDLE_TIMEOUT_MS": str(IDLE_S * 1000),
        "XFER_MASTER_HEARTBEAT_MS": "1000",
    }
    srv = procs.add(EngineProc(topo, "server", "crowded", master.endpoint, env=limits, nofile=1024))
    region = srv.ok("serve", size=1 << 20, label="crowded")
    lines = []
    # Both floods at once. The master keeps one of its 512 slots for the engine's connection.
    targets = {"engine": (srv.pid, srv.port, 256), "master": (master.pid, master.port, 511)}
    before = {t: (proc_fds(pid), proc_threads(pid)) for t, (pid, _, _) in targets.items()}
    floods = {
        t: procs.add(
            topo.helper(
                "idle",
                "--host",
                topo.addr("server"),
                "--port",
                port,
                "--count",
                5000,
                "--proto",
                t,
                nofile=6000,
            )
        )
        for t, (_, port, _) in targets.items()
    }
    got = {t: f.json(120) for t, f in floods.items()}
    during = {t: (proc_fds(pid), proc_threads(pid)) for t, (pid, _, _) in targets.items()}
    for f in floods.values():
        f.send("watch 15")
    watched = {t: f.json(30) for t, f in floods.items()}
    for f in floods.values():
        f.send("close")
        assert f.json(30)["done"]
        f.finish()
    after = {t: settle(pid, *before[t]) for t, (pid, _, _) in targets.items()}
    for t, (_, _, cap) in targets.items():
        g, w = got[t], watched[t]
        reason = max(g["reasons"], key=g["reasons"].get) if g["reasons"] else "-"
        lines += [
            f"{t}: 5,000 connects in {g['connect_seconds']:.1f} s: admitted "
            f"{g['kept'] + g['closed_without_reason']} (room for {cap}), "
            f"refused {g['refused']} with a reason, reset {g['reset']}, failed {g['failed']}",
            f"{t}: refusal: {reason!r}",
            f"{t}: during the flood {during[t][0]} fds, {during[t][1]} threads; idle timeout closed "
            f"{w['closed_by_server']} kept connections (the last {w['last_close_s']:.1f} s after the flood)",
            f"{t}: fds {before[t][0]} -> {after[t][0]}, threads {before[t][1]} -> {after[t][1]}",
        ]
    for t, (_, _, cap) in targets.items():
        g = got[t]
        assert g["failed"] == 0, g["first_failure"]
        # Admitted: kept open, or already closed by the idle timeout (no refusal line, just the end).
        admitted = g["kept"] + g["closed_without_reason"]
        assert g["refused"] + admitted + g["reset"] == 5000, g
        assert admitted == cap or (admitted > cap and g["connect_seconds"] > IDLE_S), g
        assert g["reset"] <= 50, g  # a refusal can race the client's first read: rare
        assert during[t][1] <= before[t][1] + cap and during[t][0] <= before[t][0] + cap
        assert watched[t]["still_open"] == 0
        assert after[t] == before[t]
    client = procs.add(EngineProc(topo, "client", "crowd-client", master.endpoint))
    res = client.ok(
        "transfer", segment="crowded", remote=region["addr"], length=region["length"], label="after-flood"
    )
    served = srv.ok("digest", addr=region["addr"])
    lines.append(
        f"transfer after the floods: verified {res['verified']} (sha256 {res['read_sha256'][:16]}...)"
    )
    report("5,000 idle connections each to engine and master", topo, *lines)
    assert res["verified"] and served["sha256"] == res["written_sha256"]
    assert srv.alive() and master.alive()
    assert client.quit() == 0 and srv.quit() == 0 and master.stop() == 0


def test_thread_creation_failure_is_a_refusal(master_bin, procs, base_env):
    """An engine whose address space has room for only a few more thread stacks (what a pids limit
    or a small RLIMIT_AS does): connections beyond it are refused with a reason, the engine lives."""
    topo = Topology(base_env)
    master = procs.add(MasterProc(topo, master_bin))
    env = {"XFER_MAX_CONNECTIONS": "4000", "MALLOC_ARENA_MAX": "2"}
    srv = procs.add(EngineProc(topo, "server", "cramped", master.endpoint, env=env, nofile=8192))
    region = srv.ok("serve", size=1 << 20, label="cramped")
    before = proc_fds(srv.pid), proc_threads(srv.pid)
    vm = (
        next(
            int(line.split()[1])
            for line in Path(f"/proc/{srv.pid}/status").read_text().splitlines()
            if line.startswith("VmSize:")
        )
        * 1024
    )
    cap = vm + (96 << 20)  # room for a few dozen 2 MiB stacks
    resource.prlimit(srv.pid, resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))  # soft: can be lifted again
    flood = procs.add(
        topo.helper(
            "idle",
            "--host",
            "127.0.0.1",
            "--port",
            srv.port,
            "--count",
            1000,
            "--proto",
            "engine",
            nofile=2000,
        )
    )
    got = flood.json(120)
    flood.send("close")
    flood.json(30)
    flood.finish()
    after = settle(srv.pid, *before)
    resource.prlimit(srv.pid, resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    client = procs.add(EngineProc(topo, "client", "cramped-client", master.endpoint))
    res = client.ok(
        "transfer", segment="cramped", remote=region["addr"], length=region["length"], label="cramped"
    )
    reason = max(got["reasons"], key=got["reasons"].get) if got["reasons"] else "-"
    report(
        "thread creation failing (RLIMIT_AS = VmSize + 96 MiB), 1,000 connections",
        topo,
        f"kept {got['kept']}, refused {got['refused']}, failed {got['failed']}; refusal: {reason!r}",
        f"engine fds {before[0]} -> {after[0]}, threads {before[1]} -> {after[1]}; alive {srv.alive()}",
        f"transfer afterwards verified {res['verified']}",
    )
    assert srv.alive()
    assert got["failed"] == 0 and 0 < got["kept"] < 1000
    assert any("cannot start a thread" in r for r in got["reasons"]), got["reasons"]
    assert after == before
    assert res["verified"]
    assert client.quit() == 0 and srv.quit() == 0 and master.stop() == 0


def test_stalled_peers_do_not_block_registration(topo, master_bin, procs):
    """Four writers stalled after 1 KiB of a 4 MiB payload and four readers that never read their
    64 MiB READ, all on the regions being registered and unregistered around them."""
    master = procs.add(MasterProc(topo, master_bin))
    srv = procs.add(EngineProc(topo, "server", "stalled", master.endpoint))
    big = srv.ok("serve", size=64 << 20, label="big")
    side = srv.ok("serve", size=8 << 20, label="side")
    client = procs.add(EngineProc(topo, "client", "stall-client", master.endpoint))
    client.ok("transfer", segment="stalled", remote=side["addr"], length=1 << 20, label="warm")
    before = proc_fds(srv.pid), proc_threads(srv.pid)
    n = 1000
    srv.ok("latency", n=100, size=1 << 20)  # warm up
    without = srv.ok("latency", n=n, size=1 << 20)
    host, port = topo.addr("server"), srv.port
    writers = procs.add(
        topo.helper(
            "stall",
            "--host",
            host,
            "--port",
            port,
            "--kind",
            "write",
            "--addr",
            side["addr"],
            "--length",
            4 << 20,
            "--count",
            4,
        )
    )
    readers = procs.add(
        topo.helper(
            "stall",
            "--host",
            host,
            "--port",
            port,
            "--kind",
            "read",
            "--addr",
            big["addr"],
            "--length",
            64 << 20,
            "--count",
            4,
        )
    )
    assert writers.json()["stalled"] == 4 and readers.json()["stalled"] == 4
    time.sleep(0.5)
    during = proc_fds(srv.pid), proc_threads(srv.pid)
    with_stall = srv.ok("latency", timeout=60, n=n, size=1 << 20)
    # A transfer beside the stalled peers completes, verified by hash.
    moved = client.ok(
        "transfer", segment="stalled", remote=side["addr"] + (4 << 20), length=4 << 20, label="beside"
    )
    # Unregister the very regions the stalled peers are in the middle of.
    unreg_big = srv.ok("unregister", timeout=60, addr=big["addr"])["ms"]
    unreg_side = srv.ok("unregister", timeout=60, addr=side["addr"])["ms"]
    writers.send("resume")
    readers.send("resume")
    w = writers.json(60)["results"]
    r = readers.json(60)["results"]
    writers.finish()
    readers.finish()
    after = settle(srv.pid, *before)
    ratio = with_stall["median_ms"] / without["median_ms"]
    report(
        "stalled writers and readers during registration",
        topo,
        f"register+unregister median {without['median_ms']:.3f} ms without stalled peers, "
        f"{with_stall['median_ms']:.3f} ms with 4 stalled writers + 4 stalled readers "
        f"(ratio {ratio:.2f}, p90 {with_stall['p90_ms']:.3f} ms, max {with_stall['max_ms']:.3f} ms; "
        f"{n} cycles each)",
        f"unregister of the regions they were in: {unreg_big:.2f} ms (64 MiB, readers), "
        f"{unreg_side:.2f} ms (8 MiB, writers)",
        f"writers resumed -> statuses {[x['status'] for x in w]} (1 = region gone); readers got "
        f"{[x['bytes'] >> 20 for x in r]} MiB of 64, complete {[x['complete'] for x in r]}",
        f"transfer beside them verified {moved['verified']}; engine during {during[0]} fds "
        f"{during[1]} threads, "
        f"fds {before[0]} -> {after[0]}, threads {before[1]} -> {after[1]}",
    )
    assert ratio <= 5.0, (without, with_stall)
    assert moved["verified"]
    assert unreg_big < 2000 and unreg_side < 2000  # bounded by local copies, not by the peers (generous)
    assert all(x["status"] == ST_OUT_OF_BOUNDS for x in w), w
    assert not any(x["complete"] for x in r), r
    assert after == before
    assert client.quit() == 0 and srv.quit() == 0 and master.stop() == 0


def test_peers_killed_mid_frame(topo, master_bin, procs):
    """Raw peers killed half-way through a header, a WRITE payload and a READ; an engine client killed
    during a write loop; and a serving engine killed under a reading client."""
    master = procs.add(MasterProc(topo, master_bin))
    srv = procs.add(EngineProc(topo, "server", "victim", master.endpoint))
    region = srv.ok("serve", size=64 << 20, label="victim")
    client = procs.add(EngineProc(topo, "client", "survivor", master.endpoint))
    client.ok("transfer", segment="victim", remote=region["addr"], length=1 << 20, label="warm")
    before = proc_fds(srv.pid), proc_threads(srv.pid)
    c_before = proc_fds(client.pid), proc_threads(client.pid)
    host, port = topo.addr("server"), srv.port
    raw = procs.add(
        topo.helper(
            "midframe",
            "--host",
            host,
            "--port",
            port,
            "--addr",
            region["addr"],
            "--length",
            8 << 20,
            "--read-length",
            64 << 20,
            "--count",
            4,
        )
    )
    assert raw.json(30)["ready"] == 12
    raw.kill()
    # An engine client killed while its writes are in flight.
    writer = procs.add(EngineProc(topo, "client", "doomed-writer", master.endpoint))
    writer.ok("loop", tag="w", kind="write", segment="victim", remote=region["addr"], length=32 << 20)
    time.sleep(0.5)
    writer.kill()
    # A serving engine killed while a client reads from it.
    doomed = procs.add(EngineProc(topo, "server", "doomed-server", master.endpoint))
    far = doomed.ok("serve", size=32 << 20, label="doomed")
    client.ok("loop", tag="r", kind="read", segment="doomed-server", remote=far["addr"], length=32 << 20)
    time.sleep(0.5)
    doomed.kill()
    loop = client.ok("join_loop", tag="r", wait=30)
    after = settle(srv.pid, *before)
    res = client.ok("transfer", segment="victim", remote=region["addr"], length=16 << 20, label="after-kills")
    # Only this range is known: the killed writers left whatever they had sent in the rest.
    served = srv.ok("digest", addr=region["addr"], offset=0, length=16 << 20)
    expect = sha(pattern("after-kills", 16 << 20))
    c_after = settle(client.pid, c_before[0] + 1, c_before[1])  # + the pooled connection just used
    report(
        "peers killed mid-frame",
        topo,
        "12 raw peers killed (4 in a header, 4 in an 8 MiB WRITE's payload, 4 in a 64 MiB READ), "
        "one engine writer killed in a 32 MiB write loop, one serving engine killed under a 32 MiB read loop",
        f"serving engine: alive {srv.alive()}, fds {before[0]} -> {after[0]}, "
        f"threads {before[1]} -> {after[1]}",
        f"client of the killed server: loop ended {loop['finished']} after {loop['iterations']} reads with "
        f"{loop['error']!r}; fds {c_before[0]} -> {c_after[0]}, threads {c_before[1]} -> {c_after[1]}",
        f"transfer afterwards verified {res['verified']}, "
        f"server buffer hash matches {served['sha256'] == expect}",
    )
    assert srv.alive() and client.alive()
    assert loop["finished"] and loop["error"].startswith("XferError"), loop
    assert after == before
    assert c_after[0] <= c_before[0] + 1 and c_after[1] <= c_before[1]
    assert res["verified"] and served["sha256"] == expect
    assert client.quit() == 0 and srv.quit() == 0 and master.stop() == 0


def test_master_restarted_under_a_live_engine(topo, master_bin, procs):
    """The master is killed (SIGKILL) and started again on the same port: meanwhile registration fails
    with a clear error and transfers between engines that know each other go on; once the master is
    back the engine re-publishes its segment on its own and new clients find it."""
    master = procs.add(MasterProc(topo, master_bin))
    port = master.port
    env = {"XFER_MASTER_HEARTBEAT_MS": "200"}
    srv = procs.add(EngineProc(topo, "server", "phoenix", master.endpoint, env=env))
    region = srv.ok("serve", size=8 << 20, label="phoenix")
    client = procs.add(EngineProc(topo, "client", "loyal", master.endpoint, env=env))
    first = client.ok("transfer", segment="phoenix", remote=region["addr"], length=1 << 20, label="before")
    before = proc_fds(srv.pid), proc_threads(srv.pid)
    master.kill()
    time.sleep(0.5)
    down = srv.ok("register_try", size=4096)
    during = client.ok("transfer", segment="phoenix", remote=region["addr"], length=1 << 20, label="during")
    t0 = time.monotonic()
    master2 = procs.add(MasterProc(topo, master_bin, port=port))
    newcomer = procs.add(EngineProc(topo, "client", "newcomer", master2.endpoint))
    seen = None
    while time.monotonic() - t0 < 15:
        res = newcomer.call("peer", segment="phoenix")
        if res["ok"] and any(r["addr"] == region["addr"] for r in res["regions"]):
            seen = time.monotonic() - t0
            break
        time.sleep(0.05)
    up = srv.ok("register_try", size=4096)
    after_t = newcomer.ok(
        "transfer", segment="phoenix", remote=region["addr"] + (2 << 20), length=2 << 20, label="after"
    )
    digest = srv.ok("digest", addr=region["addr"])
    expect = sha(
        pattern("during", 1 << 20)
        + pattern("phoenix", 8 << 20)[1 << 20 : 2 << 20]
        + pattern("after", 2 << 20)
        + pattern("phoenix", 8 << 20)[4 << 20 :]
    )
    assert newcomer.quit() == 0  # its connection to the engine goes with it
    after = settle(srv.pid, *before)
    report(
        "master killed and restarted on the same port under a live engine",
        topo,
        f"register while the master was down: {down.get('error', 'registered?!')!r}",
        f"transfer between engines while it was down verified {during['verified']}",
        f"segment re-published and found by a new client {seen:.2f} s after the restart"
        if seen is not None
        else "segment NOT re-published within 15 s",
        f"register after: {up['registered']}; transfer by the new client verified {after_t['verified']}; "
        f"server buffer hash matches {digest['sha256'] == expect}",
        f"engine fds {before[0]} -> {after[0]}, threads {before[1]} -> {after[1]}",
    )
    assert first["verified"] and during["verified"] and after_t["verified"]
    assert not down["registered"] and "xfer-master" in down["error"] and "not registered" in down["error"]
    assert seen is not None
    assert up["registered"]
    assert digest["sha256"] == expect
    assert after == before
    assert client.quit() == 0 and srv.quit() == 0 and master2.stop() == 0


def test_master_cli_limits(master_bin, base_env):
    """The limits are flags of xfer-master, checked, and reported at start."""
    bad = _run([master_bin, "--max-connections", "0"], check=False)
    assert bad.returncode == 2 and "--max-connections" in bad.stderr
    bad = _run([master_bin, "--idle-timeout", "soon"], check=False)
    assert bad.returncode == 2 and "--idle-timeout" in bad.stderr
    # The memory bound is published: registered bytes, and per connection a request line and replies.
    usage = _run([master_bin, "--help"]).stdout
    for bound in ("--max-registered-bytes (a segment", "one request line (at most 1 MiB",
                  "at most --max-output-buffer + 64 KiB of unsent replies", "'LIST <last name>'"):
        assert bound in usage, bound
    topo = Topology(base_env)
    m = MasterProc(topo, master_bin, nofile=256, extra=["--max-connections", 5000, "--idle-timeout", 2.5])
    try:
        assert m.limits_line.startswith("xfer-master: at most ")
        assert "RLIMIT_NOFILE" in m.limits_line and "idle timeout 2.5 s" in m.limits_line
        held = f"held per connection: at most {(1 << 20) + (64 << 10)} bytes of requests and {320 << 10} "
        assert held in m.limits_line, m.limits_line
    finally:
        assert m.stop() == 0
    report("xfer-master limits on its command line", topo, f"with RLIMIT_NOFILE=256: {m.limits_line!r}")


# =========================================================================== the master is bounded


class _AddressSpace(Topology):
    """Loopback, with the servers under RLIMIT_AS (prlimit execs: same pid)."""

    def __init__(self, env: dict, as_bytes: int) -> None:
        super().__init__(env)
        self.as_bytes = as_bytes

    def prefix(self, side: str) -> list:
        return ["prlimit", f"--as={self.as_bytes}", "--"] if side == "server" else []


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    msg = f"no {field} for {pid}"
    raise AssertionError(msg)


def _ask(s: socket.socket, f: Any, line: str) -> str:
    s.sendall(line.encode() + b"\n")
    return f.readline().decode().strip()


def _timed_ping(port: int) -> float:
    """Seconds for a PING on a fresh connection (connect included)."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"PING\n")
        assert s.makefile("rb").readline().startswith(b"OK xfer-master")
    return time.perf_counter() - t0


def test_master_segment_flood_under_512mb(master_bin, base_env, procs):
    """PUTs of 65,536 regions each (about 3 MiB of metadata apiece) under RLIMIT_AS=512 MiB: with the
    default caps they end in "ERR registered bytes limit"; with the caps lifted, in "ERR out of memory"
    or a dropped connection. Either way the master keeps serving and keeps every earlier segment."""
    regions = " ".join(f"{i} 1 host" for i in range(65536))  # under the 1 MiB line limit
    lines = []
    cases = (([], "ERR registered bytes limit"), (["--max-registered-bytes", "0"], "ERR out of memory"))
    for extra, expect in cases:
        topo = _AddressSpace(base_env, 512 << 20)
        master = procs.add(MasterProc(topo, master_bin, extra=extra))
        s = socket.create_connection(("127.0.0.1", master.port), timeout=60)
        f = s.makefile("rb")
        accepted, refusal, t0 = 0, "", time.monotonic()
        for i in range(400):
            try:
                reply = _ask(s, f, f"PUT seg{i} 127.0.0.1 9 65536 {regions}")
            except OSError as exc:
                reply = f"(connection dropped: {exc})"
            if reply != "OK":
                refusal = reply or "(connection closed)"
                break
            accepted += 1
        flood_s = time.monotonic() - t0
        assert master.alive(), "".join(master.err)[-2000:]
        assert refusal, "400 PUTs of 3 MiB each were all accepted under a 512 MiB limit"
        # A fresh connection: the master serves, and every accepted segment is intact.
        s.close()
        s = socket.create_connection(("127.0.0.1", master.port), timeout=60)
        f = s.makefile("rb")
        assert _ask(s, f, "PING").startswith("OK xfer-master")
        listed = _ask(s, f, "LIST").split()
        assert listed[0] == "OK" and int(listed[1]) == accepted
        for i in (0, accepted - 1):
            got = _ask(s, f, f"GET seg{i}").split()
            assert got[:4] == ["OK", "127.0.0.1", "9", "65536"] and got[-3:] == ["65535", "1", "host"]
        # Room comes back with a DEL.
        assert _ask(s, f, "DEL seg0") == "OK"
        again = _ask(s, f, f"PUT seg0 127.0.0.1 9 65536 {regions}")
        stats = _ask(s, f, "STATS")
        s.close()
        rss = _rss_kb(master.pid) // 1024
        assert master.stop() == 0
        lines.append(
            f"flags {extra or 'defaults'}: {accepted} PUTs accepted in {flood_s:.1f} s, "
            f"then {refusal[:90]!r}; "
            f"PUT after DEL: {again[:40]!r}; RSS {rss} MiB; {stats.split(' segments=')[1][:60]}"
        )
        if not extra:
            assert refusal.startswith(expect) and again == "OK"
        else:
            assert refusal.startswith((expect, "(connection")), refusal
    report("segment flood under RLIMIT_AS=512 MiB", Topology(base_env), *lines)


def _pipeline(port: int, lines: list[str]) -> list[str]:
    """The requests on one connection, 1,000 in flight at a time; the replies in order ("" once the
    master has closed the connection)."""
    replies: list[str] = []
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        f = s.makefile("rb")
        for at in range(0, len(lines), 1000):
            batch = lines[at : at + 1000]
            try:
                s.sendall("".join(line + "\n" for line in batch).encode())
                replies += [f.readline().decode().strip() for _ in batch]
            except OSError:
                replies += [""] * len(batch)
    return replies


def _slow_reader_case(request: str) -> tuple[list[str], int]:
    """What the master holds before the slow readers come, and how many readers: a LIST of 60,000
    segments named with 250 characters (about 15 MiB whole), or a GET of 65,536 regions (about 1 MiB)."""
    if request == "LIST":
        return [f"PUT {i:0250d} 127.0.0.1 9 1 0 1 host" for i in range(60000)], 50
    regions = " ".join(f"{i} 1 host" for i in range(65536))
    return [f"PUT big 127.0.0.1 9 65536 {regions}"], 200


@pytest.mark.parametrize("request_line", ["LIST", "GET big"])
def test_master_memory_with_slow_readers_under_512mb(request_line, master_bin, base_env, procs):
    """Slow readers of a large reply (50 of a LIST, 200 of a GET, one byte a second each) make the
    master hold at most one reply chunk each, not a whole reply: its RSS grows by at most 128 KiB a
    reader, and under RLIMIT_AS=512 MiB every reply and 12,000 legitimate PUTs meanwhile succeed."""
    topo = _AddressSpace(base_env, 512 << 20)
    master = procs.add(MasterProc(topo, master_bin))
    setup, readers = _slow_reader_case(request_line)
    assert set(_pipeline(master.port, setup)) == {"OK"}
    registered = _sock_stats(master.port)["registered_bytes"]
    rss_before = _rss_kb(master.pid)
    slow = procs.add(
        topo.helper(
            "slowread", "--host", "127.0.0.1", "--port", master.port, "--count", readers,
            "--request", request_line, "--limit", 45,
        )
    )
    assert slow.json(60)["connected"] == readers
    begun = slow.json(60)
    rss_with = _rss_kb(master.pid)
    pings = []
    for _ in range(100):
        pings.append(_timed_ping(master.port))
        time.sleep(0.02)
    puts = _pipeline(master.port, [f"PUT legit{i % 3000} 127.0.0.1 9 1 {i} 1 host" for i in range(12000)])
    rss_with = max(rss_with, _rss_kb(master.pid))
    stats = _sock_stats(master.port)
    replaced = ""
    if request_line.startswith("GET"):
        # The readers still send the old version: it counts until the last of them is done.
        assert _pipeline(master.port, ["PUT big 127.0.0.1 9 1 0 1 host"]) == ["OK"]
        replaced = f"{_sock_stats(master.port)['registered_bytes']}"
    slow.send("quit")
    done = slow.json(60)
    assert slow.finish() == 0
    after = _sock_stats(master.port)["registered_bytes"]
    for _ in range(100 if replaced else 0):  # the master sees the readers' close on its next turn
        if after < int(replaced):
            break
        time.sleep(0.05)
        after = _sock_stats(master.port)["registered_bytes"]
    alive = master.alive()
    hwm = _rss_kb(master.pid, "VmHWM")
    assert master.stop() == 0
    ok_puts = puts.count("OK")
    pings.sort()
    report(
        f"{readers} slow readers of {request_line.split()[0]} under RLIMIT_AS=512 MiB",
        topo,
        f"registered {registered / 2**20:.1f} MiB; RSS {rss_before // 1024} MiB before the readers, "
        f"{rss_with // 1024} MiB with them (peak {hwm // 1024} MiB)",
        f"replies begun {begun['ok']} OK, {begun['err']} ERR, {begun['closed']} closed; "
        f"readers closed by the master: {done['closed']}",
        f"legitimate PUTs meanwhile: {ok_puts} of {len(puts)} OK (first other: "
        f"{next((p for p in puts if p != 'OK'), '-')[:60]!r}); oom={stats['oom']}",
        f"PING meanwhile (fresh connection): median {statistics.median(pings) * 1e3:.1f} ms, "
        f"p99 {pings[98] * 1e3:.1f} ms",
        *([f"registered bytes while a replaced GET is read: {replaced}, after: {after}"] * bool(replaced)),
    )
    assert alive
    assert begun["ok"] == readers and begun["err"] == 0, begun
    assert ok_puts == len(puts), puts[:3]
    # KiB: two reply chunks a reader, and memory proportional to the registered bytes.
    assert rss_with - rss_before <= readers * 128 + 16 * 1024, (rss_before, rss_with)
    assert rss_with <= 2 * registered // 1024 + readers * 128 + 32 * 1024, (registered, rss_with)
    if replaced:
        assert int(replaced) > after, (replaced, after)


def test_master_closes_slowloris_connections(master_bin, base_env, procs):
    """1,000 connections that each drip one byte of a request line every 0.2 s and never finish it are
    closed by the request deadline (--idle-timeout 2); a well-formed client is served meanwhile."""
    topo = Topology(base_env)
    raise_nofile(4096)
    master = procs.add(MasterProc(topo, master_bin, nofile=4096, extra=["--idle-timeout", 2]))
    drip = procs.add(
        topo.helper("drip", "--host", "127.0.0.1", "--port", master.port, "--count", 1000, "--limit", 20)
    )
    assert drip.json(60)["connected"] == 1000
    pings = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.5:
        pings.append(_timed_ping(master.port))
        time.sleep(0.1)
    res = drip.json(60)
    assert drip.finish() == 0
    pings.append(_timed_ping(master.port))
    stats = _sock_stats(master.port)
    report(
        "1,000 slowloris connections, --idle-timeout 2",
        topo,
        f"closed {res['closed']} of {res['count']} after {res['drips']} drips: "
        f"first {res['first_close_s']:.2f} s, "
        f"last {res['last_close_s']:.2f} s after all were open",
        f"well-formed PINGs meanwhile: {len(pings)}, max {max(pings) * 1000:.1f} ms",
        f"master: idle_closed={stats['idle_closed']} active={stats['active']}",
    )
    assert res["closed"] == 1000 and res["still_open"] == 0
    assert res["last_close_s"] < 2 + 2.5, res
    assert max(pings) < 2.0
    assert stats["idle_closed"] >= 1000
    assert master.stop() == 0


def _sock_stats(port: int) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"STATS\n")
        words = s.makefile("rb").readline().decode().split()
    assert words[0] == "OK", words
    return {k: int(v) for k, v in (w.split("=") for w in words[1:])}


@pytest.mark.slow  # 7 s or 25 s on an idle machine (see below); a loaded one doubles it
def test_master_disconnects_clients_that_do_not_read(master_bin, base_env, procs):
    """1,000 clients pipeline 384 KiB of PINGs each and never read: every one is disconnected by one
    of the master's two defences, a well-formed client's PING is answered within 2 s all along, and
    the master's RSS comes back down afterwards.

    Which defence is not fixed: on this kernel the run is bimodal. Either every client's unsent
    replies pass --max-output-buffer 64K and it goes at once (all 1,000 in 7 s), or for some of them
    the kernel's buffers hold the replies, the client stalls with less than 64K unsent, and the idle
    timeout (here 10 s) closes it (seen: 29 and 241 of 1,000 by the output limit, the rest idle).
    The output limit must fire for some; the clients give up after 120 s."""
    topo = Topology(base_env)
    raise_nofile(4096)
    limits = ["--max-output-buffer", "64K", "--idle-timeout", 10]
    master = procs.add(MasterProc(topo, master_bin, nofile=4096, extra=limits))
    _timed_ping(master.port)
    rss0 = _rss_kb(master.pid)
    flood = procs.add(
        topo.helper("nonreader", "--host", "127.0.0.1", "--port", master.port, "--count", 1000,
                    "--bytes", 384 << 10, "--limit", 120)
    )
    assert flood.json(60)["connected"] == 1000
    pings, peak = [], 0
    while True:
        pings.append(_timed_ping(master.port))
        peak = max(peak, _rss_kb(master.pid))
        try:
            res = json.loads(flood.lines.get(timeout=0.2))
            break
        except queue.Empty:
            continue
    assert flood.finish() == 0
    deadline = time.monotonic() + 10
    while _rss_kb(master.pid) > rss0 + 16 * 1024 and time.monotonic() < deadline:
        time.sleep(0.2)
    rss1 = _rss_kb(master.pid)
    stats = _sock_stats(master.port)
    report(
        "1,000 pipelining clients that never read, --max-output-buffer 64K, --idle-timeout 10",
        topo,
        f"disconnected {res['disconnected']} of {res['count']} ({res['sent_mib']:.0f} MiB of PINGs sent), "
        f"last after {res['last_close_s']:.1f} s; output_closed={stats['output_closed']} "
        f"idle_closed={stats['idle_closed']}",
        f"well-formed PINGs meanwhile: {len(pings)}, median {statistics.median(pings) * 1000:.1f} ms, "
        f"max {max(pings) * 1000:.1f} ms",
        f"master RSS {rss0 // 1024} MiB before, peak >= {peak // 1024} MiB (VmHWM "
        f"{_rss_kb(master.pid, 'VmHWM') // 1024} MiB), {rss1 // 1024} MiB after",
    )
    assert res["disconnected"] == 1000
    assert stats["output_closed"] + stats["idle_closed"] >= 1000 and stats["active"] == 1
    assert stats["output_closed"] >= 1, "the output limit never fired: every client went idle"
    assert max(pings) < 2.0
    assert rss1 <= rss0 + 16 * 1024
    assert master.stop() == 0
