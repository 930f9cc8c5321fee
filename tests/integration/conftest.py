"""Shared fixtures for integration tests: real builds, once per test session."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from release.config.checks import SUPPORTED_PYTHONS
from release.config.matrix import load
from release.errors import ToolchainError
from release.machine import images
from release.machine.containers import ContainerEngine
from release.machine.interpreters import interpreter, self_contained_home
from release.machine.lock import build_lock
from release.plan.resolve import LocalImage
from release.plan.steps import Plan, make_plan
from release.variants.resolution import uv_binary
from tests import ci_time

ROOT = Path(__file__).resolve().parents[2]
HOST_FLOOR = "manylinux_2_35_x86_64"  # what a Debian 12 host build can honestly claim (GLIBCXX_3.4.30)
PRESENT_PYTHONS = [v for v in SUPPORTED_PYTHONS if interpreter(v).usable]
"""The matrix's Pythons this machine has, with headers (on our machines: all of them)."""
HOST_PYTHONS = list(dict.fromkeys(PRESENT_PYTHONS[:1] + PRESENT_PYTHONS[-1:]))
"""The oldest and the newest present (3.10 and 3.14 on our machines; 3.11 alone on Debian 12)."""
OLDEST, NEWEST = (HOST_PYTHONS[0], HOST_PYTHONS[-1]) if HOST_PYTHONS else ("3.10", "3.14")
ONE_PYTHON = "3.12" if "3.12" in PRESENT_PYTHONS else NEWEST


def _own_c_library(version: str) -> bool:
    """Whether CPython `version` here runs with a C library of its own (scripts/python-debian.sh's
    3.14 carries Debian sid's glibc 2.43 in its lib/x86_64-linux-gnu)."""
    home = self_contained_home(version)
    return home is not None and any(home.glob("lib/*-linux-gnu/libc.so.6"))


HOST_HIP_PYTHONS = [v for v in HOST_PYTHONS if not _own_c_library(v)] or HOST_PYTHONS[:1]
"""The host Pythons that can load Debian 12's HIP 5.2: its libamdhip64.so.5 asks for an executable
stack, which glibc 2.41 and later refuse in dlopen ("cannot enable executable stack"), so a Python
with sid's glibc cannot load it (the images' HIP 7.2 does not ask; cp314 ROCm legs run there)."""
HOST_VARIANTS = ["cpu", "rocm"]


def tag(version: str) -> str:
    return "cp" + version.replace(".", "")


def _host_hip() -> str | None:
    header = Path("/usr/include/hip/hip_version.h")
    if not header.is_file():
        return None
    text = header.read_text(encoding="utf-8", errors="replace")
    found = dict(re.findall(r"#define\s+HIP_VERSION_(MAJOR|MINOR)\s+(\d+)", text))
    return f"{found['MAJOR']}.{found['MINOR']}" if {"MAJOR", "MINOR"} <= set(found) else None


HOST_HIP = _host_hip()


