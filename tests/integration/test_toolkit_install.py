"""The toolkit as users get it: its wheel, installed with its dependencies into a fresh venv made
from a base interpreter, run outside this repository, must carry everything it reads (backend data,
schemas, toolchain scripts, workflow templates) and needs nothing from a checkout.

`toolkit_wheel` and `installed_toolkit` (tests/integration/toolkit_install.py, registered in
conftest.py) are shared with test_adoption.py and test_adoption_rehearse.py.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from release import __version__

from .toolkit_install import InstalledToolkit

pytestmark = pytest.mark.integration


def test_the_wheel_carries_data_scripts_and_templates(toolkit_wheel: Path) -> None:
    names = set(zipfile.ZipFile(toolkit_wheel).namelist())
    for backend in ("cpu", "cuda", "rocm", "musa"):
        assert f"release/backends_data/{backend}.json" in names
    assert {"release/config/matrix.schema.json", "release/inspect/verify.schema.json"} <= names
    scripts = ("install-rocm.sh", "install-cuda.sh", "install-musa.sh", "_common.sh", "free-disk.sh")
    # a variant whose host lacks the declared toolkit builds in its local image by default: the
    # script that makes it, and the one that sets up podman, come with the toolkit
    scripts += ("make-image.sh", "image-layers.sh", "setup-podman.sh")
    scripts += ("hipcc-host.sh",)  # install-rocm.sh puts it where HIP has no hipcc
    for script in (*scripts, "runtimes.tsv", "toolkits.tsv"):
        assert f"release/scripts_data/{script}" in names
    for workflow in ("release.yml", "ci.yml", "hardware.yml"):
        assert f"release/init/templates/{workflow}" in names
    assert "release/nox_sessions.py" in names
    # and nothing of this repository's own: the reference engine, tests, its bootstrap and CI scripts
    own = ("bootstrap.sh", "fresh-ci.sh", "cibw-podman.sh")
    assert not [n for n in names if n.startswith(("engine/", "tests/")) or n.endswith(own)]


def test_installed_toolkit_works_away_from_the_repository(
    installed_toolkit: InstalledToolkit, tmp_path: Path
) -> None:
    project = tmp_path / "elsewhere"  # no packaging/ or scripts/ here, and not the repository
    (project / "proj").mkdir(parents=True)  # the engine: a PEP 517 project (plan checks it exists)
    (project / "proj" / "pyproject.toml").write_text('[project]\nname = "kv"\nversion = "0.1"\n')
    (project / "matrix.yaml").write_text(
        'schema_version: 1\nengine: {source: proj, import_name: kv}\npython: ["3.12"]\n'
        "platform: {floor: manylinux_2_28_x86_64}\n"
        "variants: {rocm: {distribution: kv-rocm, backend: rocm, exclude: ['libamdhip64.so*']},\n"
        "           musa: {distribution: kv-musa, backend: musa}}\n",
        encoding="utf-8",
    )
    plan = installed_toolkit.run("release", "plan", cwd=project)
    assert "cp312-rocm-manylinux_x86_64" in plan.stdout
    where = installed_toolkit.run("python", "-c", "import release; print(release.__file__)", cwd=project)
    assert str(installed_toolkit.venv) in where.stdout, "the test must exercise the installed copy"
    script = installed_toolkit.run("release", "toolchain", "path", "rocm", cwd=project).stdout.strip()
    assert script.startswith(str(installed_toolkit.venv)) and Path(script).is_file()
    # A missing toolkit is named with the toolkit's command, which works here: no repository path.
    check = installed_toolkit.run("release", "toolchain", "check", cwd=project, extra={"MUSA_HOME": ""})
    musa = next(line for line in check.stdout.splitlines() if line.startswith("musa toolkit"))
    assert "`release toolchain install musa`" in musa, check.stdout
    version = installed_toolkit.run("release", "--version", cwd=project).stdout.strip()
    assert version == f"release {__version__}"
