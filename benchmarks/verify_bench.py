"""`python -m release verify` against `auditwheel show` on one ~100 MB (unpacked) wheel.

The wheel is built here, at run time, with the compiler, shaped like a GPU transfer engine's: one
library with a large data section (fat-binary-like: compressed code objects between zero
padding), a C++ core exporting a few thousand functions, vendored dependency libraries and a few
extension modules. Both commands run in this one process's measurement: one warm-up each, then the
best of several runs. Exits 1 when verify is less than RATIO_REQUIRED times faster.

Usage: python benchmarks/verify_bench.py [--runs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATIO_REQUIRED = 8.0
DATA_MIB = 88
DEPENDENCIES = 12
CORE_FUNCTIONS = 3000
DEP_FUNCTIONS = 300
EXTENSIONS = 3
PYTHON_TAG = "cp311"


def _payload(path: Path, mib: int) -> None:
    """Fat-binary-like bytes: compressed GPU code objects are incompressible."""
    rng = random.Random(1234)  # noqa: S311 (reproducible filler, not a secret)
    with path.open("wb") as fh:
        for _ in range(mib):
            fh.write(rng.randbytes(1 << 20))


def _compile(args: list[str]) -> None:
    subprocess.run(args, check=True)


def build_wheel(work: Path) -> Path:
    """Compile the libraries and zip them into a wheel with METADATA, WHEEL and RECORD."""
    src = work / "src"
    pkg = work / "tree" / "xbench"
    libs = work / "tree" / "xbench_engine.libs"
    for d in (src, pkg, libs):
        d.mkdir(parents=True)
    _payload(src / "kernels.bin", DATA_MIB)
    (src / "kernels.c").write_text(
        '__asm__(".section .data\\n.globl xbench_kernels\\n.type xbench_kernels,@object\\n'
        f'xbench_kernels:\\n.incbin \\"{src / "kernels.bin"}\\"\\n.size xbench_kernels, .-xbench_kernels\\n'
        '.previous\\n");\n'
        "extern unsigned char xbench_kernels[];\n"
        "unsigned char xbench_kernel_byte(unsigned long i) { return xbench_kernels[i]; }\n"
    )
    jobs: list[list[str]] = []
    cc = ["gcc", "-shared", "-fPIC", "-O1", "-s"]
    cxx = ["g++", "-shared", "-fPIC", "-O0", "-s"]
    jobs.append(
        [
            *cc,
            "-Wl,-soname,libxbench_kernels.so.1",
            "-o",
            str(libs / "libxbench_kernels.so.1"),
            str(src / "kernels.c"),
        ]
    )
    dep_names = []
    for i in range(DEPENDENCIES):
        name = f"libdep{i:02d}-{hashlib.sha256(str(i).encode()).hexdigest()[:8]}.so.1"
        dep_names.append(name)
        body = "\n".join(
            f'std::string dep{i}_fn{j}(int x) {{ return std::to_string(x * {j + 1} + {i}) + "d{i}"; }}'
            for j in range(DEP_FUNCTIONS)
        )
        (src / f"dep{i}.cpp").write_text(f"#include <string>\n{body}\n")
        jobs.append([*cxx, f"-Wl,-soname,{name}", "-o", str(libs / name), str(src / f"dep{i}.cpp")])
    core = "\n".join(
        f"std::vector<int> core_fn{j}(const std::vector<int>& v) "
        f"{{ std::vector<int> r(v); r.push_back({j}); return r; }}"
        for j in range(CORE_FUNCTIONS)
    )
    (src / "core.cpp").write_text(f"#include <vector>\n{core}\n")
    for j in range(EXTENSIONS):
        (src / f"ext{j}.c").write_text(
            "unsigned char xbench_kernel_byte(unsigned long i);\n"
            f"int PyInit__ext{j}(void) {{ return xbench_kernel_byte({j}) + {j}; }}\n"
        )
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(_compile, jobs))
    link = ["-Wl,--no-as-needed", f"-L{libs}", "-Wl,-rpath,$ORIGIN"]
    deps = [f"-l:{n}" for n in dep_names]
    _compile(
        [
            *cxx,
            "-Wl,-soname,libxbench_core.so.1",
            "-o",
            str(libs / "libxbench_core.so.1"),
            str(src / "core.cpp"),
            *link,
            *deps,
            "-l:libxbench_kernels.so.1",
        ]
    )
    ext_jobs = [
        [
            *cc,
            "-o",
            str(pkg / f"_ext{j}.{PYTHON_TAG}-x86_64-linux-gnu.so".replace(PYTHON_TAG, "cpython-311")),
            str(src / f"ext{j}.c"),
            "-Wl,--no-as-needed",
            f"-L{libs}",
            "-Wl,-rpath,$ORIGIN/../xbench_engine.libs",
            "-l:libxbench_kernels.so.1",
            "-l:libxbench_core.so.1",
        ]
        for j in range(EXTENSIONS)
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(_compile, ext_jobs))
    (pkg / "__init__.py").write_text('"""Benchmark package."""\n')

    tag = f"{PYTHON_TAG}-{PYTHON_TAG}-manylinux_2_34_x86_64"  # what a Debian 12 host gives
    dist_info = "xbench_engine-1.0.dist-info"
    files = {
        p.relative_to(work / "tree").as_posix(): p for p in sorted((work / "tree").rglob("*")) if p.is_file()
    }
    wheel = work / f"xbench_engine-1.0-{tag}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, path in files.items():
            data = path.read_bytes()
            info = zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if path.suffix != ".py" else 0o100644) << 16
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)
            record.append(f"{member},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}")
        meta = {
            f"{dist_info}/METADATA": b"Metadata-Version: 2.1\nName: xbench-engine\nVersion: 1.0\n",
            f"{dist_info}/WHEEL": (
                f"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: false\nTag: {tag}\n"
            ).encode(),
        }
        for member, data in meta.items():
            zf.writestr(member, data)
            record.append(f"{member},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _time(cmd: list[str], runs: int, env: dict[str, str], cwd: Path) -> float:
    """One warm-up, then the best wall time of `runs`."""
    best = float("inf")
    for i in range(runs + 1):
        start = time.perf_counter()
        result = subprocess.run(
            cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
        )
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            sys.stderr.write(result.stderr.decode(errors="replace"))
            msg = f"{' '.join(cmd[:4])}... exited {result.returncode}"
            raise SystemExit(msg)
        if i:
            best = min(best, elapsed)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (default: %(default)s)")
    parser.add_argument("--keep", type=Path, help="build the wheel in this directory and keep it")
    args = parser.parse_args()
    for tool in ("gcc", "g++"):
        if shutil.which(tool) is None:
            print(f"verify_bench: {tool} is needed to build the benchmark wheel", file=sys.stderr)
            return 2
    auditwheel = [sys.executable, "-m", "auditwheel"]
    work = args.keep or Path(tempfile.mkdtemp(prefix="verify-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        wheel = build_wheel(work / "build")
        with zipfile.ZipFile(wheel) as zf:
            unpacked = sum(i.file_size for i in zf.infolist())
            elf_count = sum(1 for i in zf.infolist() if i.filename.endswith((".so", ".so.1")))
        print(
            f"built {wheel.name}: {unpacked / 1e6:.1f} MB unpacked, {wheel.stat().st_size / 1e6:.1f} MB "
            f"zipped, {elf_count} ELF files ({time.perf_counter() - start:.1f} s)"
        )
        # Same environment for both; byte-code caching on so neither recompiles itself each run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        # No matrix in the working directory: verify works on any wheel, like auditwheel show.
        verify = _time([sys.executable, "-m", "release", "verify", str(wheel)], args.runs, env, work)
        show = _time([*auditwheel, "show", str(wheel)], args.runs, env, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    ratio = show / verify
    print(f"python -m release verify: {verify:.3f} s")
    print(f"auditwheel show:          {show:.3f} s")
    print(f"ratio: {ratio:.1f}x (required: {RATIO_REQUIRED:.0f}x)")
    if ratio < RATIO_REQUIRED:
        print(f"verify_bench: FAIL: verify is only {ratio:.1f}x faster than auditwheel show", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
