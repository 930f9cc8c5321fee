"""The reference engine's two bindings side by side, nanobind (the wheels) and pybind11 (kept only
for this comparison, -DXFER_BINDING=pybind11), measured in this one run for each Python:

* compile time: `cmake --build` of the extension alone (the core is prebuilt once, as the toolkit
  does), ccache off, every core of the machine;
* extension size: the .so as built and stripped (`strip --strip-unneeded`, as a repaired wheel);
* call overhead: a 4 KiB write over loopback through the CPU backend between two engines in one
  process (the raw `xfer._xfer.Engine.write`, best of several batches), and a property read
  (`Engine.port`), which is nothing but the binding's dispatch.

nanobind is also built once for the stable ABI (`abi3`, with 3.12) and run on every Python >= 3.12.
Usage: python benchmarks/binding_bench.py [--quick] [--python 3.12 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "engine"
sys.path.insert(0, str(ROOT))

from scikit_build_core import resources  # noqa: E402

from release.machine.interpreters import find_interpreter  # noqa: E402

# Runs in the measured Python with PYTHONPATH=<build>/python: prints {"write_us", "prop_ns"}.
PROBE = """
import json, sys, time
from xfer import _xfer
writes, reads, batches = int(sys.argv[1]), int(sys.argv[2]), 5
src, dst = bytearray(b"x" * 4096), bytearray(4096)
a, b = _xfer.Engine("a", ""), _xfer.Engine("b", "")
src_ptr = _xfer.buffer_info(src)[0]
remote = b.register_memory(_xfer.buffer_info(dst)[0], 4096)["addr"]
a.register_memory(src_ptr, 4096)
a.add_peer("b", "127.0.0.1", b.port)
entry = [(src_ptr, "b", remote, 4096)]
for _ in range(50):
    a.write(entry)
best_write = best_prop = float("inf")
for _ in range(batches):
    t = time.perf_counter()
    for _ in range(writes):
        a.write(entry)
    best_write = min(best_write, (time.perf_counter() - t) / writes)
    t = time.perf_counter()
    for _ in range(reads):
        a.port
    best_prop = min(best_prop, (time.perf_counter() - t) / reads)
