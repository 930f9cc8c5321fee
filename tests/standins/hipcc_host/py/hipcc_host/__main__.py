"""Smoke: the extension loaded libamdhip64 and its calls answer (no GPU: hipErrorNoDevice, 100)."""

import json
import sys

from hipcc_host import alloc_probe, device_count

NO_DEVICE = 100  # hipErrorNoDevice

err, count = device_count()
alloc = alloc_probe()
ok = (err == 0 and count > 0 and alloc == 0) or (err == NO_DEVICE and count == 0)
print(json.dumps({"ok": ok, "hipGetDeviceCount": [err, count], "hipMalloc": alloc}))
sys.exit(0 if ok else 1)
