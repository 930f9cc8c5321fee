"""python -m xfer selftest: a master (the packaged binary) and two engines on
127.0.0.1 move buffers both ways; sha256 of source and destination must match."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from typing import Any

from . import _build_info
from ._engine import Engine, resolve

ALIGN_OFFSET = 3 * 4096 + 256  # non-zero offset of the tensor inside its allocation


def find_master() -> str | None:
    cands = [os.environ.get("XFER_MASTER", "")]
    cands.append(os.path.join(sysconfig.get_path("scripts"), "xfer-master"))
    cands.append(os.path.join(os.path.dirname(sys.executable), "xfer-master"))
    cands.append(shutil.which("xfer-master") or "")
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def start_master(path: str, host: str = "127.0.0.1") -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [path, "--host", host, "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("xfer-master listening on "):
        proc.kill()
        raise RuntimeError(f"xfer-master did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1]


def stop_master(proc: subprocess.Popen) -> int:
    proc.terminate()
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _HostBuf:
    def __init__(self, n: int) -> None:
        self.mem = bytearray(n)
        self.ptr = resolve(self.mem)[0]
        self.n = n
        self.owner: Any = self.mem

    def fill(self, data: bytes) -> None:
        self.mem[:] = data

    def fetch(self) -> bytes:
        return bytes(self.mem)


class _DeviceBuf:
    """n bytes of device memory at a non-zero offset inside a larger allocation."""

    def __init__(self, engine: Engine, n: int, torch_mod: Any) -> None:
        self.engine, self.n = engine, n
        self.torch_info: dict = {}
        if torch_mod is not None:
            self.big = torch_mod.empty(n + 2 * ALIGN_OFFSET, dtype=torch_mod.uint8, device="cuda")
            self.owner = self.big[ALIGN_OFFSET : ALIGN_OFFSET + n]
            self.ptr = int(self.owner.data_ptr())
            self.torch_info = {
                "tensor_data_ptr": self.ptr,
                "enclosing_tensor_data_ptr": int(self.big.data_ptr()),
                "torch_segment": _torch_segment(torch_mod, self.ptr),
            }
            self._raw = None
        else:
            self._raw = engine.device_alloc(n + 2 * ALIGN_OFFSET)
            self.ptr = self._raw + ALIGN_OFFSET
            self.owner = self.ptr

    def fill(self, data: bytes) -> None:
        src = ctypes.create_string_buffer(data, len(data))
        self.engine.copy(self.ptr, ctypes.addressof(src), len(data))

    def fetch(self) -> bytes:
        dst = ctypes.create_string_buffer(self.n)
        self.engine.copy(ctypes.addressof(dst), self.ptr, self.n)
        return dst.raw[: self.n]

    def free(self) -> None:
        if self._raw is not None:
            self.engine.device_free(self._raw)
            self._raw = None


def _torch_segment(torch_mod: Any, ptr: int) -> dict | None:
    """The caching allocator's segment (one cudaMalloc) holding ptr."""
    try:
        for seg in torch_mod.cuda.memory_snapshot():
            base, size = int(seg["address"]), int(seg["total_size"])
            if base <= ptr < base + size:
                return {"address": base, "total_size": size}
    except Exception:
        return None
    return None


def _roundtrip(a: Engine, b: Engine, src: Any, dst: Any, back: Any, n: int) -> dict:
    """a writes src into b's dst, then reads b's (refilled) dst into back."""
    data = os.urandom(n)
    src.fill(data)
    remote = a.peer(b.name)["regions"]  # what the master lists for b
    remote_addr = dst.ptr
    if not any(r["addr"] <= remote_addr < r["addr"] + r["length"] for r in remote):
        raise RuntimeError("the master does not list the destination region")
    a.write([(src.ptr, b.name, remote_addr, n)])
    got = dst.fetch()
    write = {"bytes": n, "verified": _sha(got) == _sha(data), "sha256": _sha(data), "dest_sha256": _sha(got)}
    data2 = os.urandom(n)
    dst.fill(data2)
    a.read([(back.ptr, b.name, remote_addr, n)])
    got2 = back.fetch()
    read = {"bytes": n, "verified": _sha(got2) == _sha(data2), "sha256": _sha(data2), "dest_sha256": _sha(got2)}
    return {"write": write, "read": read}


def _distribution() -> str | None:
    from . import _distribution as dist

    return dist()


