"""The toolchain install scripts as cibuildwheel's before-all runs them: the exact command
`release cibuildwheel-config` generates, in bash, against fake toolkit prefixes whose version
matches or not; the scripts' reading of a version must agree with the toolkit's own.

Nothing is installed: a mismatch runs with INSTALL_DRY_RUN=1, which prints the commands and the
files an install would write (AMD's apt pin file among them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from release.build import cibw
from release.build.toolchain import read_version, toolkit_mismatch
from release.config.backends import ToolkitProbe
from release.config.matrix import LoadedMatrix, load
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan

from .conftest import ROOT, LocalImages

pytestmark = pytest.mark.integration

UBUNTU = "ID=ubuntu\nID_LIKE=debian\nVERSION_ID=24.04\nVERSION_CODENAME=noble\n"
GPU_VARIANTS = ["rocm", "cuda", "musa"]


def _matrix(tmp_path: Path, bump_minor: int = 0) -> LoadedMatrix:
    """The repository's matrix; `bump_minor` raises every declared toolkit's minor (a version no
    machine has installed, so a mismatch cannot be rescued by a real install on the host)."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    for variant in data["variants"].values():
        if bump_minor and variant.get("toolkit"):
            major, minor = variant["toolkit"].split(".")[:2]
            variant["toolkit"] = f"{major}.{int(minor) + bump_minor}"
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load(path)


def _variant(loaded: LoadedMatrix, name: str) -> ResolvedVariant:
    return make_plan(loaded, variants=(name,)).variant(name)


def _before_all(loaded: LoadedMatrix, name: str) -> str:
    steps = make_plan(loaded, variants=(name,)).builds_of(name)
    return cibw.cibuildwheel_options(steps)["before-all"]


def _forms(probe: ToolkitProbe) -> list[str]:
    return [*probe.version_files, "header"]


def _fake_toolkit(prefix: Path, variant: ResolvedVariant, version: str, form: str) -> Path:
    """A toolkit prefix as the backend's probe knows it, its version spelled in one `form`."""
    probe = variant.backend.toolkit
    assert probe is not None
    marker = prefix / probe.marker
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("#!/bin/sh\n")
    marker.chmod(0o755)
    header = prefix / (probe.version_header or "include/version.h")
    header.parent.mkdir(parents=True, exist_ok=True)
    major, minor = version.split(".")[:2]
    if form == "header":
        assert probe.version_define
        names = probe.version_define.split(",")
        if len(names) == 1:  # CUDART_VERSION 13000 is 13.0
            text = f"#define {names[0]} {int(major) * 1000 + int(minor) * 10}\n"
        else:
            text = "".join(f"#define {n} {v}\n" for n, v in zip(names, (major, minor, "3"), strict=False))
        header.write_text(header.read_text() + text if header.exists() else text)
    else:
        if not header.exists():
            header.write_text("/* no version here */\n")
        file = prefix / form
        file.parent.mkdir(parents=True, exist_ok=True)
        json_body = f'{{"cuda": {{"name": "SDK", "version": "{version}.1"}}}}'
        file.write_text(json_body if form.endswith(".json") else f"{version}.1\n")
    lib = prefix / "lib"
    lib.mkdir(exist_ok=True)
    for soname in variant.runtime_sonames:
        (lib / soname).write_bytes(b"")
    return prefix


