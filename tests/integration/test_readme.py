"""The executable README: its set-up command and its test command, read from README.md, run in a
fresh Debian 12 container (debootstrap --variant=minbase, no python3, no git, no sudo) that holds a
copy of this working tree.

The container has no container engine of its own: it reaches this host's podman through its API
socket (`podman system service`, CONTAINER_HOST), as a maintainer's machine reaches its engine. Its
Debian 12 has HIP 5.2, not the declared 7.2, so the set-up command's `nox -s build_rocm` builds in
the local ROCm image. This machine makes that image first (a fixture, from matrix.yaml's recipe,
with this machine's interpreters); the container, whose only CPython is Debian's 3.11 (nothing it
could copy into an image), uses it as it is.

Inside, the test command runs with `RELEASE_TEST_TIER=unit` (documented in the README): the whole
suite in a container would take over an hour of CI's 90 minutes, while the set-up command runs
whole, the ROCm build included. The container stands for a newcomer's machine, not for CI: `CI`
is not passed in, so the Pythons Debian 12 lacks (3.10, 3.12, 3.13; uv and pyenv cannot download
here) are skipped and listed, and the build of 3.11 must pass.

Under .ci/run the set-up phase has just run the same `nox -s build_rocm` on this machine: its
wheels and their up-to-date stamps are copied into the checkout, and the container's build takes
each one only after checking every input it was built from (the same check `release build` makes
for a second container build); anything that differs is compiled in the container, and outside
.ci/run everything is.

The image is made once with scripts/make-image.sh and kept (its label records its inputs); apt's
and pip's downloads are kept between runs in RELEASE_README_CACHE (default
~/.cache/gpu-wheel-release/readme), so a rerun downloads almost nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from release import settings
from release.builder.prebuild import source_date_epoch
from release.machine import imaging
from release.machine.containers import ContainerEngine
from release.machine.recipe import Recipe
from tests.readme import readme_commands

from .conftest import ROOT, LocalImages

pytestmark = pytest.mark.integration

IMAGE = "localhost/gpu-wheel-release-readme:debian12"
SUITE = "bookworm"
TIER = "unit"
CACHE = Path(
    settings.path("RELEASE_README_CACHE") or Path.home() / ".cache" / "gpu-wheel-release" / "readme"
)


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the executable README needs root (rootful podman, debootstrap)"
    fixes = {"podman": "bash scripts/setup-podman.sh", "debootstrap": "apt-get install debootstrap"}
    for tool, fix in fixes.items():
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({fix})"
    info = subprocess.run(["podman", "info"], capture_output=True, text=True, timeout=120, check=False)
    if info.returncode != 0:
        last = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"podman does not run here ({last}): bash scripts/setup-podman.sh"
    return None


def make_image(log: Path) -> None:
    """A fresh Debian 12: minbase plus ca-certificates (with this host's CA certificates, which
    this network's TLS needs); the toolkit's image maker keeps it while its inputs are unchanged."""
    with log.open("w", encoding="utf-8") as out:
        podman = ContainerEngine("podman")
        imaging.make(podman, Recipe(tag=IMAGE, suite=SUITE), log=lambda line: print(line, file=out))


@pytest.fixture(scope="session")
def rocm_build_image(local_images: LocalImages) -> str:
    """The rocm variant's local build image, made here when absent (or when its recipe changed):
    under .ci/run the set-up phase made it, and this finds it up to date by its label."""
    return local_images.make(local_images.build_recipe("rocm"))


@pytest.fixture
def podman_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This host's podman API on a socket of its own, for the README container to reach."""
    socket = tmp_path_factory.mktemp("podman-api") / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not socket.exists():
            assert service.poll() is None, "podman system service exited"
            assert time.monotonic() < deadline, "podman system service made no socket within 60 s"
            time.sleep(0.2)
        yield socket
    finally:
        service.terminate()
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()


def working_tree_copy(dest: Path) -> Path:
    """What a checkout holds: tracked and untracked files git does not ignore (no .venv, no build
    output, no .git: an unpacked archive)."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def seed_from_setup_phase(apt_cache: Path) -> Path | None:
    """Under .ci/run (RELEASE_CI_SETUP_RAN, exported after the README's set-up command ran on this
    machine) the container's downloads come from what that phase just downloaded: the .deb files
    in /var/cache/apt/archives are copied into its apt archive (apt takes one only when its
    checksum matches the suite's index, else downloads it) and this machine's pip cache serves
    its pip (pip checks each file's hash). Every command still runs whole, as written; only the
    network fetches the set-up phase already made are skipped. Returns the pip cache to mount."""
    if not settings.switch("RELEASE_CI_SETUP_RAN"):
        return None
    for deb in Path("/var/cache/apt/archives").glob("*.deb"):
        if not (apt_cache / deb.name).exists():
            try:
                os.link(deb, apt_cache / deb.name)  # gigabytes: a link where one file system holds both
            except OSError:
                shutil.copy2(deb, apt_cache / deb.name)
    host_pip = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
    return host_pip if host_pip.is_dir() else None


def seed_wheels_from_setup_phase(src: Path) -> tuple[dict[str, str], set[str]]:
    """Under .ci/run the set-up phase's `nox -s build_rocm` has just built the rocm wheels on this
    machine, in the same local image from the same sources: its wheels and their up-to-date stamps
    (build/rocm/stamps, which name each wheel relative to the checkout) go into the copy, and the
    container builds with the commit's SOURCE_DATE_EPOCH, the one the set-up phase built with (the
    copy has no .git to read it from). The build in the container then takes each wheel only if
    its every input is unchanged (`release.builder.container.container_keys`: the project's files,
    the image's ID, cibuildwheel and its settings, the timestamp); any difference compiles it
    there. Returns the environment to pass in and the Pythons (cp311, ...) whose wheels were seeded
    (none outside .ci/run: everything is built)."""
    if not settings.switch("RELEASE_CI_SETUP_RAN"):
        return {}, set()
    # The stamps of wheels in the checkout's own wheelhouse (a build into another directory, such as
    # a test's, names an absolute path the container cannot see).
    stamps = [
        p for p in sorted((ROOT / "build" / "rocm" / "stamps").glob("container-*.json"))
        if not Path(json.loads(p.read_text(encoding="utf-8")).get("wheel", "/")).is_absolute()
    ]  # fmt: skip
    built = sorted((ROOT / "wheelhouse" / "rocm").glob("*.whl*"))  # the wheels and their reports
    for files, directory in ((stamps, "build/rocm/stamps"), (built, "wheelhouse/rocm")):
        (src / directory).mkdir(parents=True, exist_ok=True)
        for source in files:
            shutil.copy2(source, src / directory / source.name)
    seeded = {p.name.split("-")[1] for p in stamps}  # container-cp311-rocm-manylinux_x86_64.json
    return ({"SOURCE_DATE_EPOCH": source_date_epoch(ROOT)} if stamps else {}), seeded


def container_script(commands: dict[str, str]) -> str:
    return "\n".join(
        [
            "set -euo pipefail",
            "cd /src",
            "for tool in python3 git sudo gcc; do ! command -v $tool > /dev/null || "
            '{ echo "not a fresh machine: $tool is installed"; exit 90; }; done',
            f'echo "== set-up command: {commands["setup"]}"',
            # `a && b` under `set -e` does not stop the script when `a` fails: test the status
            f'{{ {commands["setup"]}; }} || {{ echo "== set-up command failed ($?)"; exit 91; }}',
            'echo "== set-up command passed"',
            f'echo "== test command: RELEASE_TEST_TIER={TIER} {commands["test"]}"',
            f"export RELEASE_TEST_TIER={TIER}",
            f'{{ {commands["test"]}; }} || {{ echo "== test command failed ($?)"; exit 92; }}',
            'echo "== test command passed"',
        ]
    )


@pytest.mark.slow
def test_readme_commands_pass_on_a_fresh_debian_12(
    tmp_path: Path, rocm_build_image: str, podman_socket: Path
) -> None:
    why = _why_not()
    if why:
        pytest.skip(why)
    commands = readme_commands()
    started = time.monotonic()
    make_image(tmp_path / "image.log")
    image_seconds = time.monotonic() - started
    src = working_tree_copy(tmp_path / "src")
    apt_cache, pip_cache = CACHE / "apt-archives", CACHE / "pip"
    for directory in (apt_cache / "partial", pip_cache):
        directory.mkdir(parents=True, exist_ok=True)
    seeded = seed_from_setup_phase(apt_cache)
    if seeded:
        pip_cache = seeded
    epoch, seeded_pythons = seed_wheels_from_setup_phase(src)
    log = tmp_path / "container.log"
    cmd = [
        "podman", "run", "--rm", "--network=host",
        "-v", f"{src}:/src",
        "-v", f"{apt_cache}:/var/cache/apt/archives",
        "-v", f"{pip_cache}:/root/.cache/pip",
        # no engine of its own: this host's podman, through its API socket
        "-v", f"{podman_socket}:/run/podman/podman.sock",
        "-e", "CONTAINER_HOST=unix:///run/podman/podman.sock",
        # pip in the image's venv trusts the system CA store, as pip on this host does (pip.conf)
        "-e", "PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
        *[part for key, value in epoch.items() for part in ("-e", f"{key}={value}")],
        IMAGE, "bash", "-c", container_script(commands),
    ]  # fmt: skip
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=3600, check=False)
    output = log.read_text(encoding="utf-8", errors="replace")
    tail = output[-6000:]
    print(f"image {image_seconds:.0f} s, container {time.monotonic() - started - image_seconds:.0f} s")
    assert proc.returncode == 0, tail
    assert "== set-up command passed" in output and "== test command passed" in output, tail
    # The main job built the declared toolkit's wheels in the local ROCm image (the host's HIP 5.2
    # is not the declared 7.2), through the host's engine: at least cp311, each bound to the
    # declared runtime (libamdhip64.so.7) and verified; the summary names the image.
    assert f"building in the declared toolkit's local image {rocm_build_image}" in output, tail
    assert "used as it is (this machine has no self-contained CPython" in output, tail
    wheels = sorted((src / "wheelhouse" / "rocm").glob("*.whl"))
    assert any(w.name.startswith("xfer_engine_rocm-0.1.0-cp311-cp311-manylinux_2_") for w in wheels), tail
    for wheel in wheels:
        report = json.loads(Path(f"{wheel}.verify.json").read_text(encoding="utf-8"))
        assert report["runtime_bound"] == ["libamdhip64.so.7"], (wheel.name, report["runtime_bound"])
        failed = {r["id"] for r in report["rules"] if r["status"] == "fail"}
        assert not failed, (wheel.name, failed)
    assert any(rocm_build_image in line for line in output.splitlines() if "xfer_engine_rocm-" in line), tail
    # Seeded (.ci/run): each wheel was the set-up phase's, taken up to date after the inputs check
    # in the container; else compiled there.
    taken = re.findall(r"^(cp3\d+)-rocm-\S+: up to date, nothing changed since its build in", output, re.M)
    assert set(taken) == seeded_pythons, (taken, seeded_pythons, tail)
    compiled = {w.name.split("-")[2] for w in wheels} - seeded_pythons
    assert ("cibuildwheel in" in output) == bool(compiled), (compiled, tail)
    assert " passed" in output.split("== test command:")[1], tail
