"""`release init` for a meson-python project (issue 43: it read nothing and said nothing): options
from meson.options, system packages from dependency() calls, a per-variant import package from the
option whose description names it, names from that package rather than a CUDA-suffixed project
name, and no variant guard where no two variants share a package. The project is the meson stand-in
(tests/standins/meson_pkgconfig) renamed the way the issue's adopter named theirs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from release import cli
from release.init.meson import parse_options

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "standins" / "meson_pkgconfig"


@pytest.fixture
def meson_project(tmp_path: Path) -> Path:
    project = tmp_path / "mesonstand"
    shutil.copytree(STANDIN, project, ignore=shutil.ignore_patterns("matrix.yaml", "build", "wheelhouse"))
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"mesonstand"', '"mesonstand-cu12"'), encoding="utf-8")
    return project


def test_init_reads_a_meson_python_project(meson_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = meson_project / "matrix.yaml"
    argv = ["init", str(meson_project), "--variants", "cpu,cuda,rocm", "--output", str(output)]
    assert cli.main(argv) == 0
    said = capsys.readouterr().out
    text = output.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert data["engine"]["import_name"] == "mesonstand"
    assert data["engine"]["system_packages"] == {
        "zlib": {"dnf": ["zlib-devel"], "apt": ["zlib1g-dev"], "pkg_config": ["zlib"]}
    }
    assert "# dependency(zlib) at meson.build:5" in text
    variants = data["variants"]
    assert {n: v["distribution"] for n, v in variants.items()} == {
        "cpu": "mesonstand-cpu", "cuda": "mesonstand", "rocm": "mesonstand-rocm"  # not mesonstand-cu12-*
    }  # fmt: skip
    assert {n: v["import_name"] for n, v in variants.items()} == {
        "cpu": "mesonstand_cpu", "cuda": "mesonstand_cuda", "rocm": "mesonstand_rocm"
    }  # fmt: skip
    assert variants["rocm"]["cmake_defines"] == {"variant": "rocm"}
    # The GPU variants' toolkit and local build image from the backend data, as our matrix has them.
    ours = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))["variants"]
    for name in ("cuda", "rocm"):
        assert variants[name]["toolkit"] == ours[name]["toolkit"]
        assert variants[name]["build_image"] == ours[name]["build_image"], variants[name]
    assert variants["cpu"]["build_image"] == {"debian": {"suite": "trixie"}}  # every variant (issue 58)
    assert "#   variant (string, default cpu): the variant: names the import package" in text
    assert "setup-args=-Dvariant=rocm" in text
    assert "no variant guard: each variant ships its own import package" in said, said
    init = (meson_project / "src" / "__init__.py").read_text(encoding="utf-8")
    assert "variant guard" not in init  # nothing written into the package
    assert cli.main(["--matrix", str(output), "plan"]) == 0  # what init wrote loads and plans


def test_meson_options_with_choices_and_parentheses() -> None:
    text = (
        "option('variant', type: 'combo', choices: ['cpu', 'hip'], value: 'cpu',\n"
        "       description: 'backend (names the import package: mylib_<variant>)')\n"
        "option('tests', type : 'boolean', value : false)  # a comment\n"
    )
    variant, tests = parse_options(text)
    assert (variant.name, variant.type, variant.choices) == ("variant", "combo", ("cpu", "hip"))
    assert variant.description == "backend (names the import package: mylib_<variant>)"
    assert (tests.name, tests.type, tests.value, tests.description) == ("tests", "boolean", "false", "")


def test_release_plan_warns_on_every_yours_line_left_unfilled(
    meson_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = meson_project / "matrix.yaml"
    assert cli.main(["init", str(meson_project), "--variants", "cpu", "--output", str(output)]) == 0
    capsys.readouterr()
    assert cli.main(["--matrix", str(output), "plan"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "init's placeholder" in line]
    assert [w.split(": ")[2] for w in warned] == ["commands", "images", "hardware"], warned
    assert all(w.startswith("warning: matrix.yaml:") for w in warned), warned
    text = output.read_text(encoding="utf-8").replace("    commands: []", "    commands:\n      - [x]")
    output.write_text(text.replace("images: {}", "images: {}  # none yet"), encoding="utf-8")
    assert cli.main(["--matrix", str(output), "plan"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "init's placeholder" in line]
    assert [w.split(": ")[2] for w in warned] == ["images", "hardware"], warned  # commands filled in
