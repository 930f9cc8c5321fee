"""TEST STAND-IN engine: the HIP runtime API through a host-only file compiled by hipcc."""

import ctypes

# The import guard a real engine carries: without the runtime the wheel binds, one sentence that
# names it, not the loader's bare error.
try:
    ctypes.CDLL("libamdhip64.so.7")
except OSError:
    msg = (
        "hipcc_host (hipcc-host-standin-rocm) needs the HIP runtime libamdhip64.so.7 (ROCm 7.x or "
        "10.x): install it and make its lib directory visible to the loader"
    )
    raise ImportError(msg) from None

from hipcc_host._native import alloc_probe, device_count

__all__ = ["alloc_probe", "device_count"]