def _run(
    command: str, prefix: Path, variant: ResolvedVariant, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    probe = variant.backend.toolkit
    assert probe is not None
    os_release = tmp_path / "os-release"
    os_release.write_text(UBUNTU)
    env = {k: v for k, v in os.environ.items() if k not in probe.env and not k.endswith("_INSTALLER")}
    env.update({probe.env[0]: str(prefix), "INSTALL_DRY_RUN": "1", "OS_RELEASE": str(os_release)})
    return _bash(command, env)


def _bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = ["bash", "-c", command]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def _cases() -> list[tuple[str, str]]:
    loaded = load(ROOT / "matrix.yaml")
    return [
        (name, form)
        for name in GPU_VARIANTS
        for form in _forms(loaded.backends[loaded.variant(name).backend].toolkit)  # type: ignore[union-attr]
    ]


@pytest.mark.parametrize(("name", "form"), _cases())
def test_before_all_accepts_a_matching_install(name: str, form: str, tmp_path: Path) -> None:
    loaded = _matrix(tmp_path)
    variant = _variant(loaded, name)
    assert variant.toolkit
    prefix = _fake_toolkit(tmp_path / "toolkit", variant, variant.toolkit, form)
    probe = variant.backend.toolkit
    assert probe is not None
    found = read_version(prefix, probe)
    assert found is not None and found.startswith(variant.toolkit), "the toolkit's own reading"
    command = _before_all(loaded, name)
    assert command.endswith(f" {variant.toolkit}")
    proc = _run(command, prefix, variant, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing to do" in proc.stdout
    assert str(prefix) in proc.stdout
    assert "dry-run" not in proc.stdout


@pytest.mark.parametrize(("name", "form"), _cases())
def test_before_all_refuses_or_replaces_another_version(name: str, form: str, tmp_path: Path) -> None:
    loaded = _matrix(tmp_path, bump_minor=7)
    variant = _variant(loaded, name)
    assert variant.toolkit
    installed = ".".join([variant.toolkit.split(".")[0], str(int(variant.toolkit.split(".")[1]) - 7)])
    prefix = _fake_toolkit(tmp_path / "toolkit", variant, installed, form)
    probe = variant.backend.toolkit
    assert probe is not None
    from release.build.toolchain import Toolchain

    toolchain = Toolchain(variant.backend_name, prefix, read_version(prefix, probe), "test")
    assert toolkit_mismatch(
        backend=name, declared=variant.toolkit, source="test", toolchain=toolchain, hint=""
    ), "the toolkit itself calls this a mismatch"
    proc = _run(_before_all(loaded, name), prefix, variant, tmp_path)
    output = proc.stdout + proc.stderr
    assert "nothing to do" not in output
    if name == "musa":
        # No public repository: without an installer the script stops, naming what to provide.
        assert proc.returncode == 1, output
        assert f"is installed at {prefix}, but the matrix declares {variant.toolkit}" in proc.stderr
        assert "MUSA_INSTALLER" in proc.stderr and "MUSA_HOME" in proc.stderr
    else:
        assert proc.returncode == 0, output
        assert f"but the matrix declares {variant.toolkit}: installing {variant.toolkit} beside it" in output
        assert "dry-run: apt-get install" in proc.stdout


def test_musa_without_any_install_or_installer_names_what_to_provide(tmp_path: Path) -> None:
    loaded = _matrix(tmp_path)
    variant = _variant(loaded, "musa")
    proc = _run(_before_all(loaded, "musa"), tmp_path / "nowhere", variant, tmp_path)
    assert proc.returncode == 1
    assert "installer 4.0 does not exist" not in proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line
    assert "set MUSA_INSTALLER to the MUSA Toolkit 4.0 installer" in line
    assert "https://developer.mthreads.com" in line


def test_musa_installs_from_the_installer_it_is_given(tmp_path: Path) -> None:
    loaded = _matrix(tmp_path)
    installer = tmp_path / "musa_toolkits_4.0.0.run"
    installer.write_text("#!/bin/sh\n")
    env_installer = {"MUSA_INSTALLER": str(installer)}
    command = _before_all(loaded, "musa")
    os_release = tmp_path / "os-release"
    os_release.write_text(UBUNTU)
    env = {**os.environ, **env_installer, "INSTALL_DRY_RUN": "1", "OS_RELEASE": str(os_release)}
    env.pop("MUSA_HOME", None)
    proc = _bash(command, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"dry-run: bash {installer} --silent --toolkit --prefix=/usr/local/musa" in proc.stdout
    passed = cibw.cibuildwheel_options(make_plan(loaded, variants=("musa",)).builds_of("musa"))
    assert "MUSA_INSTALLER" in passed["environment-pass"].split(), "before-all runs in the container"


def test_a_script_given_a_file_instead_of_a_version_says_so(tmp_path: Path) -> None:
    for script in ("install-musa.sh", "install-rocm.sh", "install-cuda.sh"):
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / script), "/tmp/musa_toolkits.run"],
            capture_output=True, text=True, check=False,
        )
        assert proc.returncode == 1, script
        assert "is not a toolkit version (expected MAJOR.MINOR" in proc.stderr, script


