"""Python face of the engine: accepts buffers, tensors and raw pointers."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from . import _xfer

_TYPESTR_BYTES = {"1": 1, "2": 2, "4": 4, "8": 8, "16": 16}


def resolve(obj: Any, length: int | None = None) -> tuple[int, int]:
    """(address, length) of an int pointer, a CUDA-array-interface object, a
    torch-like tensor (``data_ptr()``) or a contiguous buffer-protocol object."""
    if isinstance(obj, int):
        if length is None:
            raise ValueError("a length is required when registering a raw pointer")
        return obj, int(length)
    nbytes: int | None = None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        if cai.get("strides") not in (None, ()):
            shape, strides = cai["shape"], cai["strides"]
            itemsize = int(cai["typestr"][2:])
            expect = itemsize
            for dim, stride in zip(reversed(shape), reversed(strides)):
                if dim > 1 and stride != expect:
                    raise ValueError("only contiguous device arrays can be registered")
                expect *= dim
        ptr = int(cai["data"][0])
        nbytes = math.prod(cai["shape"]) * int(cai["typestr"][2:])
    elif hasattr(obj, "data_ptr") and callable(obj.data_ptr):
        if hasattr(obj, "is_contiguous") and not obj.is_contiguous():
            raise ValueError("only contiguous tensors can be registered")
        ptr = int(obj.data_ptr())
        nbytes = int(getattr(obj, "nbytes", obj.element_size() * obj.numel()))
    else:
        ptr, nbytes, _readonly = _xfer.buffer_info(obj)
    if length is None:
        length = nbytes
    elif nbytes is not None and length > nbytes:
        raise ValueError(f"length {length} exceeds the object's {nbytes} bytes")
    return ptr, int(length)


class Engine:
    """A transfer engine: serves its registered memory, reads and writes peers'.

    ``master`` is the ``host:port`` of an ``xfer-master``; pass ``""`` to run
    without one and introduce peers with :meth:`add_peer`.

    Limits, read from the environment when the engine is created:

    * ``XFER_MAX_CONNECTIONS`` (default 256): peer connections served at once,
      one thread each; a peer over the limit is refused with a reason and its
      transfer fails with "refused the connection: ...".
    * ``XFER_IDLE_TIMEOUT_MS`` (default 120000; 0 for none): a connection that
      makes no progress for this long is closed (a peer stalled mid-frame too).
    * ``XFER_MASTER_HEARTBEAT_MS`` (default 5000): how often the engine checks
      on the master and re-publishes its segment after a master restart.

    Registration never waits on a peer. While the master is unreachable,
    :meth:`register` raises (the region is not registered) and
    :meth:`unregister` succeeds locally; the master is brought up to date once
    it is back.
    """

    def __init__(
        self,
        name: str,
        master: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_bytes: int = 4 << 20,
        window: int = 16,
    ) -> None:
        self._impl = _xfer.Engine(name, master, host, port, chunk_bytes, window)
        self._keep: dict[int, Any] = {}

    # -- registration
    def register(self, buffer_or_ptr: Any, length: int | None = None) -> dict:
        """Register memory and return what was learnt about it (kind, device,
        allocation base and offset, dmabuf export)."""
        ptr, n = resolve(buffer_or_ptr, length)
        info = self._impl.register_memory(ptr, n)
        if not isinstance(buffer_or_ptr, int):
            self._keep[ptr] = buffer_or_ptr  # keep the memory alive while registered
        return info

    def unregister(self, buffer_or_ptr: Any) -> None:
        ptr = buffer_or_ptr if isinstance(buffer_or_ptr, int) else resolve(buffer_or_ptr)[0]
        self._impl.unregister_memory(ptr)
        self._keep.pop(ptr, None)

    def regions(self) -> list:
        return self._impl.regions()

    # -- transfers
    @staticmethod
    def _batch(batch: Iterable[Sequence[Any]]) -> list:
        out = []
        for local, segment, offset, length in batch:
            if not isinstance(local, int):
                local = resolve(local)[0]
            out.append((local, segment, int(offset), int(length)))
        return out

    def write(self, batch: Iterable[Sequence[Any]]) -> None:
        """Write (local_ptr, remote_segment, remote_offset, length) entries; blocks until done."""
        self._impl.write(self._batch(batch))

    def read(self, batch: Iterable[Sequence[Any]]) -> None:
        """Read (local_ptr, remote_segment, remote_offset, length) entries; blocks until done."""
        self._impl.read(self._batch(batch))

    # -- peers
    def add_peer(self, segment: str, host: str, port: int) -> None:
        self._impl.add_peer(segment, host, port)

    def peer(self, segment: str) -> dict:
        """Endpoint and registered regions of a peer segment (from the master)."""
        return self._impl.peer(segment)

    # -- device helpers (for tests without a framework)
    def device_alloc(self, n: int) -> int:
        return self._impl.device_alloc(n)

    def device_free(self, ptr: int) -> None:
        self._impl.device_free(ptr)

    def copy(self, dst: int, src: int, n: int) -> None:
        self._impl.copy(dst, src, n)

    # -- properties
    name = property(lambda self: self._impl.name)
    port = property(lambda self: self._impl.port)
    endpoint = property(lambda self: self._impl.endpoint)
    backend = property(lambda self: self._impl.backend)
    runtime_version = property(lambda self: self._impl.runtime_version)
    device_count = property(lambda self: self._impl.device_count)
    gpu_direct = property(lambda self: bool(self._impl.gpu_direct))
    gpu_direct_reason = property(lambda self: self._impl.gpu_direct_reason)

    def close(self) -> None:
        self._impl.close()
        self._keep.clear()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
