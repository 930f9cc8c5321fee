"""The release path for real: cibuildwheel under podman in a local build image (Debian trixie with
experimental's HIP 7.2), the wheels bound to the ROCm they declare, and a pulled serving image in a
real container. The smoke legs in each local image's layout run in the real-matrix rehearsal
(tests/integration/test_rehearse.py), which asserts where each loaded the runtime from.

Needs podman (`.ci/run` installs and configures it with scripts/setup-podman.sh). The images are
made from Debian packages when absent and cached in podman's store between runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from release import settings
from release.builder.container import container_keys
from release.config.matrix import load
from release.config.pythons import python
from release.inspect.elf import inspect_elf, is_elf
from release.machine.containers import ContainerEngine
from release.plan.steps import make_plan
from release.settings import in_ci
from tests.integration.conftest import ROOT, LocalImages, toolkit

PYTHONS = tuple(python(v) for v in load(ROOT / "matrix.yaml").matrix.python)
TAGS = tuple(p.interpreter_tag for p in PYTHONS if not p.free_threaded)
"""The matrix's GIL Pythons as wheel tags, cp310 ... cp315: its free-threaded rows are GitHub-only here
(no free-threaded CPython on this machine), which the build says in one line (asserted below)."""
FREE_THREADED = tuple(p.key for p in PYTHONS if p.free_threaded)

ENGINE = ContainerEngine.answering()
PODMAN = ContainerEngine("podman")
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)


def _matrix(directory: Path, **rocm: object) -> Path:
    """The real matrix, rocm only, pointing at the real engine."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["variants"] = {"rocm": {**data["variants"]["rocm"], **rocm}}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    shutil.copytree(ROOT / "packaging", directory / "packaging", dirs_exist_ok=True)
    return directory / "matrix.yaml"


def _needed(wheel: Path) -> set[str]:
    found: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            if is_elf(data[:4]):
                found.update(inspect_elf(info.filename, data).needed)
    return found