CONTAINER_FIXTURES = frozenset(
    {"local_images", "rocm_build_image", "standins", "container_wheels", "podman_socket"}
)
"""Fixtures that make local images or run podman: a test that uses one is marked `container`."""
CONTAINER_MODULES = frozenset({
    "test_build_image_compiler", "test_container", "test_local_images", "test_readme", "test_rehearse",
    "test_rehearse_failures", "test_rehearse_grace", "test_rehearse_hardware", "test_rehearse_second_build",
    "test_smoke_standin",
})  # fmt: skip
"""Files whose every test runs podman containers (directly or through the toolkit)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            names = set(getattr(item, "fixturenames", ()))
            if names & CONTAINER_FIXTURES or Path(str(item.fspath)).stem in CONTAINER_MODULES:
                item.add_marker(pytest.mark.container)


def toolkit(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 1800,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m release ARGS` as a user would; on failure show its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "release", *args],
        cwd=cwd or ROOT,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"python -m release {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def one_machine(data: dict[str, Any], machine: str = "x86_64") -> dict[str, Any]:
    """matrix.yaml's data for `machine` alone (a host build's floor is one machine's tag): no
    `architectures`, and no variant names a hardware tier of another machine (the Grace tiers)."""
    data["platform"].pop("architectures", None)
    data["platform"].pop("floors", None)
    tiers = data.get("hardware") or {}
    for variant in data.get("variants", {}).values():
        if "hardware" in variant:
            variant["hardware"] = [
                t for t in variant["hardware"] if tiers.get(t, {}).get("machine", "x86_64") == machine
            ]
    return data


def write_host_matrix(
    directory: Path,
    *,
    floor: str = HOST_FLOOR,
    pythons: list[str] | None = None,
    variants: list[str] | None = None,
) -> Path:
    """A copy of the real matrix that this host can meet, pointing at the real engine."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / data["engine"]["source"])
    data["platform"]["floor"] = floor
    one_machine(data)
    data["python"] = pythons or HOST_PYTHONS
    if "rocm" in data["variants"] and HOST_HIP:
        # The host's HIP (Debian 12: 5.2) is what a host build binds: declare it, as a maintainer
        # building locally against it would (the 6.4 release declaration stops a host build).
        data["variants"]["rocm"]["toolkit"] = HOST_HIP
        data["variants"]["rocm"].pop("build_image", None)
    for image in data.get("images", {}).values():
        # Host wheels bind the host's HIP 5.2: smoke them in simulations of the host's runtime,
        # not in the Debian containers that carry the declared ROCm's.
        image.pop("debian", None)

    keep = variants or HOST_VARIANTS
    data["variants"] = {k: v for k, v in data["variants"].items() if k in keep}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run_shared(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """`name` in the directory every process of this run shares (the xdist workers too, whose
    session fixtures each run once per worker): an artefact made there is made once per run."""
    worker = os.environ.get("PYTEST_XDIST_WORKER") is not None
    return ci_time.run_directory(tmp_path_factory.getbasetemp(), worker=worker) / name


@contextlib.contextmanager
def made_once(directory: Path, what: str) -> Iterator[bool]:
    """Hold `directory`'s lock while the block runs; yields whether the artefact must be made
    (False: another worker of this run made it, completely). The block marks it complete."""
    directory.mkdir(parents=True, exist_ok=True)
    with build_lock(directory, what=what, wait_s=3600, say=print, name=".made.lock"):
        complete = directory / ".complete"
        yield not complete.exists()
        complete.touch()


@pytest.fixture(scope="session")
def host_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(matrix, wheelhouse) with cpu and rocm wheels for the oldest and newest Python here, built
    once per run (under xdist, by the first worker that needs it; the others wait and share it)."""
    directory = run_shared(tmp_path_factory, "host-release")
    wheelhouse = directory / "wheelhouse"
    with made_once(directory, "the host wheelhouse") as make:
        matrix = write_host_matrix(directory) if make else directory / "matrix.yaml"
        for variant in HOST_VARIANTS if make else ():
            toolkit("--matrix", str(matrix), "build", "--variant", variant, "--wheelhouse", str(wheelhouse))
    yield matrix, wheelhouse


class LocalImages:
    """The local container images a test needs, made through the toolkit (`images.ensure`, the
    call `release build --container` and `release smoke` make) when absent, never skipped for
    being absent: a fresh machine has none. Each recipe is checked once per session."""

    def __init__(self, engine: ContainerEngine) -> None:
        self.engine = engine
        self.plan: Plan = make_plan(load(ROOT / "matrix.yaml"))
        """The real matrix, resolved: recipes come from it, so a change to matrix.yaml reaches the tests."""
        self._ready: set[LocalImage] = set()

    def smoke_recipe(self, name: str) -> LocalImage:
        """The local recipe of the matrix's serving image `name` (rocm-absent, rocm-distro, ...)."""
        for variant in self.plan.variants.values():
            for image in variant.images:
                if image.name == name and image.local is not None:
                    return image.local
        pytest.fail(f"matrix.yaml declares no image {name!r} with a `debian` recipe")

    def build_recipe(self, variant: str) -> LocalImage:
        """The local build image of `variant` (its `build_image.debian` recipe)."""
        recipe = self.plan.variant(variant).build_image.local_recipe
        if recipe is None:
            pytest.fail(f"matrix.yaml: variant {variant!r} declares no build_image.debian recipe")
        return recipe

    def matrix_recipes(self) -> list[LocalImage]:
        """Every local image the real matrix's release uses: build images, serving images, and the
        stand-ins for the registry serving images (the rehearsal's smoke runs them)."""
        variants = self.plan.variants.values()
        built = [v.build_image.local_recipe for v in variants if v.build_image.local_recipe is not None]
        served = [image.local for v in variants for image in v.images if image.local is not None]
        standins = [image.standin for v in variants for image in v.images if image.standin is not None]
        return list(dict.fromkeys([*built, *served, *standins]))

    def make_all(self, recipes: list[LocalImage], *, side_by_side: int = 3) -> list[str]:
        """`make` for each recipe, up to `side_by_side` at once (one maker per tag: a test elsewhere
        asking for one of them waits for it instead of making it again)."""
        with ThreadPoolExecutor(side_by_side) as pool:
            return list(pool.map(self.make, recipes))

    def make(self, recipe: LocalImage) -> str:
        """The image's tag, once it exists (made, or found up to date, this session)."""
        if recipe not in self._ready:
            if os.geteuid() != 0 and not images.exists(self.engine, recipe.tag):
                pytest.skip(f"{recipe.tag} is absent and making it needs root (debootstrap)")
            try:
                images.ensure(self.engine, recipe, log=print)
            except ToolchainError as exc:
                pytest.fail(str(exc))
            self._ready.add(recipe)
        return recipe.tag


@pytest.fixture(scope="session")
def local_images() -> LocalImages:
    """Local images of the real matrix, made on request and reused for the whole session."""
    engine = ContainerEngine.answering()
    if engine is None:
        pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)")
    return LocalImages(engine)


