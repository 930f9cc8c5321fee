"""python -m xfer bench: loopback write/read throughput beside a plain TCP
socket moving the same bytes in the same run."""

from __future__ import annotations

import socket
import threading
import time

from ._engine import Engine, resolve

GOAL = 0.5


def _tcp_baseline(total: int, block: int) -> float:
    """Seconds for one TCP socket on 127.0.0.1 to move `total` bytes in `block` sends."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    sink = bytearray(block)
    done = threading.Event()

    def receive() -> None:
        conn, _ = srv.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        view = memoryview(sink)
        left = total
        while left:
            k = conn.recv_into(view[: min(block, left)])
            if k == 0:
                break
            left -= k
        conn.sendall(b"x")
        conn.close()
        done.set()

    t = threading.Thread(target=receive, daemon=True)
    t.start()
    cli = socket.create_connection(("127.0.0.1", port))
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cli.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    payload = memoryview(bytearray(block))
    start = time.perf_counter()
    sent = 0
    while sent < total:
        n = min(block, total - sent)
        cli.sendall(payload[:n])
        sent += n
    cli.recv(1)
    elapsed = time.perf_counter() - start
    cli.close()
    srv.close()
    t.join()
    return elapsed


def run(total_mib: int = 1024, block_mib: int = 4, ring_blocks: int = 16, batch: int = 16,
        device: bool = False) -> dict:
    """Throughput of host buffers, or with `device` of GPU buffers on both sides (engine allocations)."""
    block = block_mib << 20
    total = max(block, total_mib << 20)
    blocks = total // block
    total = blocks * block
    a = Engine("bench-a", "")
    b = Engine("bench-b", "")
    on_device = device and a.device_count > 0
    allocated: list = []
    try:
        a.add_peer("bench-b", "127.0.0.1", b.port)
        if on_device:
            src_ptr = a.device_alloc(block)
            allocated.append((a, src_ptr))
            ring_ptr = b.device_alloc(block * ring_blocks)
            allocated.append((b, ring_ptr))
            a.register(src_ptr, block)
            b.register(ring_ptr, block * ring_blocks)
        else:
            src = bytearray(block)
            ring = bytearray(block * ring_blocks)
            src_ptr = resolve(src)[0]
            ring_ptr = resolve(ring)[0]
            a.register(src)
            b.register(ring)

        def entries():
            for i in range(0, blocks, batch):
                yield [
                    (src_ptr, "bench-b", ring_ptr + ((i + j) % ring_blocks) * block, block)
                    for j in range(min(batch, blocks - i))
                ]

        a.write(next(entries()))  # warm up the connection
        t0 = time.perf_counter()
        for e in entries():
            a.write(e)
        t_write = time.perf_counter() - t0
        t0 = time.perf_counter()
        for e in entries():
            a.read(e)
        t_read = time.perf_counter() - t0
    finally:
        for engine, ptr in allocated:
            engine.device_free(ptr)
        a.close()
        b.close()
    t_tcp = _tcp_baseline(total, block)
    gib = total / float(1 << 30)
    res = {
        "total_bytes": total,
        "block_bytes": block,
        "tcp_gib_s": gib / t_tcp,
        "write_gib_s": gib / t_write,
        "read_gib_s": gib / t_read,
        "write_ratio": t_tcp / t_write,
        "read_ratio": t_tcp / t_read,
        "goal_ratio": GOAL,
        "memory": "device" if on_device else "host",
        "device_requested": device,
    }
    if device and not on_device:
        res["device_reason"] = "no GPU visible to the engine's runtime"
    res["ok"] = res["write_ratio"] >= GOAL and res["read_ratio"] >= GOAL
    return res


def print_report(r: dict) -> None:
    memory = r.get("memory", "host")
    print(f"xfer bench: {r['total_bytes'] >> 20} MiB in {r['block_bytes'] >> 20} MiB blocks over 127.0.0.1, "
          f"{memory} buffers")
    if r.get("device_reason"):
        print(f"  device: skipped ({r['device_reason']})")
    print(f"  plain TCP socket : {r['tcp_gib_s']:7.2f} GiB/s")
    print(f"  engine write     : {r['write_gib_s']:7.2f} GiB/s  ratio {r['write_ratio']:.2f}")
    print(f"  engine read      : {r['read_gib_s']:7.2f} GiB/s  ratio {r['read_ratio']:.2f}")
    print(f"  goal ratio >= {r['goal_ratio']}: {'met' if r['ok'] else 'NOT met'}")