@pytest.fixture(scope="module")
def container_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`release build --variant rocm --container`: every Python of the matrix, once. Under .ci/run
    the set-up phase's `nox -s build_rocm` built the same wheels from the same inputs a few minutes
    before: each is taken from there, up to date (the up-to-date check is what is tested then)."""
    wheelhouse = tmp_path_factory.mktemp("container") / "wheelhouse"
    proc = toolkit("build", "--variant", "rocm", "--container", "--wheelhouse", str(wheelhouse), timeout=3000)
    reused = re.findall(
        r"^(cp3\d+-rocm-\S+): up to date, nothing changed since its build in (\S+)", proc.stdout, re.M
    )
    if settings.switch("RELEASE_CI_SETUP_RAN"):
        assert len(reused) == len(TAGS) and {image for _, image in reused} == {"localhost/xfer-build-rocm"}, (
            proc.stdout
        )
    if FREE_THREADED:
        line = f"GitHub-only: {len(FREE_THREADED)} build steps of Python {', '.join(FREE_THREADED)} ("
        assert any(text.startswith(line) for text in proc.stdout.splitlines()), proc.stdout
    else:
        assert reused or "cibuildwheel in localhost/xfer-build-rocm through" in proc.stdout, proc.stdout
    return wheelhouse


def test_an_unchanged_container_build_takes_its_last_wheel_and_a_change_builds_again(
    container_wheels: Path, tmp_path: Path
) -> None:
    """A second `build --container` of a step whose inputs are unchanged takes the wheel of the
    last build (the same bytes, verified again, into another wheelhouse); a changed source file,
    another step or an image without an ID changes or drops the key, so that build compiles."""
    wheelhouse = tmp_path / "wheelhouse"
    proc = toolkit(
        "build", "--variant", "rocm", "--container", "--python", "3.12", "--wheelhouse", str(wheelhouse)
    )
    assert "cibuildwheel in" not in proc.stdout, proc.stdout
    assert re.search(r"^cp312-rocm-\S+: up to date, nothing changed", proc.stdout, re.M), proc.stdout
    (again,) = (wheelhouse / "rocm").glob("*cp312*.whl")
    (first,) = (container_wheels / "rocm").glob("*cp312*.whl")
    assert again.read_bytes() == first.read_bytes()
    assert json.loads(again.with_name(again.name + ".verify.json").read_text(encoding="utf-8"))["ok"] is True
    # The key: the project's every file, the step, the image by its ID.
    plan = make_plan(load(ROOT / "matrix.yaml"))
    steps = tuple(s for s in plan.builds if s.variant.name == "rocm")[:2]
    project = tmp_path / "project"
    shutil.copytree(ROOT / "engine", project / "src")
    keys = container_keys(
        steps, project, engine=PODMAN, image="localhost/xfer-build-rocm", toolkit="x", epoch="1"
    )
    assert len(set(keys.values())) == 2  # one key a step
    (project / "src" / "CMakeLists.txt").write_text("# changed\n", encoding="utf-8")
    changed = container_keys(
        steps, project, engine=PODMAN, image="localhost/xfer-build-rocm", toolkit="x", epoch="1"
    )
    assert not set(changed.values()) & set(keys.values())
    assert (
        container_keys(
            steps, project, engine=PODMAN, image="localhost/xfer-no-such-image", toolkit="x", epoch="1"
        )
        == {}
    )


def test_container_build_binds_the_declared_rocm(container_wheels: Path) -> None:
    wheels = sorted((container_wheels / "rocm").glob("*.whl"))
    assert [w.name.split("-")[2] for w in wheels] == list(TAGS)
    for wheel in wheels:
        assert wheel.name.startswith("xfer_engine_rocm-0.1.0-")
        needed = _needed(wheel)
        assert "libamdhip64.so.7" in needed, needed
        assert not any(n.startswith(("libamdhip64.so.5", "libamdhip64.so.6")) for n in needed)
        with zipfile.ZipFile(wheel) as zf:
            assert not [n for n in zf.namelist() if "libamdhip64" in n], "the runtime is bound, not vendored"
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            assert "Requires-External: libamdhip64.so.7" in zf.read(meta).decode()
        report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
        assert report["ok"] is True, [r for r in report["rules"] if r["status"] == "fail"]
        assert report["runtime_bound"] == ["libamdhip64.so.7"]
        statuses = {r["id"]: r["status"] for r in report["rules"]}
        assert statuses.get("runtime-abi", "pass") == "pass"
        # Trixie's glibc 2.41 honestly allows a newer tag than the release floor, and no newer one.
        tag = report["platform_tags"][0]
        assert tag.startswith("manylinux_2_") and int(tag.split("_")[2]) <= 41, tag
        glibc = report["glibc_needed"]
        assert glibc is not None and tuple(map(int, glibc.split("."))) <= (2, 41), glibc
        assert any(c.startswith("GCC: (Debian 14.") for c in report["compilers"]), report["compilers"]


STAND_IN = "localhost/serving-stand-in:rocm7.2"
"""Stands in for a registry's serving image (no registry is reachable here): the local opt-prefix
image under another name, which only `--pull` runs (it has no local recipe in this matrix)."""


def _serving_matrix(directory: Path, reference: str) -> Path:
    path = _matrix(directory)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["images"] = {
        "serving": {
            "description": "a serving image, pulled by reference",
            "container": reference,
            "python": ["3.12"],
            "simulate": {"runtime": "prefix", "prefix": "/opt/rocm-7.2.4/lib", "via": "ld.so.conf.d"},
        }
    }
    data["variants"]["rocm"]["images"] = ["serving"]
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_pull_runs_a_declared_serving_image_in_a_real_container(
    container_wheels: Path, local_images: LocalImages, tmp_path: Path
) -> None:
    assert ENGINE is not None
    made = local_images.make(local_images.smoke_recipe("rocm-opt-prefix"))
    subprocess.run([ENGINE.command, "tag", made, STAND_IN], check=True, capture_output=True)
    matrix = _serving_matrix(tmp_path / "m", STAND_IN)
    smoke = ["--matrix", str(matrix), "smoke", "--variant", "rocm", "--python", "3.12"]
    proc = toolkit(*smoke, "--wheelhouse", str(container_wheels), "--image", "serving", "--pull", "--json")
    (result,) = [r for r in json.loads(proc.stdout)["results"] if r["image"] == "serving"]
    assert result["ok"] and result["runner"] == f"{ENGINE} container {STAND_IN}", result
    location = next(s["detail"] for s in result["steps"] if s["name"] == "runtime location")
    assert location.startswith("/opt/rocm-7.2.4/lib/libamdhip64.so.7"), result
    # A reference that cannot be pulled is one line, and the smoke fails.
    absent = _serving_matrix(tmp_path / "absent", "localhost/no-such-serving-image:1")
    proc = toolkit("--matrix", str(absent), *smoke[2:], "--wheelhouse", str(container_wheels), "--image",
                   "serving", "--pull", check=False)  # fmt: skip
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "cannot pull localhost/no-such-serving-image:1" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_mismatched_host_without_an_engine_stops_naming_setup_podman(tmp_path: Path) -> None:
    """The host's HIP 5.2 is not the declared 7.2 and no podman or docker answers (none on PATH):
    one line with the mismatch, the remedies and the command that sets up podman."""
    matrix = _matrix(tmp_path)
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {"PATH": f"{bare}:/usr/bin/nonexistent"}
    build = ["--matrix", str(matrix), "build", "--variant", "rocm", "--python", "3.12"]
    proc = toolkit(*build, env=env, check=False)
    assert proc.returncode == 4
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "the matrix declares toolkit 7.2 (matrix.yaml:" in lines[0]
    assert "but the toolkit found is 5.2" in lines[0]
    assert "`release toolchain install rocm 7.2`" in lines[0]
    assert "local image localhost/xfer-build-rocm, which needs podman or docker: `bash " in lines[0]
    assert "setup-podman.sh`" in lines[0]


def test_an_image_without_the_interpreters_is_one_line(local_images: LocalImages, tmp_path: Path) -> None:
    runtime_only = local_images.make(local_images.smoke_recipe("rocm-absent"))  # no cp39, no compilers
    matrix = _matrix(tmp_path)
    proc = toolkit(
        "--matrix", str(matrix), "build", "--variant", "rocm", "--python", "3.12", "--container",
        "--image", runtime_only, check=False,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: image {runtime_only} lacks the interpreter(s)")
    assert "/opt/python/cp39-cp39/bin/python" in line


def test_no_container_engine_is_one_line_with_the_install_command(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {"PATH": f"{bare}:/usr/bin/nonexistent"}
    proc = toolkit("--matrix", str(matrix), "build", "--variant", "rocm", "--container", env=env, check=False)
    assert proc.returncode == 4
    (line,) = proc.stderr.strip().splitlines()
    assert "needs podman or docker" in line and "`bash scripts/setup-podman.sh`" in line


@pytest.mark.slow
def test_a_build_image_without_the_declared_toolkit_leaves_the_wheelhouse_alone(
    local_images: LocalImages, tmp_path: Path
) -> None:
    """ROCm 10.0 declared, the image carries 7.2 (the same soname, another release): before-all's
    install script says so, cibuildwheel fails, and the wheelhouse keeps exactly what it had."""
    build_image = local_images.make(local_images.build_recipe("rocm"))
    # The image by tag, not its recipe: the recipe would install the declared 10.0 into the image
    # while making it (toolkit_install), and fail there, before cibuildwheel's before-all.
    by_tag = {"local": build_image}
    matrix = _matrix(tmp_path, toolkit="10.0", distribution="xfer-engine-rocm10", build_image=by_tag)
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "rocm").mkdir(parents=True)
    keep = wheelhouse / "rocm" / "xfer_engine_rocm10-0.0.9-cp312-cp312-manylinux_2_28_x86_64.whl"
    keep.write_bytes(b"an earlier wheel")
    proc = toolkit(
        "--matrix", str(matrix), "build", "--variant", "rocm", "--python", "3.12", "--container",
        "--image", build_image, "--wheelhouse", str(wheelhouse), check=False, timeout=3000,
    )  # fmt: skip
    assert proc.returncode == 5, proc.stdout + proc.stderr
    # before-all (`install-rocm.sh 10.0`) stops first: the image's package sources carry HIP 7.2
    out = proc.stdout + proc.stderr
    assert re.search(r"HIP 7\.2\.\d+ is installed under /usr, but the matrix declares 10\.0", out), out
    assert "no HIP 10.0 is on this machine" in out, out
    assert sorted(p.name for p in (wheelhouse / "rocm").iterdir()) == [keep.name]
    assert keep.read_bytes() == b"an earlier wheel"
