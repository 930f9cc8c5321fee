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

from release.builder import cibw
from release.config.backends import ToolkitProbe
from release.config.matrix import LoadedMatrix, load
from release.machine.toolchain import read_version, toolkit_mismatch
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
    return make_plan(loaded, variants=(name,), include_held_back=True).variant(name)


def _before_all(loaded: LoadedMatrix, name: str) -> str:
    steps = make_plan(loaded, variants=(name,), include_held_back=True).builds_of(name, "x86_64")
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
        if len(names) == 1:  # one number, by the data's place values: CUDART_VERSION 13000 is 13.0
            places = probe.version_places
            assert places, f"{variant.backend.name}: one version macro and no version_places"
            text = f"#define {names[0]} {int(major) * places[0] + int(minor) * places[1]}\n"
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
    for soname in variant.backend.driver_sonames:  # the driver's link stub, as NVIDIA's packages have it
        (lib / "stubs").mkdir(exist_ok=True)
        (lib / "stubs" / f"{soname.split('.so')[0]}.so").write_bytes(b"")
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
    from release.machine.toolchain import Toolchain

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
    plan = make_plan(loaded, variants=("musa",), include_held_back=True)
    passed = cibw.cibuildwheel_options(plan.builds_of("musa"))
    assert "MUSA_INSTALLER" in passed["environment-pass"].split(), "before-all runs in the container"


def test_a_script_given_a_file_instead_of_a_version_says_so(tmp_path: Path) -> None:
    for script in ("install-musa.sh", "install-rocm.sh", "install-cuda.sh"):
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / script), "/tmp/musa_toolkits.run"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 1, script
        assert "is not a toolkit version (expected MAJOR.MINOR" in proc.stderr, script


@pytest.mark.parametrize(
    ("version", "env", "message"),
    [
        ("12.8", {}, "NVIDIA's PyPI wheels carry the nvidia/cuMAJOR layout from CUDA 13 on"),
        ("13.9", {"PYTHON": "/nonexistent/python3"}, "--from-pypi needs a Python with pip"),
    ],
)
def test_cuda_from_pypi_refuses_what_it_cannot_do_in_one_line(
    version: str, env: dict[str, str], message: str
) -> None:
    """No CUDA of that version is installed (13.9 does not exist; 12.8 predates the wheels' layout):
    the PyPI path stops before downloading anything, naming why and what to do."""
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-cuda.sh"), version, "--from-pypi"],
        capture_output=True, text=True, check=False, timeout=60, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target=aarch64"], "--target=aarch64 needs --from-pypi and a whole toolkit"),
        (["--from-pypi", "--runtime-only", "--target=aarch64"], "needs --from-pypi and a whole toolkit"),
        (["--from-pypi", "--target=ppc64le"], "NVIDIA's CUDA wheels are for x86_64 and aarch64 only"),
        (
            ["--from-pypi", "--target=x86_64"],
            "--target=x86_64 is this machine: install CUDA 13.0 without --target",
        ),
    ],
)
def test_cuda_for_another_machine_refuses_what_it_cannot_do_in_one_line(
    args: list[str], message: str
) -> None:
    """--target=MACHINE adds another machine's runtime beside this machine's PyPI toolkit (cross builds)."""
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-cuda.sh"), "13.0", *args],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cuda_for_aarch64_is_nvidias_sbsa_target_beside_the_toolkit() -> None:
    """A dry run says where the aarch64 (sbsa) runtime goes, which compiler makes its driver stub and
    where the target's loader path is written (never this machine's ld.so.conf.d)."""
    env = {**os.environ, "INSTALL_DRY_RUN": "1"}
    env.pop("CC", None)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-cuda.sh"), "13.0", "--from-pypi", "--target=aarch64"],
        capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        "would download NVIDIA's nvidia-cuda-runtime==13.0.* for aarch64 into "
        "/usr/local/cuda-13.0/targets/sbsa-linux, "
        "make its driver stub with aarch64-linux-gnu-gcc and write "
        "/usr/aarch64-linux-gnu/etc/ld.so.conf.d/cuda-13-0-sbsa-linux.conf"
    ) in proc.stdout, proc.stdout


@pytest.mark.parametrize("version", ["6.11", "7.2"])
@pytest.mark.parametrize("runtime_only", [False, True])
def test_rocm_on_ubuntu_pins_amds_repository(tmp_path: Path, runtime_only: bool, version: str) -> None:
    """AMD's instructions: /etc/apt/preferences.d/rocm-pin-600, so AMD's packages win over Ubuntu's."""
    os_release = tmp_path / "os-release"
    os_release.write_text(UBUNTU)
    argv = ["bash", str(ROOT / "scripts" / "install-rocm.sh"), version]
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
        f"{signed}/rocm/apt/{version} noble main",
        f"{signed}/graphics/{version}/ubuntu noble main",
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


