"""`release build --container` for a variant whose build image is not here and that no recipe makes
(issue 58: a cpu variant without `build_image` ended in podman's raw short-name error): one line
naming the matrix line and key and the fix, exit 4, nothing built, no container started."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.machine.containers import ContainerEngine
from tests.unit.test_build_image_missing import CPU_IMAGE

from .conftest import ROOT, toolkit

pytestmark = [pytest.mark.integration, pytest.mark.container]


def test_a_variant_without_a_build_image_is_one_line_naming_its_key(tmp_path: Path) -> None:
    if ContainerEngine.answering() is None:
        pytest.fail("podman is not working here: scripts/setup-podman.sh")
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8").replace(CPU_IMAGE, "")
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}")
    (tmp_path / "matrix.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "packaging").symlink_to(ROOT / "packaging")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if row.strip() == "cpu:")
    wheelhouse = tmp_path / "wheelhouse"
    proc = toolkit(
        "--matrix", str(tmp_path / "matrix.yaml"), "build", "--variant", "cpu", "--python", "3.12",
        "--container", "--wheelhouse", str(wheelhouse), cwd=tmp_path, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    errors = [row for row in proc.stderr.splitlines() if row.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    where = f"error: matrix.yaml:{line} (variants.cpu)"
    assert errors[0].startswith(f"{where}: the build image manylinux_2_28 is not"), errors[0]
    assert "build_image: {debian: {suite: trixie}}" in errors[0]
    assert "Traceback" not in proc.stderr and "short-name" not in proc.stderr
    assert not list(wheelhouse.rglob("*.whl"))
