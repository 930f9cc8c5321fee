"""The executable README: its set-up command and its test command, read from README.md, run in a
fresh Debian 12 container (debootstrap --variant=minbase, no python3, no git, no sudo) that holds a
copy of this working tree.

Inside, the test command runs with `RELEASE_TEST_TIER=unit` (documented in the README): the whole
suite in a container would take over an hour of CI's 90 minutes, while the set-up command runs
whole, the ROCm build included. The container stands for a newcomer's machine, not for CI: `CI`
is not passed in, so the Pythons Debian 12 lacks (3.10, 3.12, 3.13; uv and pyenv cannot download
here) are skipped and listed, and the build of 3.11 must pass.

The image is made once with scripts/make-image.sh and kept (its label records its inputs); apt's
and pip's downloads are kept between runs in RELEASE_README_CACHE (default
~/.cache/gpu-wheel-release/readme), so a rerun downloads almost nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.readme import readme_commands

from .conftest import ROOT

pytestmark = pytest.mark.integration

IMAGE = "localhost/gpu-wheel-release-readme:debian12"
SUITE = "bookworm"
TIER = "unit"
CACHE = Path(
    os.environ.get("RELEASE_README_CACHE", Path.home() / ".cache" / "gpu-wheel-release" / "readme")
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
    this network's TLS needs); make-image.sh keeps it while its inputs are unchanged."""
    script = ROOT / "scripts" / "make-image.sh"
    cmd = ["bash", str(script), "--tag", IMAGE, "--suite", SUITE, "--minbase-only"]
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=1800, check=False)
    assert proc.returncode == 0, log.read_text(encoding="utf-8")[-3000:]


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


def test_readme_commands_pass_on_a_fresh_debian_12(tmp_path: Path) -> None:
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
    log = tmp_path / "container.log"
    cmd = [
        "podman", "run", "--rm", "--network=host",
        "-v", f"{src}:/src",
        "-v", f"{apt_cache}:/var/cache/apt/archives",
        "-v", f"{pip_cache}:/root/.cache/pip",
        # pip in the image's venv trusts the system CA store, as pip on this host does (pip.conf)
        "-e", "PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
        IMAGE, "bash", "-c", container_script(commands),
    ]  # fmt: skip
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=3600, check=False)
    output = log.read_text(encoding="utf-8", errors="replace")
    tail = output[-6000:]
    print(f"image {image_seconds:.0f} s, container {time.monotonic() - started - image_seconds:.0f} s")
    assert proc.returncode == 0, tail
    assert "== set-up command passed" in output and "== test command passed" in output, tail
    # The main job built what this machine can (Debian 12: Python 3.11) and named what it skipped.
    # (its tag is what the host's glibc and libstdc++ allow, which the engine's code decides)
    wheels = sorted(p.name for p in (src / "wheelhouse" / "rocm").glob("*.whl"))
    assert len(wheels) == 1 and wheels[0].startswith("xfer_engine_rocm-0.1.0-cp311-cp311-manylinux_2_"), (
        wheels,
        tail,
    )
    assert "skipped Pythons (CI=true fails on them instead):" in output, tail
    assert "release toolchain install python 3.12" in output, tail
    assert " passed" in output.split("== test command:")[1], tail
