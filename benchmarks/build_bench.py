"""Build benchmarks, each a ratio of builds timed in this one run (paired: a 1-Python build, then
the 4-Python build, repeated --pairs times; the median ratio counts). Every build is a real
`release build` (a child process) from an empty work directory with a cold private ccache
(CCACHE_DIR of its own), after the per-Python builder environments are made.

* reference: the reference engine (core prebuilt once per variant), 4-Python ÷ 1-Python build,
  stable ABI on (cp310, cp311 and one cp312-abi3 wheel; goal <= 1.3) and off (a wheel per Python).
* heavy: a generated engine without a prebuild step (benchmarks/heavy_engine.py: a heavy C++ core
  compiled with a per-Python -I), 4-Python ÷ 1-Python; goal <= 1.5, which only ccache sharing the
  core between Pythons reaches. Its hit rate is reported.
* no-op: the 4-Python build run again with nothing changed, ÷ the cold build; goal <= 0.1
  (measured for both engines after their 4-Python builds).
* container: `release build --container` in the reference engine's local cpu image
  (localhost/xfer-build-cpu), where nothing is prebuilt: the reference engine with the stable ABI on
  (goal <= 1.5) and off (a wheel per Python; reported), and the generated engine (goal <= 1.5), each
  N-Python ÷ 1-Python by CPU seconds (the containers' cgroups) with the variant's compiler cache cold
  (build/ccache removed), then the no-op rebuild. The cache's hits are reported.
* engine: a real engine's matrix (`--engine-matrix examples/mooncake/matrix.yaml`, its checkout
  linked as that matrix's `engine.source`), one variant (`--variant`, default cpu) built in its own
  local image with every Python of this repository's matrix ÷ the last one alone, by CPU seconds,
  cold compiler cache; goal <= 1.6 (issue 47: the binding's compile steps and the per-Python repairs
  are the floor). A copy of the matrix with `python:` widened is built in the scratch directory.

Usage: python benchmarks/build_bench.py [--bench reference|heavy|container|engine ...] [--quick] [--pairs N]
       [--reference-only] (the container bench without the generated engine)
       [--engine-matrix PATH] (the engine bench's matrix)
(exit 1 when a goal is missed)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import heavy_engine  # noqa: E402

from release.builder.prebuild import builder_python  # noqa: E402
from release.builder.reuse import CacheStats, read_stats_log  # noqa: E402

GOAL_ABI3 = 1.3
GOAL_HEAVY = 1.5
GOAL_NOOP = 0.1
GOAL_CONTAINER = 1.5
GOAL_ENGINE = 1.6
CONTAINER_IMAGE = "localhost/xfer-build-cpu"
HEAVY_UNITS = 16
QUICK_UNITS = 5
TIMEOUT = 1800  # one build, seconds


@dataclass
class Row:
    name: str
    numerator: float
    denominator: float
    ratio: float
    goal: float | None
    note: str = ""

    @property
    def status(self) -> str:
        if self.goal is None:
            return "(report)"
        return "OK" if self.ratio <= self.goal else "MISSED"


def progress(message: str) -> None:
    print(message, flush=True)


@dataclass
class Build:
    seconds: float
    cache: CacheStats
    cpu: float = 0.0
    """CPU seconds of the build and every process under it: what other users of a shared machine
    do not stretch, unlike the wall time."""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Bench:
    """Builds of one matrix in a scratch directory, each with a cold ccache of its own."""

    logs: Path | None = None
    """`--logs`: where each build's log is kept (cibuildwheel times its steps there); else the scratch."""

    def __init__(self, matrix: Path, variant: str, scratch: Path, *, container: bool = False) -> None:
        self.matrix = matrix
        self.variant = variant
        self.scratch = scratch
        self.count = 0
        self.container = container
        """`--container`: the variant's compiler cache (build/ccache) is what a cold build removes."""

    def build(self, pythons: list[str], *, clean: bool = True) -> Build:
        work = self.matrix.parent / "build" / self.variant
        if clean:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(self.matrix.parent / "wheelhouse", ignore_errors=True)
            shutil.rmtree(self.matrix.parent / "build" / "ccache", ignore_errors=True)
        self.count += 1
        cache_dir = self.scratch / f"ccache-{self.count}"
        log = (self.logs or self.scratch) / f"build-{self.count}.log"
        cmd = [
            sys.executable,
            "-m",
            "release",
            "--matrix",
            str(self.matrix),
            "build",
            "--variant",
            self.variant,
        ]
        for py in pythons:
            cmd += ["--python", py]
        if self.container:
            cmd.append("--container")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCACHE_")}
        env |= {"CCACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT)}
        started, cpu_before = time.perf_counter(), children_cpu()
        containers: dict[str, float] = {}
        with log.open("w", encoding="utf-8") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
            while proc.poll() is None:
                if time.perf_counter() - started > TIMEOUT:
                    proc.kill()
                if self.container:
                    container_cpu(str(self.matrix.parent), containers)
                time.sleep(1.0)
        elapsed, cpu = time.perf_counter() - started, children_cpu() - cpu_before
        cpu += sum(containers.values())
        if proc.returncode != 0:
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
            sys.exit(f"build failed (exit {proc.returncode}; log {log}):\n{tail}")
        hits = misses = 0
        logs = [*(work / "logs").glob("*.ccache"), *(work / "logs" / "container-ccache").glob("*.log")]
        for stats_log in logs:
            stats = read_stats_log(stats_log)
            if stats is not None:
                hits, misses = hits + stats.hits, misses + stats.misses
        shutil.rmtree(cache_dir, ignore_errors=True)
        return Build(elapsed, CacheStats(hits, misses), cpu)


_MOUNTS: dict[str, str] = {}
"""Container ID -> the host directories it mounts (read once per container)."""


def container_cpu(directory: str, seen: dict[str, float]) -> None:
    """The CPU seconds so far of each running cibuildwheel container of this build (the one that
    mounts a directory under `directory`: the compiler cache), from its cgroup (v1 cpuacct or v2
    cpu.stat), into `seen` by container ID: the compilers run under podman's conmon, not as this
    process's children. Sampled each second, so the last second of a container is not counted."""
    proc = subprocess.run(
        ["podman", "ps", "--filter", "name=cibuildwheel", "--format", "{{.ID}}", "--no-trunc"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    for ident in proc.stdout.split():
        if ident not in _MOUNTS:
            sources = subprocess.run(
                ["podman", "inspect", ident, "--format", "{{range .Mounts}}{{.Source}} {{end}}"],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
            _MOUNTS[ident] = sources.stdout
        if directory not in _MOUNTS[ident]:
            continue
        for path in (
            f"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-{ident}/cpuacct.usage",
            f"/sys/fs/cgroup/libpod_parent/libpod-{ident}/cpu.stat",
        ):
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError:
                continue
            if path.endswith("cpu.stat"):
                fields = dict(x.split() for x in text.splitlines())
                seconds = int(fields.get("usage_usec", "0")) / 1e6
            else:
                seconds = int(text.strip()) / 1e9
            seen[ident] = max(seen.get(ident, 0.0), seconds)
            break


def warm_builders(engine: Path, pythons: list[str], venvs: Path) -> None:
    """The per-Python builder environments, made before any build is timed."""
    progress(f"  builder environments for {', '.join(pythons)} in {venvs} …")
    venvs.mkdir(parents=True, exist_ok=True)
    for py in pythons:
        builder_python(py, engine, venvs, os.environ)


def paired(
    bench: Bench, label: str, pythons: list[str], pairs: int
) -> tuple[Build, Build, float, str, float]:
    """(last 1-Python build, last 4-Python build, median wall ratio, a note with the CPU-second
    ratio, the median CPU-second ratio) of `pairs` pairs."""
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    one = four = Build(0.0, CacheStats(0, 0))
    for n in range(1, pairs + 1):
        progress(f"  [{label}] pair {n}/{pairs}: 1 Python ({pythons[-1]}), cold ccache …")
        one = bench.build([pythons[-1]])
        progress(
            f"  [{label}] pair {n}/{pairs}: 1 Python {one.seconds:.1f} s; "
            f"{len(pythons)} Pythons, cold ccache …"
        )
        four = bench.build(pythons)
        ratios.append(four.seconds / one.seconds)
        cpu_ratios.append(four.cpu / one.cpu if one.cpu else float("nan"))
        progress(
            f"  [{label}] pair {n}/{pairs}: {len(pythons)} Pythons {four.seconds:.1f} s "
            f"(ccache hits {four.cache.text}): ratio {ratios[-1]:.2f}; CPU {four.cpu:.0f} s ÷ "
            f"{one.cpu:.0f} s = {cpu_ratios[-1]:.2f}"
        )
    cpu = statistics.median(cpu_ratios)
    note = f"CPU s {four.cpu:.0f} ÷ {one.cpu:.0f} = {cpu:.2f}" + (
        f" (pairs: {', '.join(f'{r:.2f}' for r in cpu_ratios)})" if len(cpu_ratios) > 1 else ""
    )
    return one, four, statistics.median(ratios), note, cpu


def noop(bench: Bench, label: str, pythons: list[str], cold: Build) -> Row:
    progress(f"  [{label}] {len(pythons)} Pythons again, nothing changed …")
    again = bench.build(pythons, clean=False)
    ratio = again.seconds / cold.seconds
    progress(f"  [{label}] no-op rebuild {again.seconds:.1f} s ÷ cold {cold.seconds:.1f} s = {ratio:.3f}")
    return Row(f"no-op rebuild ÷ cold build, {label}", again.seconds, cold.seconds, ratio, GOAL_NOOP)


def reference_matrix(directory: Path, variant: str, venvs: Path, stable_abi: bool) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / data["engine"]["source"])
    data["variants"] = {variant: data["variants"][variant]}
    data["variants"][variant].pop("stable_abi", None)
    if stable_abi:
        data["engine"]["stable_abi"] = "3.12"
    else:
        data["engine"].pop("stable_abi", None)
    return _place(directory, data, venvs)


def _place(directory: Path, data: dict[str, object], venvs: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (directory / "build").mkdir(exist_ok=True)
    (directory / "build" / "venvs").symlink_to(venvs)
    return path


def bench_reference(variant: str, pythons: list[str], pairs: int, scratch: Path) -> list[Row]:
    progress(f"== reference engine ({variant}): core prebuilt once, nanobind binding")
    venvs = ROOT / "build" / "venvs"
    warm_builders(ROOT / "engine", pythons, venvs)
    rows: list[Row] = []
    for stable in (True, False):
        label = f"reference {variant}, stable ABI {'on' if stable else 'off'}"
        matrix = reference_matrix(scratch / f"ref-{stable}", variant, venvs, stable)
        bench = Bench(matrix, variant, scratch)
        one, four, ratio, note, _ = paired(bench, label, pythons, pairs)
        wheels = "3 wheels" if stable else f"{len(pythons)} wheels"
        rows.append(
            Row(
                f"{len(pythons)}-Python ÷ 1-Python, {label} ({wheels})",
                four.seconds,
                one.seconds,
                ratio,
                GOAL_ABI3 if stable else None,
                note,
            )
        )
        if stable:
            rows.append(noop(bench, label, pythons, four))
    return rows


def bench_heavy(pythons: list[str], pairs: int, units: int, scratch: Path) -> list[Row]:
    progress(f"== generated engine without a prebuild: {units} heavy core units, per-Python -I")
    engine = heavy_engine.write_engine(scratch / "heavy-src", units)
    floor = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["platform"]["floor"]
    venvs = ROOT / "build" / "venvs-heavy"
    warm_builders(engine, pythons, venvs)
    directory = scratch / "heavy"
    directory.mkdir()
    matrix = heavy_engine.write_matrix(directory, engine, pythons, floor)
    (directory / "build").mkdir()
    (directory / "build" / "venvs").symlink_to(venvs)
    bench = Bench(matrix, "cpu", scratch)
    label = f"generated engine, {units} core units"
    one, four, ratio, note, _ = paired(bench, label, pythons, pairs)
    rows = [
        Row(
            f"{len(pythons)}-Python ÷ 1-Python, {label}, cold ccache",
            four.seconds,
            one.seconds,
            ratio,
            GOAL_HEAVY,
            f"ccache hits {four.cache.text}; {note}",
        ),
        noop(bench, label, pythons, four),
    ]
    return rows


def bench_container(
    variant: str, pythons: list[str], pairs: int, units: int, scratch: Path, *, generated: bool = True
) -> list[Row]:
    """Both engines (the reference one alone without `generated`) built in the local cpu image:
    nothing prebuilt, the compiler cache shared. The reference engine with the stable ABI on (one
    cp312-abi3 wheel for 3.12+: the goal) and off (a wheel per Python: reported). Judged by CPU
    seconds (the build containers' cgroups and this process's children), which others' load on a
    shared machine does not stretch: the median CPU ratio of the pairs."""
    progress(f"== container builds in {CONTAINER_IMAGE}: the variant's compiler cache, cold at each pair")
    venvs = ROOT / "build" / "venvs"
    rows: list[Row] = []
    engines = []
    for stable in (True, False):
        matrix = reference_matrix(scratch / f"container-ref-{stable}", variant, venvs, stable_abi=stable)
        _in_image(matrix, variant)
        wheels = "cp310, cp311 and one cp312-abi3 wheel" if stable else "a wheel per Python"
        label = f"reference engine, container, stable ABI {'on' if stable else 'off'} ({wheels})"
        engines.append((matrix, variant, label, GOAL_CONTAINER if stable else None))
    if generated:
        heavy = heavy_engine.write_engine(scratch / "container-heavy-src", units)
        floor = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["platform"]["floor"]
        heavy_matrix = heavy_engine.write_matrix(scratch / "container-heavy", heavy, pythons, floor)
        _in_image(heavy_matrix, "cpu")
        label = f"generated engine ({units} core units), container"
        engines.append((heavy_matrix, "cpu", label, GOAL_CONTAINER))
    for path, name, label, goal in engines:
        bench = Bench(path, name, scratch, container=True)
        one, four, ratio, note, cpu = paired(bench, label, pythons, pairs)
        rows.append(
            Row(
                f"{len(pythons)}-Python ÷ 1-Python, {label}, cold compiler cache, CPU s",
                four.cpu,
                one.cpu,
                cpu,
                goal,
                f"ccache hits {four.cache.text}; {note}; wall ratio {ratio:.2f}",
            )
        )
        if goal is not None:
            rows.append(noop(bench, label, pythons, four))
    return rows


def bench_engine(matrix: Path, variant: str, pythons: list[str], pairs: int, scratch: Path) -> list[Row]:
    """A real engine's variant in its local image: every Python ÷ the last alone, CPU seconds."""
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    source = (matrix.parent / data["engine"]["source"]).resolve()
    if not source.is_dir():
        sys.exit(f"{matrix}: engine.source {source} is not a directory (link the engine's checkout there)")
    data["engine"]["source"] = str(source)
    data["python"] = pythons
    copy = scratch / "engine" / "matrix.yaml"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    label = f"{data['engine']['import_name']} {variant}, its local image"
    progress(f"== {label}: {len(pythons)} Pythons ÷ 1, the variant's compiler cache cold at each build")
    bench = Bench(copy, variant, scratch, container=True)
    one, every, ratio, note, cpu = paired(bench, label, pythons, pairs)
    name = f"{len(pythons)}-Python ÷ 1-Python, {label}, cold compiler cache, CPU s"
    wall = f"wall {every.seconds:.0f} s ÷ {one.seconds:.0f} s = {ratio:.2f}"
    note = f"ccache hits {every.cache.text}; {note}; {wall}"
    return [Row(name, every.cpu, one.cpu, cpu, GOAL_ENGINE, note), noop(bench, label, pythons, every)]


def _in_image(matrix: Path, variant: str) -> None:
    """The matrix's variant built in the reference engine's local cpu image (made by its own
    recipe in matrix.yaml, as `release build --container` of the cpu variant makes it)."""
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    data["variants"][variant]["build_image"] = {"local": CONTAINER_IMAGE}
    matrix.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def render(rows: list[Row]) -> str:
    width = max(len(r.name) for r in rows)
    lines = [f"{'benchmark':<{width}}  {'A s':>7}  {'B s':>7}  {'A÷B':>6}  {'goal':>6}  status    note"]
    for r in rows:
        goal = f"<= {r.goal}" if r.goal is not None else "-"
        lines.append(
            f"{r.name:<{width}}  {r.numerator:7.1f}  {r.denominator:7.1f}  {r.ratio:6.3f}  {goal:>6}  "
            f"{r.status:<8}  {r.note}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bench",
        action="append",
        choices=["reference", "heavy", "container", "engine"],
        help="which to run (repeatable; default: all three)",
    )
    parser.add_argument("--variant", default="cpu", help="reference engine variant (default: cpu)")
    parser.add_argument("--pairs", type=int, default=1, help="1-Python/4-Python pairs (default: 1)")
    parser.add_argument("--quick", action="store_true", help=f"a {QUICK_UNITS}-unit generated core")
    parser.add_argument("--units", type=int, help=f"heavy core units (default: {HEAVY_UNITS})")
    parser.add_argument("--reference-only", action="store_true", help="container: the reference engine alone")
    parser.add_argument("--logs", type=Path, help="keep each build's log in this directory")
    parser.add_argument("--engine-matrix", type=Path, help="engine: a real engine's matrix.yaml")
    args = parser.parse_args()
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
        Bench.logs = args.logs
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    pythons = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["python"]
    units = args.units or (QUICK_UNITS if args.quick else HEAVY_UNITS)
    print(f"{os.cpu_count()} CPUs (shared); Pythons {', '.join(pythons)}", flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp:
        scratch = Path(tmp)
        for name in args.bench or ["reference", "heavy", "container"]:  # engine: named, with its matrix
            if name == "reference":
                rows += bench_reference(args.variant, pythons, args.pairs, scratch)
            elif name == "engine":
                if args.engine_matrix is None:
                    parser.error("--bench engine needs --engine-matrix PATH")
                rows += bench_engine(args.engine_matrix, args.variant, pythons, args.pairs, scratch)
            elif name == "container":
                rows += bench_container(
                    args.variant, pythons, args.pairs, units, scratch, generated=not args.reference_only
                )
            else:
                rows += bench_heavy(pythons, args.pairs, units, scratch)
    print("\n(A: the build named first, B: the one it is divided by; wall seconds, the median ratio of the")
    print(
        " pairs; the CPU seconds of the last pair, which others' load on a shared machine does not stretch)"
    )
    print(render(rows))
    missed = [r for r in rows if r.status == "MISSED"]
    print("\n" + ("goals missed: " + "; ".join(r.name for r in missed) if missed else "every goal met"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