@pytest.fixture
def work(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Where a rehearsal's jobs run: outside root's private /tmp/pytest-of-root, so the unprivileged
    runner user gets in (`rehearse-<test module>-XXXX/work`, removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix=f"rehearse-{request.module.__name__.rsplit('.', 1)[-1]}-"))
    path.chmod(0o755)
    yield path / "work"
    shutil.rmtree(path, ignore_errors=True)


def fresh_venv(interpreter: Path | str, venv: Path) -> Path:
    """A fresh venv of `interpreter` with pip in it, as `python -m venv` leaves one, made by
    `uv venv --seed`: pip comes from uv's cache instead of ensurepip unpacking and compiling it
    (4 to 6 s of CPU a venv, dozens of venvs a run). Returns its python."""
    uv = uv_binary()
    assert uv, "uv is not installed (a dependency of the toolkit: bash scripts/bootstrap.sh)"
    subprocess.run(
        [uv, "venv", "--quiet", "--no-config", "--seed", "--python", str(interpreter), str(venv)],
        check=True, env={k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
    )  # fmt: skip
    return venv / "bin" / "python"


def write_wheel(path: Path, files: dict[str, str]) -> Path:
    """A hand-written wheel at `path` (no build backend, no process): `files` (the .dist-info's
    METADATA and WHEEL among them) plus the RECORD that lists each with its sha256."""
    info = next(name.split("/")[0] for name in files if name.endswith(".dist-info/WHEEL"))
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def processes_naming(text: str) -> list[int]:
    """Pids of the processes whose command line contains `text` (a test's private directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


# The toolkit-install fixtures, registered here once for every module that uses them (imported into
# each test module instead, a session fixture is set up once per importing module). Last: that
# module takes its helpers from this one.
from .toolkit_install import installed_toolkit, toolkit_wheel  # noqa: E402

__all__ = ["installed_toolkit", "toolkit_wheel"]
