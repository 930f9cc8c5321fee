"""TEST STAND-IN engine: the HIP runtime API through a host-only file compiled by hipcc."""

from hipcc_host._native import alloc_probe, device_count

__all__ = ["alloc_probe", "device_count"]
