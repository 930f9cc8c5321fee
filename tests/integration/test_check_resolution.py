"""Variant wheels and resolution checks for real: `release variants` on a small per-name release,
`release verify` on the variant set, and `release check-resolution` serving both sets from local
indexes on 127.0.0.1 and installing with pip and uv (0.13.8, `--preview`) into fresh venvs."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from release.machine.interpreters import find_interpreter
from release.variants.resolution import IndexServer, uv_binary
from tests.integration.variant_release import (
    PYTHONS,
    extensions,
    make_release,
    per_name_wheel,
    write_binary_wheel,
    write_matrix,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def toolkit(matrix: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "release", "--matrix", str(matrix), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=900,
    )


@pytest.fixture(autouse=True)
def _needs_uv_and_pythons() -> None:
    if uv_binary() is None:
        pytest.fail("uv is not installed: pip install -e '.[test]' (uv>=0.13.8)")
    missing = [p for p in PYTHONS if find_interpreter(p) is None]
    if missing:
        pytest.skip(f"no Python {', '.join(missing)} here (pyenv install them)")


def test_variant_wheels_are_the_same_files_renamed_and_verify(tmp_path: Path) -> None:
    matrix, wheelhouse = make_release(tmp_path, ("3.12",))
    made = toolkit(matrix, "variants")
    assert made.returncode == 0, made.stderr + made.stdout
    out = tmp_path / "wheelhouse-variants"
    names = sorted(p.name for p in out.glob("*.whl"))
    assert names == [
        "xfer_engine-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl",
        "xfer_engine-0.1.0-cp312-cp312-manylinux_2_28_x86_64-null.whl",
        "xfer_engine-0.1.0-cp312-cp312-manylinux_2_28_x86_64-rocm72.whl",
    ]
    index = json.loads((out / "xfer_engine-0.1.0-variants.json").read_text())
    assert index["$schema"] == "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
    assert index["providers"]["nvidia"]["plugin-api"] == "nvidia_variant_provider.plugin:NvidiaVariantPlugin"
    assert index["variants"]["rocm72"] == {"amd": {"gfx_arch": ["gfx942", "gfx950"], "rocm_version": ["7.2"]}}
    # The ROCm variant holds the ROCm wheel's extension, byte for byte, under the shared name.
    rocm_source = next((wheelhouse / "rocm").glob("*.whl"))
    with zipfile.ZipFile(rocm_source) as a, zipfile.ZipFile(out / names[2]) as b:
        ext = "xfer/_xfer.cpython-312-x86_64-linux-gnu.so"
        assert a.read(ext) == b.read(ext)
        assert "Name: xfer-engine\n" in b.read("xfer_engine-0.1.0.dist-info/METADATA").decode()
        assert (
            "xfer_engine-0.1.0.dist-info/variant.json"
            in b.read("xfer_engine-0.1.0.dist-info/RECORD").decode()
        )
    verified = toolkit(matrix, "verify", str(out))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "variant rocm" in verified.stdout and "label 'rocm72'" in verified.stdout


@pytest.mark.slow
def test_check_resolution_passes_for_pip_and_uv_on_every_matrix_python(tmp_path: Path) -> None:
    matrix, _wheelhouse = make_release(tmp_path)
    assert toolkit(matrix, "variants", "--quiet").returncode == 0
    checked = toolkit(matrix, "check-resolution", "--json")
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-4000:]
    report = json.loads(checked.stdout)
    cases = report["cases"]
    assert report["ok"] and all(c["ok"] for c in cases)
    assert {c["python"] for c in cases} == set(PYTHONS)
    assert {(c["setup"], c["installer"]) for c in cases} == {
        ("per-name", "pip"),
        ("per-name", "uv"),
        ("partial-index", "pip"),
        ("partial-index", "uv"),
        ("variants", "pip"),
        ("variants", "uv"),
    }
    # A ROCm user today: the per-name distribution, with pip or uv (uv 0.13.8 has no AMD provider).
    rocm = [c for c in cases if c["setup"] == "per-name" and c["requirement"] == "xfer-engine-rocm"]
    assert len(rocm) == 2 * len(PYTHONS) and all("binds libamdhip64.so.7" in c["detail"] for c in rocm)
    variant = {
        (c["python"], tuple(c["env"].items()), c["installer"]): c for c in cases if c["setup"] == "variants"
    }
    for python in PYTHONS:
        assert "[null]" in variant[(python, (), "uv")]["detail"]  # no NVIDIA driver on this machine
        forced = variant[(python, (("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "13.0"),), "uv")]
        assert "[cu130]" in forced["detail"] and "libcudart.so.13" in forced["detail"]
        assert variant[(python, (), "pip")]["detail"].startswith("refused")
    # The vLLM #44660 pattern: uv stops at the index that lacks the Python; pip falls back, visibly.
    partial = [c for c in cases if c["setup"] == "partial-index" and c["python"] == "3.11"]
    assert all("failed visibly" in c["detail"] for c in partial if c["installer"] == "uv")
    assert all("from index release" in c["detail"] for c in partial if c["installer"] == "pip")


def test_an_index_that_hands_a_rocm_user_a_cuda_build_fails(tmp_path: Path) -> None:
    matrix, wheelhouse = make_release(tmp_path, ("3.11", "3.12"))
    built = extensions(tmp_path / "ext")
    # The broken index: under the ROCm name, the Python 3.11 wheel is the CUDA build.
    bad = next((wheelhouse / "rocm").glob("*cp311*.whl"))
    bad.unlink()
    per_name_wheel(wheelhouse, "rocm", "3.11", built["cuda"], requires_external="libcudart.so.13")
    write_matrix(tmp_path, ("3.11", "3.12"))
    checked = toolkit(matrix, "check-resolution", "--setup", "per-name", "--setup", "partial-index")
    assert checked.returncode == 7, checked.stdout + checked.stderr
    assert "another backend's build" in checked.stderr
    assert "xfer-engine-rocm 0.1.0 (binds libcudart.so.13)" in checked.stderr
    assert "is variant cuda's build, not rocm" in checked.stderr
    failing = [ln for ln in checked.stdout.splitlines() if ln.startswith("FAIL")]
    assert failing and all("3.11" in ln and "xfer-engine-rocm" in ln for ln in failing)


def test_a_name_held_by_another_project_on_the_index_fails_and_is_named(tmp_path: Path) -> None:
    """The index the release goes to holds xfer-engine-rocm with another project's wheel (pure
    Python, 9.0): the check names the held name and what each installer gave; pip, which takes
    the higher version across both indexes, got theirs, and the report says it is not ours."""
    matrix, _wheelhouse = make_release(tmp_path, ("3.12",))
    theirs = "xfer_engine_rocm-9.0-py3-none-any.whl"
    info = "xfer_engine_rocm-9.0.dist-info"
    write_binary_wheel(
        tmp_path / "public" / "simple" / "xfer-engine-rocm" / theirs,
        {
            "rocm_tools/__init__.py": b"",
            f"{info}/METADATA": b"Metadata-Version: 2.1\nName: xfer-engine-rocm\nVersion: 9.0\n",
            f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        },
    )
    with IndexServer("public", tmp_path / "public") as public:
        checked = toolkit(
            matrix, "check-resolution", "--setup", "held-name", "--setup", "per-name",
            "--python", "3.12", "--repository", public.url, "--json",
        )  # fmt: skip
    assert checked.returncode == 7, checked.stdout[-4000:] + checked.stderr[-4000:]
    assert f"held-name: xfer-engine-rocm on {public.url}simple/: held by another project" in checked.stderr
    assert f"held-name: xfer-engine-cpu on {public.url}simple/: free" in checked.stderr
    cases = json.loads(checked.stdout)["cases"]
    held = {c["installer"]: c for c in cases if c["setup"] == "held-name"}
    assert set(held) == {"pip", "uv"} and all(c["requirement"] == "xfer-engine-rocm" for c in held.values())
    assert held["pip"]["detail"] == (
        "the name is held by another project: installed xfer-engine-rocm 9.0 from index public, "
        f"not this engine's wheel ({theirs} is not a CPython platform wheel of this engine)"
    )
    # uv prefers the extra index (ours), and still fails: their next upload wins.
    assert f"held by another project on the index ({theirs})" in held["uv"]["detail"]
    assert "xfer-engine-rocm 0.1.0 (binds libamdhip64.so.7) from index release" in held["uv"]["detail"]
    assert all(c["ok"] for c in cases if c["setup"] == "per-name")  # our own index is right
    assert "the name is held by another project" in checked.stderr
