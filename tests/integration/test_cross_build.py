"""aarch64 wheels on this x86_64 machine: `release build --arch aarch64` cross-compiles the cpu
and cuda variants in their local Debian images (docs/machines.md), every ELF file of a wheel is
AArch64 and verify passes; the matrix's smoke commands then run the wheel under emulation
(binfmt_misc's qemu-user, registered by .ci/run) with Debian's own aarch64 Python. One Python per
variant, as the issue allows: every other aarch64 leg runs natively on GitHub's arm64 runners."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from release.config.matrix import load
from release.inspect.elf import ElfInfo, inspect_elf, is_elf
from release.machine.containers import ContainerEngine
from release.machine.emulation import DIST_PYTHON, emulated_command
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from release.settings import in_ci
from tests.integration.conftest import ROOT, toolkit

ENGINE = ContainerEngine.answering()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

pytestmark = pytest.mark.slow
CUDA_CROSS_IMAGE = "localhost/xfer-build-cuda-cross-aarch64"


def _matrix(directory: Path, variant: str = "cpu") -> Path:
    """The real matrix, one variant only, released for x86_64 and aarch64, pointing at the real engine."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["platform"]["floor"] = "manylinux_2_28"
    data["platform"]["architectures"] = ["x86_64", "aarch64"]
    data["variants"] = {variant: data["variants"][variant]}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    shutil.copytree(ROOT / "packaging", directory / "packaging", dirs_exist_ok=True)
    return directory / "matrix.yaml"


def test_an_aarch64_wheel_is_cross_compiled_verified_and_runs_under_emulation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ENGINE is not None
    matrix = _matrix(tmp_path / "project")
    wheelhouse = tmp_path / "wheelhouse"
    proc = toolkit(
        "--matrix", str(matrix), "build", "--variant", "cpu", "--arch", "aarch64", "--python", DIST_PYTHON,
        "--wheelhouse", str(wheelhouse), timeout=1800,
    )  # fmt: skip
    assert "(cross, aarch64)" in proc.stdout, proc.stdout
    (wheel,) = (wheelhouse / "cpu").glob("*.whl")
    assert wheel.name.startswith("xfer_engine_cpu-0.1.0-cp313-cp313-manylinux_") and wheel.name.endswith(
        "_aarch64.whl"
    ), wheel.name
    machines = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            if is_elf(data[:4]):
                machines[info.filename] = inspect_elf(info.filename, data).machine
    assert any(name.endswith("-aarch64-linux-gnu.so") for name in machines), machines
    assert any(name.endswith("scripts/xfer-master") for name in machines), machines
    assert set(machines.values()) == {"aarch64"}, machines  # EM_AARCH64, every one
    report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
    assert report["ok"] is True
    assert {r["id"]: r["status"] for r in report["rules"]}["elf-machine"] == "pass"
    # The matrix's smoke commands, under emulation; the wheel named relative to the working
    # directory, as a user types it (podman would take a relative mount source for a volume name).
    (step,) = (s for s in make_plan(load(matrix)).builds if s.identifier == "cp313-cpu-manylinux_aarch64")
    monkeypatch.chdir(wheelhouse)
    version, selftest = _emulated(Path("cpu") / wheel.name, step.variant)
    assert "0.1.0" in version and "backend cpu" in version, version
    assert json.loads(selftest[selftest.index("{") :])["ok"] is True, selftest


def _emulated(wheel: Path, variant: ResolvedVariant) -> list[str]:
    """What each of the variant's smoke commands printed, run under emulation with `wheel`
    (`release smoke` runs the same commands this way for another machine's wheel)."""
    assert ENGINE is not None
    outputs = []
    for command in variant.smoke_commands:
        proc = emulated_command(wheel, variant, "aarch64", command, engine=ENGINE)
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
        outputs.append(proc.stdout)
    return outputs


def _elf_files(wheel: Path) -> dict[str, ElfInfo]:
    with zipfile.ZipFile(wheel) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    return {name: inspect_elf(name, data) for name, data in members.items() if is_elf(data[:4])}


