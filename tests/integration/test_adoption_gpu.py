"""An adopter's GPU variants, from the installed toolkit (issue 43): test_adoption.py's ringlet, whose
CMake `option()`s USE_CUDA and USE_HIP link the CUDA or HIP runtime, in a fresh repository outside
this one, with the toolkit installed from its wheel into a fresh venv (no checkout on any path).
`release init --variants cpu,cuda,rocm`, the maintainer's `yours:` lines filled in, then `release
build --container` of cpu, cuda and rocm in their local build images, verify and smoke, one Python.

The container builds run the backend's `bash scripts/install-X.sh` (before-all) from the installed
toolkit's own scripts: before issue 43 only a source tree's were copied, and every GPU variant of
every adopter failed there. The build images are the ones the rest of the suite makes (our
matrix's recipes, filled in as the adopter's, with our matrix's Pythons): the installed toolkit's
make-image.sh computes the same inputs and finds each up to date, so this test compiles three
small wheels and makes no image. ringlet requires torch, which smoke and the import test leave out
(`engine.smoke.requirements.skip`), so neither installs it, and the import test asks no index."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from release.machine.containers import container_engine
from release.settings import in_ci

from .conftest import ROOT, LocalImages
from .test_adoption import FILES, git, needs_tools
from .test_adoption import fresh_repository as ringlet_repository
from .toolkit_install import InstalledToolkit

pytestmark = [pytest.mark.integration, pytest.mark.container]

ENGINE = container_engine()
if ENGINE is None:
    if in_ci():
        pytest.fail("podman is not working here: .ci/run must install it (scripts/setup-podman.sh)")
    pytest.skip("no podman or docker answers (run scripts/setup-podman.sh)", allow_module_level=True)

PY = "3.12"  # one Python: every build image holds it
CP = "cp312"
VARIANTS = ("cpu", "cuda", "rocm")
BOUND = {"cpu": [], "cuda": ["libcudart.so.13"], "rocm": ["libamdhip64.so.7"]}
OURS = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))


def gpu_repository(root: Path) -> Path:
    """ringlet for every Python our matrix builds (so its build image recipes are ours exactly)."""
    lowest, text = OURS["python"][0], FILES["pyproject.toml"]
    pyproject = re.sub(r'requires-python = "[^"]*"', f'requires-python = ">={lowest}"', text)
    # torch in Requires-Dist, as real engines have it, which no smoke command imports: left out
    # (engine.smoke.requirements.skip) of smoke and of the container build's import test.
    pyproject = pyproject.replace("requires-python", 'dependencies = ["torch>=2.0"]\nrequires-python')
    return ringlet_repository(root, {**FILES, "pyproject.toml": pyproject})


def fill_in(repo: Path, images: LocalImages) -> None:
    """The maintainer's `yours:` lines: the toolkits, the local build images (our recipes, under
    our tags), the smoke self-test."""
    matrix = repo / "matrix.yaml"
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    assert data["python"] == OURS["python"], data["python"]
    for name in VARIANTS:
        variant = data["variants"][name]
        ours = OURS["variants"][name]
        if "toolkit" in ours:
            variant["toolkit"] = ours["toolkit"]
        variant["build_image"] = {"local": images.build_recipe(name).tag, **ours["build_image"]}
    data["engine"]["smoke"]["commands"] = [["ringlet-info"]]
    data["engine"]["smoke"]["requirements"] = {"skip": ["torch"]}
    matrix.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release toolkit, filled in")


def image_id(tag: str) -> str:
    assert ENGINE is not None
    proc = subprocess.run([ENGINE, "image", "inspect", tag, "--format", "{{.Id}}"],
                          capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    return proc.stdout.strip()


@needs_tools
@pytest.mark.slow
def test_an_adopter_builds_verifies_and_smokes_cpu_cuda_and_rocm_from_the_installed_toolkit(
    installed_toolkit: InstalledToolkit, local_images: LocalImages, tmp_path: Path
) -> None:
    run = installed_toolkit.run
    tags = {name: local_images.make(local_images.build_recipe(name)) for name in VARIANTS}
    before = {name: image_id(tag) for name, tag in tags.items()}
    repo = gpu_repository(tmp_path)
    said = run("release", "init", "--ci", "github", "--variants", ",".join(VARIANTS), cwd=repo).stdout
    assert "src/ringlet/__init__.py: variant guard added" in said, said
    fill_in(repo, local_images)
    run("release", "plan", cwd=repo)

    build = run("release", "build", "--python", PY, "--container", cwd=repo, timeout=3000)
    out = build.stdout + build.stderr
    for name, tag in tags.items():
        assert f"[{name}] cibuildwheel in {tag} through" in out, out[-4000:]
    # The import test installed each wheel offline, torch left out: nothing came from an index.
    assert out.count("Testing wheel") == len(VARIANTS) and "torch-2" not in out, out[-4000:]
    # The images the rest of the suite made, found up to date by the installed toolkit's make-image.sh.
    assert {name: image_id(tag) for name, tag in tags.items()} == before, out[-4000:]
    for name in ("cuda", "rocm"):  # before-all ran the installed toolkit's install script
        script = f"scripts/install-{name}.sh"
        assert (repo / "build" / name / "container" / script).is_file()
    distributions = {"cpu": "ringlet_cpu", "cuda": "ringlet", "rocm": "ringlet_rocm"}
    for name in VARIANTS:
        (wheel,) = sorted((repo / "wheelhouse" / name).glob("*.whl"))
        assert wheel.name.startswith(f"{distributions[name]}-0.1.0-{CP}-{CP}-manylinux_2_"), wheel.name
        report = json.loads(Path(f"{wheel}.verify.json").read_text(encoding="utf-8"))
        failed = [r for r in report["rules"] if r["status"] == "fail"]
        assert report["ok"] is True and not failed, (name, failed)
        assert report["runtime_bound"] == BOUND[name], (name, report["runtime_bound"])
        again = run("release", "verify", "--variant", name, str(wheel), cwd=repo, check=False)
        assert again.returncode == 0, again.stdout + again.stderr

    smoke = run("release", "smoke", "--python", PY, "--json", cwd=repo, check=False, timeout=1800)
    assert smoke.returncode == 0, smoke.stdout[-3000:] + smoke.stderr[-6000:]
    results = json.loads(smoke.stdout)["results"]
    assert {r["variant"] for r in results} == set(VARIANTS), results
    for result in results:
        assert result["ok"], result
        steps = {s["name"]: s for s in result["steps"]}
        (install,) = [s for n, s in steps.items() if n.startswith("pip install ")]
        assert install["detail"] == "left out: torch>=2.0 (engine.smoke.requirements.skip)", install
        if result["expect"] == "runtime-missing":  # no runtime here: the guard init wrote refuses
            (refused,) = [s for n, s in steps.items() if n.startswith("import ringlet refused")]
            assert any(so.split(".so")[0] in refused["detail"] for so in BOUND[result["variant"]]), refused
        else:
            assert steps["ringlet-info"]["ok"], steps
