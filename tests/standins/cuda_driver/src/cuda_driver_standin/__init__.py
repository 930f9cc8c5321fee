"""TEST STAND-IN: a real engine's import package whose extension calls the CUDA driver API.

The guard block below is the one `release init` writes for a cuda variant (a unit test keeps it
equal to `release.init.guard.guard_code`): it checks the wheel's `Requires-External` driver
library (libcuda.so.1) before the extension loads.
"""

# --- variant guard, written by `release init`: keep it before other imports ---
def _refuse_a_second_variant() -> None:
    """Each of cuda-driver-standin ships `cuda_driver_standin`: two installed at once overwrite each
    other's files, so refuse to load rather than run a mix of both."""
    import importlib.metadata

    installed = []
    for name in ["cuda-driver-standin"]:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        installed.append(name)
    if len(installed) > 1:
        msg = (
            f"cuda_driver_standin: {', '.join(installed)} are installed together and share this import "
            f"package; keep one of them: pip uninstall {' '.join(installed[1:])}"
        )
        raise ImportError(msg)


_refuse_a_second_variant()
del _refuse_a_second_variant


def _require_the_gpu_driver() -> None:
    """The GPU driver's libraries the installed wheel binds (its `Requires-External`) resolve:
    without them the extension cannot load, and the driver, not a toolkit, is what is missing."""
    import ctypes
    import importlib.metadata

    drivers = {
        "libcuda.so.1": (
            "the NVIDIA driver",
            "install or update the NVIDIA GPU driver, which provides libcuda.so.1 (a "
            "CUDA toolkit or `pip install nvidia-cuda-runtime` does not); in a "
            "container, start it with the GPU and its driver passed in (the NVIDIA "
            "Container Toolkit, e.g. --gpus all)",
        ),
    }
    for name in ["cuda-driver-standin"]:
        try:
            needs = importlib.metadata.distribution(name).metadata.get_all("Requires-External") or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for soname in (entry.split(";")[0].strip() for entry in needs):
            if soname not in drivers:
                continue
            try:
                ctypes.CDLL(soname)
            except OSError:
                provider, hint = drivers[soname]
                msg = (
                    f"cuda_driver_standin: {name} needs {soname} ({provider}), and no copy of it is "
                    "where the dynamic loader looks: the GPU driver is missing here, not a toolkit. "
                    f"To use {name}, {hint}."
                )
                raise ImportError(msg) from None


_require_the_gpu_driver()
del _require_the_gpu_driver
# --- end of the variant guard ---
from ._driver import memory_type, versions  # noqa: E402

__all__ = ["memory_type", "versions"]