@pytest.fixture(scope="module")
def cuda_aarch64(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """(matrix, wheel, build output) of the cuda variant's cp313 aarch64 wheel, cross-compiled once
    for the module's tests: its cross image holds NVIDIA's sbsa runtime wheel and an aarch64 driver stub."""
    directory = tmp_path_factory.mktemp("cuda-aarch64")
    matrix = _matrix(directory / "project", "cuda")
    wheelhouse = directory / "wheelhouse"
    proc = toolkit(
        "--matrix", str(matrix), "build", "--variant", "cuda", "--arch", "aarch64", "--python", DIST_PYTHON,
        "--wheelhouse", str(wheelhouse), timeout=1800,
    )  # fmt: skip
    (wheel,) = (wheelhouse / "cuda").glob("*.whl")
    yield matrix, wheel, proc.stdout


def test_the_cuda_aarch64_wheel_binds_the_sbsa_runtime_and_is_verified(
    cuda_aarch64: tuple[Path, Path, str],
) -> None:
    """Built against libcudart of NVIDIA's aarch64 (sbsa) wheel, bound and never vendored, as the
    x86_64 cuda wheel is: NEEDED libcudart.so.13, excluded by repair, named in Requires-External."""
    _matrix_path, wheel, output = cuda_aarch64
    assert f"{CUDA_CROSS_IMAGE} (cross, aarch64)" in output, output
    assert wheel.name.startswith("xfer_engine-0.1.0-cp313-cp313-manylinux_") and wheel.name.endswith(
        "_aarch64.whl"
    ), wheel.name
    elves = _elf_files(wheel)
    assert {elf.machine for elf in elves.values()} == {"aarch64"}, elves
    (extension,) = (elf for name, elf in elves.items() if name.endswith("-aarch64-linux-gnu.so"))
    assert "libcudart.so.13" in extension.needed and "libcuda.so.1" not in extension.needed, extension.needed
    assert not [name for name in elves if "libcudart" in name or "libcuda." in name], list(elves)
    with zipfile.ZipFile(wheel) as zf:
        metadata = next(zf.read(n).decode() for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    assert "Requires-External: libcudart.so.13" in metadata.splitlines(), metadata
    report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
    assert report["ok"] is True
    rules = {r["id"]: r["status"] for r in report["rules"]}
    bound = ("runtime-abi", "vendored-runtime", "missing-runtime-needed", "external-dependency")
    for rule in ("elf-machine", *bound):
        assert rules[rule] == "pass", (rule, rules)
    assert report["runtime_bound"] == ["libcudart.so.13"]
    # The cross image's driver stub, for engines that link CUDA::cuda_driver: made for aarch64.
    stub = "/usr/local/cuda-13.0/targets/sbsa-linux/lib/stubs/libcuda.so"
    assert ENGINE is not None
    read = subprocess.run(
        [ENGINE.command, "run", "--rm", "--network=none", "--entrypoint", "cat", CUDA_CROSS_IMAGE, stub],
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    elf = inspect_elf("libcuda.so", read.stdout)
    assert (elf.machine, elf.soname) == ("aarch64", "libcuda.so.1")


def test_the_cuda_aarch64_wheel_imports_under_emulation_and_reports_no_driver(
    cuda_aarch64: tuple[Path, Path, str],
) -> None:
    """No GPU and no driver under qemu-user: the import loads the sbsa libcudart, and the self-test
    passes on host memory with the runtime's own words for the absent driver, as the x86_64 cuda
    wheel does on a GPU-less host (cudaGetDeviceCount: error 35)."""
    assert ENGINE is not None
    matrix, wheel, _output = cuda_aarch64
    (step,) = (s for s in make_plan(load(matrix)).builds if s.identifier == "cp313-cuda-manylinux_aarch64")
    version, selftest = _emulated(wheel, step.variant)
    assert "0.1.0" in version and "backend cuda" in version, version
    report = json.loads(selftest[selftest.index("{") :])
    assert report["ok"] is True and report["backend"] == "cuda", report
    assert report["runtime_library"] == "libcudart.so.13", report
    assert report["runtime_version"].startswith("13."), report
    assert report["device_count"] == 0 and report["gpu_direct"] is False, report
    assert report["gpu_direct_reason"] == (
        "no CUDA device visible (CUDA driver version is insufficient for CUDA runtime version)"
    ), report


def test_an_engine_script_that_calls_g_plus_plus_by_name_links_for_the_target(
    cuda_aarch64: tuple[Path, Path, str],
) -> None:
    """Mooncake builds nvlink_allocator.so with its own script: `g++ ... -lcuda`, by name, no -L. In
    the cross build `g++` is the target's compiler, and it links with the target's link-only
    directories (install-cuda.sh --target's aarch64 driver stub), as LIBRARY_PATH gives a native
    build; the image's own g++ is this machine's and finds no libcuda there."""
    assert ENGINE is not None
    source = 'extern "C" int cuInit(unsigned int); extern "C" int probe() { return cuInit(0); }'
    script = (
        f"printf '%s' '{source}' > /tmp/a.cpp && bash /toolkit-scripts/cross-build.sh compilers "
        "aarch64-linux-gnu /tmp/tools && {path}g++ -shared -fPIC /tmp/a.cpp -lcuda -o /tmp/a.so "
        "&& cat /tmp/a.so"
    )
    runs = {}
    for path in ("PATH=/tmp/tools:$PATH ", ""):
        runs[path] = subprocess.run(
            [ENGINE.command, "run", "--rm", "--network=none", "-v", f"{ROOT / 'scripts'}:/toolkit-scripts:ro",
             "--entrypoint", "bash", CUDA_CROSS_IMAGE, "-c", script.replace("{path}", path)],
            capture_output=True, check=False, timeout=300,
        )  # fmt: skip
    crossed = runs["PATH=/tmp/tools:$PATH "]
    assert crossed.returncode == 0, crossed.stderr.decode()[-2000:]
    elf = inspect_elf("a.so", crossed.stdout)
    assert elf.machine == "aarch64" and "libcuda.so.1" in elf.needed, (elf.machine, elf.needed)
    native = runs[""]
    assert native.returncode != 0 and b"cannot find -lcuda" in native.stderr, native.stderr[-2000:]
