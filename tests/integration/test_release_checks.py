"""`release release-checks` against a real index (pypiserver on 127.0.0.1): a name held by another
project, a tag the wheels do not carry, a missing file, an oversized file, the publisher checklist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.publish_support import (
    PASSWORD,
    USER,
    IndexServer,
    index_server,
    make_wheel,
    make_wheelhouse,
    run_release,
    write_matrix,
)

pytestmark = pytest.mark.integration
__all__ = ["index_server"]  # the fixture, imported so pytest sees it


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    matrix = write_matrix(tmp_path)
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    root = Path(__file__).resolve().parents[2]
    (workflows / "release.yml").write_text(
        (root / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return matrix, make_wheelhouse(tmp_path / "wheelhouse")


def checks(
    matrix: Path, server: IndexServer, *extra: str, tag: str = "v0.1.0"
) -> subprocess.CompletedProcess[str]:
    wheelhouse = str(matrix.parent / "wheelhouse")
    return run_release(
        "release-checks", "--tag", tag, "--repository", server.url, "--repo", "ringlet/xfer",
        *extra, wheelhouse, matrix=matrix,
    )  # fmt: skip


def upload_foreign(server: IndexServer, directory: Path, distribution: str) -> None:
    """Another project under our name: a pure-Python wheel someone else uploaded."""
    name = f"{distribution.replace('-', '_')}-9.9.9-py3-none-any.whl"
    wheel = make_wheel(directory, distribution, "9.9.9", "3.10", platform="any", filename=name)
    proc = subprocess.run(
        [sys.executable, "-m", "twine", "upload", "--repository-url", server.url,
         "-u", USER, "-p", PASSWORD, str(wheel)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_complete_set_passes_and_lands_in_dist(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    dist = matrix.parent / "dist"
    proc = checks(matrix, index_server, "--dist", str(dist))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in dist.iterdir()) == sorted(p.name for p in wheelhouse.glob("*/*.whl"))
    for distribution in ("xfer-engine-cpu", "xfer-engine-rocm"):
        assert (
            f"[ ] {distribution}: https://pypi.org/manage/project/{distribution}/settings/publishing/"
            " -> GitHub: owner ringlet, repository xfer, workflow release.yml, environment pypi"
        ) in proc.stdout
        assert f"{distribution}: free on the index" in proc.stdout


def test_a_name_held_by_another_project_names_it_and_the_fix(
    project: tuple[Path, Path], index_server: IndexServer, tmp_path: Path
) -> None:
    matrix, _ = project
    upload_foreign(index_server, tmp_path / "foreign", "xfer-engine-rocm")
    dist = matrix.parent / "dist"
    proc = checks(matrix, index_server, "--dist", str(dist))
    assert proc.returncode == 8, proc.stdout + proc.stderr
    assert "name-owner: xfer-engine-rocm: the name is taken on the index by another project" in proc.stderr
    assert "xfer_engine_rocm-9.9.9-py3-none-any.whl" in proc.stderr
    assert "variants.rocm.distribution" in proc.stderr
    assert "xfer-engine-cpu" not in proc.stderr  # the free name is not blamed
    assert not dist.exists()  # nothing is handed to the upload when a check fails


def test_our_own_earlier_wheels_do_not_make_the_name_foreign(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    first = run_release(
        "publish",
        "--tag",
        "v0.1.0",
        "--repository",
        index_server.url,
        "--wheelhouse",
        str(wheelhouse),
        matrix=matrix,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    proc = checks(matrix, index_server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "xfer-engine-rocm: already ours (2 file(s) of this engine)" in proc.stdout


def test_every_problem_names_the_file_and_the_fix(
    project: tuple[Path, Path], index_server: IndexServer
) -> None:
    matrix, wheelhouse = project
    missing = sorted((wheelhouse / "cpu").glob("*cp313*.whl"))[0]
    missing.unlink()
    proc = checks(matrix, index_server, "--size-limit", "200", tag="v0.1.1")
    assert proc.returncode == 8
    err = proc.stderr
    assert "tag-version: cpu/xfer_engine_cpu-0.1.0-cp310" in err and "the tag says 0.1.1" in err
    assert "expected-files: cpu/xfer_engine_cpu-0.1.1-cp313-cp313-*.whl: missing (build job cp313-cpu-" in err
    assert "size-limit: rocm/xfer_engine_rocm-0.1.0-cp310" in err and "per-file limit" in err
    assert "Traceback" not in err