assert dst == src
a.close(); b.close()
print(json.dumps({"write_us": best_write * 1e6, "prop_ns": best_prop * 1e9}))
"""


@dataclass
class Result:
    binding: str
    python: str
    compile_s: float
    compile_cpu: float
    size: int
    stripped: int
    write_us: float
    prop_ns: float


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def cmake_dir(module: str) -> str:
    flag = "--cmake_dir" if module == "nanobind" else "--cmakedir"
    return run([sys.executable, "-m", module, flag]).stdout.strip()


def generator() -> list[str]:
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def build_core(scratch: Path) -> Path:
    build, prefix = scratch / "core", scratch / "core-prefix"
    flags = ["-DXFER_BACKEND=cpu", "-DXFER_BUILD_PYTHON=OFF", "-DXFER_VERSION=0.1.0"]
    run(["cmake", "-S", ENGINE, "-B", build, *generator(), *flags])
    run(["cmake", "--build", build, "--parallel", str(os.cpu_count() or 1)])
    run(["cmake", "--install", build, "--prefix", prefix])
    return prefix


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build_binding(
    scratch: Path, prefix: Path, binding: str, python: Path, abi3: bool
) -> tuple[Path, float, float]:
    """Configure, then time the build of the extension alone; (the .so, wall s, CPU s)."""
    tag = f"{binding}{'-abi3' if abi3 else ''}-{python.name}"
    build = scratch / tag
    defines = [
        f"-DXFER_BINDING={binding}",
        f"-DPython_EXECUTABLE={python}",
        f"-DXFER_CORE_PREFIX={prefix}",
        f"-D{binding}_DIR={cmake_dir(binding)}",
        "-DXFER_VERSION=0.1.0",
    ]
    if abi3:
        # scikit-build-core's FindPython knows Development.SABIModule before CMake 3.26.
        defines += [
            f"-DCMAKE_MODULE_PATH={Path(resources.__file__).parent / 'find_python'}",
            "-DSKBUILD_SABI_COMPONENT=Development.SABIModule",
            "-DSKBUILD_SABI_VERSION=3.12",
        ]
    env = {**os.environ, "CCACHE_DISABLE": "1"}
    run(["cmake", "-S", ENGINE, "-B", build, *generator(), *defines], env=env)
    started, cpu = time.perf_counter(), children_cpu()
    run(["cmake", "--build", build, "--target", "_xfer", "--parallel", str(os.cpu_count() or 1)], env=env)
    seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
    (so,) = (build / "python" / "xfer").glob("_xfer*.so")
    return so, seconds, cpu


def stripped_size(so: Path, scratch: Path) -> int:
    copy = scratch / f"stripped-{so.parent.parent.parent.name}.so"
    shutil.copyfile(so, copy)
    run(["strip", "--strip-unneeded", copy])
    return copy.stat().st_size


def probe(python: Path, so: Path, writes: int, reads: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "XFER_"))}
    env["PYTHONPATH"] = str(so.parent.parent)
    out = run([python, "-c", PROBE, str(writes), str(reads)], env=env, timeout=600).stdout
    return dict(json.loads(out.splitlines()[-1]))


def measure(
    scratch: Path,
    prefix: Path,
    binding: str,
    build_py: tuple[str, Path],
    run_pys: list[tuple[str, Path]],
    *,
    calls: tuple[int, int],
    abi3: bool = False,
) -> list[Result]:
    label = f"{binding}{' abi3' if abi3 else ''}"
    print(f"  [{label}] compiling for Python {build_py[0]} …", flush=True)
    so, seconds, cpu = build_binding(scratch, prefix, binding, build_py[1], abi3)
    size, stripped = so.stat().st_size, stripped_size(so, scratch)
    results = []
    for version, python in run_pys:
        print(
            f"  [{label}] {seconds:.1f} s, {stripped / 1e3:.0f} KB stripped; calls on Python {version} …",
            flush=True,
        )
        timed = probe(python, so, *calls)
        results.append(
            Result(label, version, seconds, cpu, size, stripped, timed["write_us"], timed["prop_ns"])
        )
    return results


def table(results: list[Result]) -> str:
    lines = [
        f"{'binding':<14} {'Python':>6} {'compile s':>9} {'CPU s':>6} {'.so KB':>7} {'stripped KB':>11} "
        f"{'4 KiB write µs':>14} {'property ns':>11}"
    ]
    for r in results:
        lines.append(
            f"{r.binding:<14} {r.python:>6} {r.compile_s:9.1f} {r.compile_cpu:6.1f} {r.size / 1e3:7.0f} "
            f"{r.stripped / 1e3:11.0f} "
            f"{r.write_us:14.1f} {r.prop_ns:11.0f}"
        )
    return "\n".join(lines)


def ratios(results: list[Result]) -> str:
    by = {(r.binding, r.python): r for r in results}
    lines = [
        f"{'nanobind ÷ pybind11':<20} {'Python':>6} {'compile':>7} {'CPU':>5} {'stripped size':>13} "
        f"{'4 KiB write':>11} {'property':>8}"
    ]
    for (binding, python), nb in by.items():
        pb = by.get(("pybind11", python))
        if binding != "nanobind" or pb is None:
            continue
        lines.append(
            f"{'':<20} {python:>6} {nb.compile_s / pb.compile_s:7.2f} {nb.compile_cpu / pb.compile_cpu:5.2f} "
            f"{nb.stripped / pb.stripped:13.2f} "
            f"{nb.write_us / pb.write_us:11.2f} {nb.prop_ns / pb.prop_ns:8.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="Python version(s) (default: the matrix's)")
    parser.add_argument("--quick", action="store_true", help="one Python, fewer calls")
    args = parser.parse_args()
    matrix_pythons = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["python"]
    versions = args.python or (matrix_pythons[-2:-1] if args.quick else matrix_pythons)
    writes, reads = (300, 20_000) if args.quick else (3_000, 200_000)
    pythons = []
    for version in versions:
        found = find_interpreter(version)
        if found is None:
            sys.exit(f"error: no Python {version} interpreter found (pyenv install {version})")
        pythons.append((version, found))
    print(
        f"{os.cpu_count()} CPUs (shared); Pythons {', '.join(versions)}; "
        f"{writes} writes, {reads} property reads a batch"
    )
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="binding-bench-") as tmp:
        scratch = Path(tmp)
        print("  core: compiling once …", flush=True)
        prefix = build_core(scratch)
        for version, python in pythons:
            for binding in ("nanobind", "pybind11"):
                results += measure(
                    scratch, prefix, binding, (version, python), [(version, python)], calls=(writes, reads)
                )
        newer = [(v, p) for v, p in pythons if tuple(map(int, v.split("."))) >= (3, 12)]
        if newer:
            first = find_interpreter("3.12")
            if first is not None:
                results += measure(
                    scratch, prefix, "nanobind", ("3.12", first), newer, calls=(writes, reads), abi3=True
                )
    print("\n" + table(results))
    print("\n" + ratios(results))
    print(
        "\n(compile: the extension alone, core prebuilt, ccache off, wall and CPU seconds; write: best batch)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