@pytest.mark.parametrize("runtime_only", [False, True])
def test_rocm_on_ubuntu_pins_amds_repository(tmp_path: Path, runtime_only: bool) -> None:
    """AMD's instructions: /etc/apt/preferences.d/rocm-pin-600, so AMD's packages win over Ubuntu's."""
    os_release = tmp_path / "os-release"
    os_release.write_text(UBUNTU)
    argv = ["bash", str(ROOT / "scripts" / "install-rocm.sh"), "6.11"]
    argv += ["--runtime-only"] if runtime_only else []
    env = {**os.environ, "INSTALL_DRY_RUN": "1", "OS_RELEASE": str(os_release)}
    env.pop("ROCM_PATH", None)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    files = _written_files(proc.stdout)
    assert files["/etc/apt/preferences.d/rocm-pin-600"] == [
        "Package: *",
        "Pin: release o=repo.radeon.com",
        "Pin-Priority: 600",
    ]
    signed = "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] https://repo.radeon.com"
    assert files["/etc/apt/sources.list.d/rocm.list"] == [
        f"{signed}/rocm/apt/6.11 noble main",
        f"{signed}/graphics/6.11/ubuntu noble main",
    ]
    lines = proc.stdout.splitlines()
    pinned = lines.index("dry-run: write /etc/apt/preferences.d/rocm-pin-600")
    install = max(i for i, line in enumerate(lines) if line.startswith("dry-run: apt-get install"))
    assert pinned < install, "the pin must be in place before apt installs from AMD's repository"
    package = "hip-runtime-amd" if runtime_only else "rocm-hip-runtime-dev"
    assert lines[install].endswith(f" {package}")
    # AMD's post-install step, so the loader (and the image simulations) find the runtime.
    assert files["/etc/ld.so.conf.d/rocm.conf"] == ["/opt/rocm/lib", "/opt/rocm/lib64"]
    assert lines.index("dry-run: ldconfig") > install


def _written_files(stdout: str) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("dry-run: write "):
            current = files.setdefault(line.removeprefix("dry-run: write "), [])
        elif line.startswith("  | ") and current is not None:
            current.append(line[4:])
        else:
            current = None
    return files


# -- free-disk ------------------------------------------------------------------------------------


def _free_disk(tmp_path: Path, *flags: str, ci: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "INSTALL_DRY_RUN")}
    if ci:
        env["GITHUB_ACTIONS"] = "true"
    env["FREE_DISK_PATHS"] = f"{tmp_path}/sdk/dotnet {tmp_path}/sdk/android* {tmp_path}/sdk/absent"
    argv = [sys.executable, "-m", "release", "toolchain", "free-disk", *flags]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def _sdks(tmp_path: Path) -> list[Path]:
    made = [tmp_path / "sdk" / "dotnet", tmp_path / "sdk" / "android-34", tmp_path / "sdk" / "keep"]
    for directory in made:
        directory.mkdir(parents=True)
        (directory / "blob").write_bytes(b"\0" * 65536)
    return made


