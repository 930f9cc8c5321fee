"""Move GPU memory with Mooncake's own Python transfer API, from its cuda wheel, and check the bytes.

Two TransferEngine instances (two processes) on 127.0.0.1 over TCP, no metadata server
(P2PHANDSHAKE). The target registers a zeroed torch CUDA buffer; the initiator registers a CUDA
buffer of seeded random bytes and calls `transfer_sync_write(target, src_ptr, dst_ptr, n)`:
Mooncake's TCP transport copies device memory with cudaMemcpy on both sides. The target then
compares its buffer with the same seeded bytes. Needs torch with CUDA and the cuda wheel installed
(`pip install examples/mooncake/wheelhouse/cuda/mooncake_transfer_engine-*.whl`).
Prints one JSON line; exit 0 when the bytes match.
"""

import json
import multiprocessing as mp
import sys
from multiprocessing.connection import Connection

import torch
from mooncake.engine import TransferEngine

N = 64 << 20  # bytes moved
SEED = 30


def pattern() -> torch.Tensor:
    generator = torch.Generator().manual_seed(SEED)
    return torch.randint(0, 256, (N,), dtype=torch.uint8, generator=generator)


def engine_with(buffer: torch.Tensor) -> TransferEngine:
    engine = TransferEngine()
    if engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
        sys.exit("TransferEngine.initialize(127.0.0.1, P2PHANDSHAKE, tcp) failed")
    if engine.register_memory(buffer.data_ptr(), buffer.nbytes) != 0:
        sys.exit("TransferEngine.register_memory of a CUDA buffer failed")
    return engine


def target(conn: Connection) -> None:
    dst = torch.zeros(N, dtype=torch.uint8, device="cuda:0")
    engine = engine_with(dst)
    conn.send((engine.get_rpc_port(), dst.data_ptr()))
    conn.recv()  # the initiator's write returned
    torch.cuda.synchronize()
    conn.send(bool(torch.equal(dst.cpu(), pattern())))


def main() -> int:
    here, there = mp.Pipe()
    peer = mp.get_context("spawn").Process(target=target, args=(there,))
    peer.start()
    port, dst_ptr = here.recv()
    src = pattern().to("cuda:0")
    engine = engine_with(src)
    torch.cuda.synchronize()
    rc = engine.transfer_sync_write(f"127.0.0.1:{port}", src.data_ptr(), dst_ptr, N)
    here.send("written")
    equal = here.recv()
    peer.join(timeout=60)
    ok = rc == 0 and equal
    report = {"ok": ok, "transfer_rc": rc, "bytes": N, "equal": equal, "gpu": torch.cuda.get_device_name(0)}
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