TRIXIE = 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nVERSION_ID="13"\nVERSION_CODENAME=trixie\nID=debian\n'
SID = 'PRETTY_NAME="Debian GNU/Linux forky/sid"\nVERSION_CODENAME=forky\nID=debian\n'
ALMALINUX = 'NAME="AlmaLinux"\nVERSION_ID="8.10"\nID="almalinux"\nID_LIKE="rhel centos fedora"\n'
MIRROR = "http://deb.example.org/debian"
BASE_PIN = "Package: libc6 libc-bin libc6-dev libc-dev-bin libstdc++6 libgcc-s1 libedit2"


def _dry_rocm(tmp_path: Path, os_release: str, *args: str) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "os-release"
    file.write_text(os_release)
    env = {**os.environ, "INSTALL_DRY_RUN": "1", "OS_RELEASE": str(file), "DEBIAN_MIRROR": MIRROR}
    env.pop("ROCM_PATH", None)
    argv = ["bash", str(ROOT / "scripts" / "install-rocm.sh"), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


def _installed(stdout: str) -> list[str]:
    lines = [line for line in stdout.splitlines() if line.startswith("dry-run: apt-get install")]
    assert len(lines) == 1, stdout
    return lines[0].split()[6:]


@pytest.mark.parametrize(
    ("version", "runtime_only", "packages"),
    [
        ("7.2", True, ["libamdhip64-7/experimental"]),
        ("10.0", True, ["libamdhip64-7/experimental"]),  # ROCm 10 ships HIP 7's soname
        ("7.2", False, [
            "libamdhip64-7/experimental", "libamdhip64-dev/experimental",
            "libhsa-runtime-dev/experimental", "hipcc/experimental",
        ]),
    ],
)  # fmt: skip
def test_rocm_7_on_debian_trixie_comes_from_experimental_pinned(
    tmp_path: Path, version: str, runtime_only: bool, packages: list[str]
) -> None:
    """Trixie's glibc (2.41) stays: its C library and compiler runtime are pinned above all
    (1001), sid and experimental low, and only the HIP packages are named from experimental."""
    proc = _dry_rocm(tmp_path, TRIXIE, version, *(["--runtime-only"] if runtime_only else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = _written_files(proc.stdout)
    assert files["/etc/apt/sources.list.d/rocm-debian.list"] == [
        f"deb [check-valid-until=no] {MIRROR} sid main",
        f"deb [check-valid-until=no] {MIRROR} experimental main",
    ]
    pin = files["/etc/apt/preferences.d/rocm-debian-pin"]
    stanzas = "\n".join(pin).split("\n\n")
    assert stanzas[0].splitlines()[1:] == [BASE_PIN, "Pin: release n=trixie", "Pin-Priority: 1001"]
    assert stanzas[1:] == [
        "Package: *\nPin: release n=sid\nPin-Priority: 100",
        "Package: *\nPin: release a=experimental\nPin-Priority: 1",
    ]
    assert _installed(proc.stdout) == ["-t", "experimental", *packages]
    lines = proc.stdout.splitlines()
    pinned = lines.index("dry-run: write /etc/apt/preferences.d/rocm-debian-pin")
    assert pinned < lines.index("dry-run: apt-get update -q"), "the pins are in place before apt reads"
    assert f"for ROCm {version} (libamdhip64.so.7)" in proc.stdout


def test_rocm_7_on_debian_sid_adds_only_experimental(tmp_path: Path) -> None:
    proc = _dry_rocm(tmp_path, SID, "7.2", "--runtime-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = _written_files(proc.stdout)
    assert files["/etc/apt/sources.list.d/rocm-debian.list"] == [
        f"deb [check-valid-until=no] {MIRROR} experimental main"
    ]
    pin = "\n".join(files["/etc/apt/preferences.d/rocm-debian-pin"])
    assert f"{BASE_PIN}\nPin: release n=sid\nPin-Priority: 1001" in pin
    assert "Pin-Priority: 100\n" not in pin + "\n", "sid is the base here: not pinned low"
    assert _installed(proc.stdout) == ["-t", "experimental", "libamdhip64-7/experimental"]


def test_rocm_6_on_debian_sid_is_the_distributions_own(tmp_path: Path) -> None:
    proc = _dry_rocm(tmp_path, SID, "6.4", "--runtime-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not _written_files(proc.stdout), "sid carries HIP 6.4: no other archive, no pin"
    assert _installed(proc.stdout) == ["libamdhip64-6"]


def test_rocm_major_the_table_lacks_is_one_line(tmp_path: Path) -> None:
    proc = _dry_rocm(tmp_path, TRIXIE, "11.0", "--runtime-only")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(
        "ROCm 11.0: the toolkit knows the HIP runtime of ROCm 5, 6, 7, 10 only "
        "(runtime_sonames in packaging/backends/rocm.json)"
    )


@pytest.mark.parametrize("runtime_only", [False, True])
def test_rocm_7_on_manylinux_2_28_dry_run(tmp_path: Path, runtime_only: bool) -> None:
    """Release CI's before-all on manylinux_2_28 (AlmaLinux 8): AMD's el8 repository for 7.2. No
    RHEL machine is at hand here, so this path is only ever a dry run."""
    proc = _dry_rocm(tmp_path, ALMALINUX, "7.2", *(["--runtime-only"] if runtime_only else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repo = _written_files(proc.stdout)["/etc/yum.repos.d/rocm.repo"]
    assert "baseurl=https://repo.radeon.com/rocm/el8/7.2/main" in repo
    assert "baseurl=https://repo.radeon.com/graphics/7.2/el/8.10/main/x86_64/" in repo
    package = "hip-runtime-amd" if runtime_only else "rocm-hip-runtime-devel"
    assert f"dry-run: dnf install -y {package}" in proc.stdout


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
    """This host has HIP 5.2 (libamdhip64.so.5); the matrix declares ROCm 7.2: on an Ubuntu runner
    with no container engine (the images are then simulated from this machine's runtime) the
    command installs AMD's 7.2 runtime package, pinned (a dry run shows what it would do)."""
    os_release = tmp_path / "os-release"
    os_release.write_text(UBUNTU)
    # no engine answers: podman is pointed at a socket nobody serves, and no docker daemon runs
    env = {
        **os.environ,
        "INSTALL_DRY_RUN": "1",
        "OS_RELEASE": str(os_release),
        "CONTAINER_HOST": f"unix://{tmp_path}/no-engine.sock",
        "DOCKER_HOST": f"unix://{tmp_path}/no.sock",
    }
    env.pop("ROCM_PATH", None)
    argv = [sys.executable, "-m", "release", "toolchain", "install", "--variant", "rocm", "--smoke-runtime"]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vllm-rocm" in proc.stdout and "lay out the AMD ROCm (HIP) runtime" in proc.stdout
    assert "install-rocm.sh 7.2 --runtime-only" in proc.stdout
    assert "https://repo.radeon.com/rocm/apt/7.2 noble main" in proc.stdout
    assert "Pin-Priority: 600" in proc.stdout
    assert "install -y -q --no-install-recommends hip-runtime-amd" in proc.stdout


def test_rocm_runtime_and_toolchain_install_for_real_in_the_runtime_absent_image(
    local_images: LocalImages,
) -> None:
    """In the matrix's `rocm-absent` image (a Debian without HIP; made here when absent): the
    runtime the declared toolkit binds, then the toolchain at the declared version, each checked
    after the install; a ROCm major the toolkit does not know is one clear line."""
    image = local_images.make(local_images.smoke_recipe("rocm-absent"))
    variant = local_images.plan.variant("rocm")
    version, soname = variant.toolkit, variant.runtime_sonames[0]
    assert version is not None
    script = (
        "set -u; s=/scripts/install-rocm.sh\n"
        f"bash $s {version} --runtime-only; echo rc=$?\n"
        f"bash $s {version} --runtime-only; echo rc=$?\n"
        f"bash $s {version}; echo rc=$?\n"
        f"bash $s {version}; echo rc=$?\n"
        "bash $s 11.0 --runtime-only; echo rc=$?\n"
    )
    mount = f"{ROOT / 'scripts'}:/scripts:ro"
    podman = local_images.engine.command
    argv = [podman, "run", "--rm", "--network=host", "-v", mount, image, "bash", "-c", script]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    out = proc.stdout + proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("rc=")] == [
        "rc=0", "rc=0", "rc=0", "rc=0", "rc=1",
    ], out  # fmt: skip
    assert f"done: /usr/lib/x86_64-linux-gnu/{soname}" in out
    assert re.search(rf"the HIP runtime {re.escape(soname)} \(ROCm [^)]*\) is already installed", out), out
    assert re.search(rf"done: HIP {re.escape(version)}\.\d+ under /usr", out), out
    hipcc = "hipcc /usr/bin/hipcc"
    again = rf"HIP {re.escape(version)}\.\d+ already installed under /usr, {hipcc}: nothing to do\n"
    assert re.search(again, out), out
    # No hipcc can come with Debian's HIP 7.2: the toolkit's host-only one is installed once, then found.
    assert out.count("the toolkit's host-only hipcc (host code, no kernels) at /usr/bin/hipcc") == 1, out
    assert "the toolkit knows the HIP runtime of ROCm 5, 6, 7, 10 only" in out


def test_rocm_7_runtime_installs_for_real_on_debian_trixie(local_images: LocalImages) -> None:
    """`release toolchain install rocm 7.2 --runtime-only` runs this script: in a trixie container
    it installs experimental's libamdhip64.so.7 while libc6 stays trixie's 2.41; ROCm 10.0 then
    finds the runtime it binds (the same soname) already there; then the 7.2 headers."""
    # The matrix's runtime-absent serving image: Debian trixie (glibc 2.41) and its interpreters,
    # no ROCm (made for smoke anyway; a bare trixie of our own was the recipe test_local_images
    # makes, and found made here, its maker was a tag, not the make that test asserts).
    image = local_images.make(local_images.smoke_recipe("rocm-absent"))
    script = (
        "set -u; s=/scripts/install-rocm.sh\n"
        "bash $s 7.2 --runtime-only; echo rc=$?\n"
        "bash $s 10.0 --runtime-only; echo rc=$?\n"
        "bash $s 7.2; echo rc=$?\n"
        "echo libc6=$(dpkg-query -W -f '${Version}' libc6)\n"
        "echo hip=$(dpkg-query -W -f '${Version}' libamdhip64-7)\n"
        "ldconfig -p | grep -o 'libamdhip64.so.7 ' | sed 's/^/loader: /'\n"
    )
    mount = f"{ROOT / 'scripts'}:/scripts:ro"
    podman = local_images.engine.command
    argv = [podman, "run", "--rm", "--network=host", "-v", mount, image, "bash", "-c", script]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    out = proc.stdout + proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("rc=")] == ["rc=0"] * 3, out
    assert "done: /usr/lib/x86_64-linux-gnu/libamdhip64.so.7" in out
    assert "the HIP runtime libamdhip64.so.7 (ROCm 7.x or 10.x) is already installed" in out
    assert re.search(r"^libc6=2\.41-", proc.stdout, re.M), out
    assert re.search(r"^hip=7\.2\.", proc.stdout, re.M), out
    assert "loader: libamdhip64.so.7 " in proc.stdout, out
    # The headers too (experimental's hipcc needs GCC 16's libstdc++: left out, trixie's stays).
    assert re.search(r"done: HIP 7\.2\.\d+ under /usr", out), out
    assert "hipcc left out" in out
    assert "the toolkit's host-only hipcc (host code, no kernels) at /usr/bin/hipcc" in out


HOST_CUDA_INCLUDE = Path("/usr/local/cuda-13.0/include")


@pytest.mark.skipif(
    not (HOST_CUDA_INCLUDE / "cuda.h").is_file(), reason="no CUDA 13.0 headers (.ci/run installs them)"
)
def test_a_toolkit_without_the_driver_stub_gets_one_made_from_its_cuda_h(tmp_path: Path) -> None:
    """NVIDIA's PyPI wheels ship no stubs/libcuda.so: install-cuda.sh makes the link stub from the
    toolkit's own cuda.h (SONAME libcuda.so.1, every driver API name), only under stubs/."""
    from release.inspect.elf import inspect_elf

    prefix = tmp_path / "cuda-13.0"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (prefix / "bin" / "nvcc").chmod(0o755)
    (prefix / "include").mkdir()
    for header in ("cuda.h", "cuda_runtime_api.h"):
        (prefix / "include" / header).write_bytes((HOST_CUDA_INCLUDE / header).read_bytes())
    (prefix / "lib").mkdir()
    (prefix / "lib64").symlink_to("lib")  # the PyPI layout install-cuda.sh --from-pypi makes
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "INSTALL_DRY_RUN")}
    env["CUDA_HOME"] = str(prefix)
    proc = _bash("bash scripts/install-cuda.sh 13.0", env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "without the driver's link stub" in proc.stdout
    made = r"made the driver's link stub .*/lib64/stubs/libcuda\.so \(\d{3} driver API functions"
    assert re.search(made, proc.stdout), proc.stdout
    stubs = prefix / "lib" / "stubs"
    assert sorted(p.name for p in stubs.iterdir()) == ["libcuda.so"], "no libcuda.so.1 a loader could pick"
    elf = inspect_elf("libcuda.so", (stubs / "libcuda.so").read_bytes())
    assert elf.soname == "libcuda.so.1"
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(stubs / "libcuda.so")], capture_output=True, text=True, check=True
    ).stdout.split()
    for name in ("cuDriverGetVersion", "cuPointerGetAttribute", "cuMemGetAddressRange_v2", "cuMemCreate"):
        assert name in symbols, name
    again = _bash("bash scripts/install-cuda.sh 13.0", env)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr
