"""Staging honours the project's `.gitignore` files and never copies a requirement source the
matrix names (issue 43: a find_links directory of 2.9 GB beside the matrix went into every build)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from release.builder.gitignore import GitIgnore, parse
from release.builder.stage import _ignore, require_test_source, stage_project
from release.config.matrix import load
from release.errors import BuildError
from release.plan.resolve import RequirementSource
from release.plan.steps import make_plan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("lines", "path", "is_dir", "ignored"),
    [
        ("*.whl", "deps/torch-2.9.whl", False, True),
        ("*.whl", "a.whl.txt", False, False),
        ("/deps/", "deps", True, True),
        ("/deps/", "src/deps", True, False),  # anchored at the file's directory
        ("deps/", "deps", False, False),  # directories only
        ("deps", "src/deps", True, True),  # no slash: any depth
        ("src/*.o", "src/x.o", False, True),
        ("src/*.o", "src/sub/x.o", False, False),  # `*` stops at a slash
        ("src/**/*.o", "src/sub/deep/x.o", False, True),
        ("**/cache", "a/b/cache", True, True),
        ("logs/**", "logs/today/x", False, True),
        ("*.log\n!keep.log", "keep.log", False, False),  # a later `!` re-includes
        ("!keep.log\n*.log", "keep.log", False, True),  # the later rule wins
        ("# *.py\n\n", "x.py", False, False),  # a comment, not a pattern
        ("\\#name", "#name", False, True),
        ("data[0-9].bin", "data7.bin", False, True),
        ("data[!0-9].bin", "data7.bin", False, False),
        ("v?.txt", "v1.txt", False, True),
    ],
)
def test_gitignore_patterns(tmp_path: Path, lines: str, path: str, is_dir: bool, ignored: bool) -> None:
    (tmp_path / ".gitignore").write_text(lines + "\n", encoding="utf-8")
    assert GitIgnore(tmp_path).ignored(path, is_dir=is_dir) is ignored


def test_a_nested_gitignore_applies_below_its_directory(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / ".gitignore").write_text("*.tmp\n", encoding="utf-8")
    (tmp_path / "src" / ".gitignore").write_text("/gen/\n!keep.tmp\n", encoding="utf-8")
    gitignore = GitIgnore(tmp_path)
    assert gitignore.ignored("src/gen", is_dir=True)
    assert not gitignore.ignored("gen", is_dir=True)
    assert gitignore.ignored("src/x.tmp", is_dir=False) and gitignore.ignored("x.tmp", is_dir=False)
    assert not gitignore.ignored("src/keep.tmp", is_dir=False)


def test_a_huge_gitignore_is_read_up_to_a_bound() -> None:
    assert len(parse("x\n" * 50_000)) == 10_000


def _project(tmp_path: Path) -> Path:
    source = tmp_path / "engine"
    (source / "src" / "mylib").mkdir(parents=True)
    (source / "pyproject.toml").write_text('[project]\nname = "mylib"\nversion = "0.1"\n', encoding="utf-8")
    (source / "src" / "mylib" / "__init__.py").write_text("", encoding="utf-8")
    (source / ".gitignore").write_text("/scratch/\n*.log\n", encoding="utf-8")
    for name in ("scratch/big.bin", "deps/torch-2.9.0-cp312-none-any.whl", "build.log", "src/mylib/x.log"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(b"x")
    return source


def test_staging_leaves_out_what_gitignore_ignores_and_the_requirement_source(tmp_path: Path) -> None:
    source = _project(tmp_path)
    dest = tmp_path / "staged"
    shutil.copytree(source, dest, ignore=_ignore(source, (source / "deps",)))
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert copied == [".gitignore", "pyproject.toml", "src/mylib/__init__.py"]


def test_stage_project_skips_the_matrix_s_find_links_directory(tmp_path: Path) -> None:
    """The whole path through a resolved variant: find_links comes from the matrix."""
    source = _project(tmp_path)
    variant = make_plan(load(ROOT / "matrix.yaml")).variant("cpu")
    variant = dataclasses.replace(
        variant,
        engine_dir=source,
        smoke_requirements=RequirementSource(find_links=source / "deps"),
        build_requires={},
    )
    staged = stage_project(variant, "0.1.0", tmp_path / "staged")
    assert not (staged / "deps").exists() and not (staged / "scratch").exists()
    assert (staged / "src" / "mylib" / "__init__.py").is_file()


def test_a_container_build_whose_requirements_have_no_source_stops_before_compiling(tmp_path: Path) -> None:
    """The import test asks no index unless the matrix names one (issue 43: it downloaded 2.9 GB
    of torch for every build): declared dependencies with no source and no skip stop in one line."""
    staged = tmp_path / "staged"
    staged.mkdir()
    staged.joinpath("pyproject.toml").write_text(
        '[project]\nname = "mylib"\nversion = "0.1"\ndependencies = ["torch>=2.0", "numpy"]\n',
        encoding="utf-8",
    )
    variant = make_plan(load(ROOT / "matrix.yaml")).variant("cpu")
    with pytest.raises(BuildError) as caught:
        require_test_source(variant, staged)
    assert str(caught.value) == (
        "cpu: the engine requires torch>=2.0, numpy (pyproject.toml dependencies) and the import test asks "
        "no index unless the matrix names one: declare engine.smoke.requirements.index_url or .find_links, "
        "or leave them out with .skip"
    )
    skipping = dataclasses.replace(variant, smoke_requirements=RequirementSource(skip=("torch", "NumPy")))
    require_test_source(skipping, staged)  # both left out: nothing to install
    indexed = dataclasses.replace(
        variant, smoke_requirements=RequirementSource(index_url="https://pypi.org/simple")
    )
    require_test_source(indexed, staged)