def test_free_disk_removes_the_listed_sdks_and_prints_the_space(tmp_path: Path) -> None:
    dotnet, android, keep = _sdks(tmp_path)
    proc = _free_disk(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not dotnet.exists() and not android.exists()
    assert keep.exists()
    before = [line for line in proc.stdout.splitlines() if "] before: " in line]
    after = [line for line in proc.stdout.splitlines() if "] after:  " in line]
    assert len(before) == len(after) == 1
    assert re.search(r"\d+\.\d GiB free of \d+\.\d GiB on /", after[0])
    assert f"removing {android} (" in proc.stdout


def test_free_disk_dry_run_and_outside_ci(tmp_path: Path) -> None:
    dotnet, android, _ = _sdks(tmp_path)
    dry = _free_disk(tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"dry-run: rm -rf {dotnet}" in dry.stdout
    assert dotnet.exists() and android.exists()
    refused = _free_disk(tmp_path, ci=False)
    assert refused.returncode == 4
    assert "this is not a CI runner" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert dotnet.exists()


def test_a_smoke_runner_gets_the_declared_rocm_runtime(tmp_path: Path) -> None:
    """This host has HIP 5.2 (libamdhip64.so.5); the matrix declares ROCm 6.4: on an Ubuntu runner
    the command installs AMD's 6.4 runtime package, pinned (a dry run shows what it would do)."""
    os_release = tmp_path / "os-release"
    os_release.write_text(UBUNTU)
    env = {**os.environ, "INSTALL_DRY_RUN": "1", "OS_RELEASE": str(os_release)}
    env.pop("ROCM_PATH", None)
    argv = [sys.executable, "-m", "release", "toolchain", "install", "--variant", "rocm", "--smoke-runtime"]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vllm-rocm" in proc.stdout and "lay out the AMD ROCm (HIP) runtime" in proc.stdout
    assert "install-rocm.sh 6.4 --runtime-only" in proc.stdout
    assert "https://repo.radeon.com/rocm/apt/6.4 noble main" in proc.stdout
    assert "Pin-Priority: 600" in proc.stdout
    assert "install -y -q --no-install-recommends hip-runtime-amd" in proc.stdout


def test_rocm_runtime_and_toolchain_install_for_real_in_the_runtime_absent_image(
    local_images: LocalImages,
) -> None:
    """In the matrix's `rocm-absent` image (a Debian without HIP; made here when absent): the
    runtime of the declared major, then the toolchain at the declared version (Debian's HIP 6.4
    today), each checked after the install; a major the archive lacks is one clear line."""
    image = local_images.make(local_images.smoke_recipe("rocm-absent"))
    version = local_images.plan.variant("rocm").toolkit
    assert version is not None
    major = version.split(".")[0]
    lacking = str(int(major) + 1)
    script = (
        "set -u; s=/scripts/install-rocm.sh\n"
        f"bash $s {version} --runtime-only; echo rc=$?\n"
        f"bash $s {version} --runtime-only; echo rc=$?\n"
        f"bash $s {version}; echo rc=$?\n"
        f"bash $s {version}; echo rc=$?\n"
        f"bash $s {lacking}.0 --runtime-only; echo rc=$?\n"
    )
    mount = f"{ROOT / 'scripts'}:/scripts:ro"
    argv = [local_images.engine, "run", "--rm", "--network=host", "-v", mount, image, "bash", "-c", script]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    out = proc.stdout + proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("rc=")] == [
        "rc=0", "rc=0", "rc=0", "rc=0", "rc=1",
    ], out  # fmt: skip
    assert f"done: /usr/lib/x86_64-linux-gnu/libamdhip64.so.{major}" in out
    assert f"the HIP runtime of ROCm {major} is already installed" in out
    assert re.search(rf"done: HIP {re.escape(version)}\.\d+ under /usr", out), out
    assert re.search(rf"HIP {re.escape(version)}\.\d+ already installed under /usr: nothing to do", out), out
    assert f"apt could not install libamdhip64-{lacking} from this distribution's archive" in out