def run(size_mib: float = 4.0, device: bool = False) -> dict:
    n = max(1, int(size_mib * (1 << 20)))
    report: dict[str, Any] = {
        "ok": False,
        "version": _build_info.VERSION,
        "backend": _build_info.BACKEND,
        "distribution": _distribution(),
        "runtime_library": _build_info.RUNTIME_SONAME,
        "device": False,
        "device_requested": device,
        "size_bytes": n,
        "write": {"bytes": 0, "verified": False, "sha256": ""},
        "read": {"bytes": 0, "verified": False, "sha256": ""},
        "registration": {},
        "verified": [],
    }
    master_path = find_master()
    report["master"] = master_path
    if master_path is None:
        report["error"] = "xfer-master not found (not in the scripts directory nor on PATH; set XFER_MASTER)"
        return report
    torch_mod = None
    if device:
        # Import torch before any engine initialises the GPU runtime.
        try:
            import torch  # noqa: PLC0415

            if not torch.cuda.is_available():
                report["torch"] = f"torch {torch.__version__} sees no GPU"
            elif _build_info.BACKEND not in ("cuda", "hip"):
                report["torch"] = f"torch not used with backend {_build_info.BACKEND}"
            else:
                torch_mod = torch
                torch.empty(1, device="cuda")  # let torch create its context first
                report["torch"] = f"torch {torch.__version__}"
        except Exception as exc:
            report["torch"] = f"torch not importable ({type(exc).__name__}: {exc})"
    proc, endpoint = start_master(master_path)
    report["master_endpoint"] = endpoint
    a = b = None
    bufs: list = []
    try:
        a = Engine("selftest-a", endpoint)
        b = Engine("selftest-b", endpoint)
        report.update(
            runtime_version=a.runtime_version,
            device_count=a.device_count,
            gpu_direct=a.gpu_direct,
            gpu_direct_reason=a.gpu_direct_reason,
        )
        # Host memory, both ways.
        hs, hd, hb = _HostBuf(n), _HostBuf(n), _HostBuf(n)
        a.register(hs.mem)
        a.register(hb.mem)
        report["registration"]["host"] = b.register(hd.mem)
        host = _roundtrip(a, b, hs, hd, hb, n)
        report["host"] = host
        report["write"], report["read"] = host["write"], host["read"]
        report["verified"].append(f"host: {n} bytes written and {n} bytes read back, sha256 equal")
        ok = host["write"]["verified"] and host["read"]["verified"]

        if device:
            if a.device_count == 0:
                report["device_reason"] = "no GPU visible to the engine's runtime"
            else:
                ds, dd, db = (_DeviceBuf(a, n, torch_mod), _DeviceBuf(b, n, torch_mod), _DeviceBuf(a, n, torch_mod))
                bufs = [ds, dd, db]
                reg_src = a.register(ds.owner, n)
                a.register(db.owner, n)
                reg_dst = b.register(dd.owner, n)
                for reg, buf in ((reg_src, ds), (reg_dst, dd)):
                    reg.update(buf.torch_info)
                    seg = buf.torch_info.get("torch_segment")
                    if seg:
                        reg["base_matches_torch_segment"] = seg["address"] == reg["alloc_base"]
                report["registration"]["device_local"] = reg_src
                report["registration"]["device_remote"] = reg_dst
                report["registration"]["allocator"] = "torch" if torch_mod is not None else "engine"
                dev = _roundtrip(a, b, ds, dd, db, n)
                report["device"] = True
                report["write"], report["read"] = dev["write"], dev["read"]
                kinds_ok = reg_src["kind"] == "device" and reg_dst["kind"] == "device"
                offsets_ok = reg_src["offset"] > 0 and reg_dst["offset"] > 0
                report["registration"]["device_checks"] = {"kind_device": kinds_ok, "nonzero_offset": offsets_ok}
                report["verified"].append(
                    f"device: {n} bytes device->device written and read back through pinned staging, sha256 equal; "
                    f"tensor at offset {reg_src['offset']} of allocation 0x{reg_src['alloc_base']:x} "
                    f"(size {reg_src['alloc_size']}), dmabuf export: {reg_src['dmabuf']} ({reg_src['dmabuf_reason']})"
                )
                ok = ok and dev["write"]["verified"] and dev["read"]["verified"] and kinds_ok and offsets_ok
        report["ok"] = bool(ok)
    except Exception as exc:  # reported, not raised: the JSON is the product
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["ok"] = False
    finally:
        for buf in bufs:
            buf.free()
        for e in (a, b):
            if e is not None:
                e.close()
        report["master_exit_code"] = stop_master(proc)
        if report["master_exit_code"] != 0:
            report["ok"] = False
    return report


def print_report(report: dict) -> None:
    status = "OK" if report["ok"] else "FAILED"
    print(f"xfer selftest {status}: version {report['version']}, backend {report['backend']}, "
          f"distribution {report['distribution']}, runtime {report.get('runtime_library')}")
    for line in report.get("verified", []):
        print(f"  verified {line}")
    print(f"  gpu_direct: {report.get('gpu_direct')} ({report.get('gpu_direct_reason')})")
    if report.get("device_requested") and not report["device"]:
        print(f"  device: skipped ({report.get('device_reason', 'n/a')})")
    if "error" in report:
        print(f"  error: {report['error']}")
