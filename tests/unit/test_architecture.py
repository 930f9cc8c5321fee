"""The layout shows the flow: dependencies point one way, each fact is parsed in one place."""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.layers import LAYERS, layer_of, top_level_names

RELEASE = Path(__file__).resolve().parents[2] / "release"
STAGES, INSPECTION = layer_of("build"), layer_of("inspect")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(RELEASE.rglob("*.py")):
        parts = list(path.relative_to(RELEASE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {m for m in _imports(path) if m in modules and m != name and not m.endswith("__init__")}
        for name, path in modules.items()
    }


def _top(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _layer(module: str) -> int:
    """The layer of a module's package; -1 for `release` itself."""
    return layer_of(_top(module))


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for a, targets in _graph().items():
        graph.setdefault(_top(a), set()).update(_top(b) for b in targets if _top(b) not in ("", _top(a)))
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_package_is_in_the_layer_map() -> None:
    """A new package or top-level module under `release/` gets a place in `release.layers.LAYERS`."""
    placed = [name for _, names in LAYERS for name in names]
    assert len(placed) == len(set(placed)), "a package is in two layers"
    assert [n for n in top_level_names() if n not in placed] == []
    assert [n for n in placed if n not in top_level_names()] == [], "LAYERS names a package that is gone"


def test_a_missing_package_is_caught(tmp_path: Path) -> None:
    (tmp_path / "newstage").mkdir()
    (tmp_path / "newstage" / "__init__.py").write_text('"""A stage."""\n', encoding="utf-8")
    (tmp_path / "errors.py").write_text("", encoding="utf-8")
    (tmp_path / "templates").mkdir()
    assert top_level_names(tmp_path) == ["errors", "newstage"]
    assert layer_of("newstage") == -1


def test_no_package_cycles() -> None:
    """Packages form a graph without cycles, within a layer too (`publish` -> `inspect` ->
    `variants` -> `publish` was one; what both needed moved down to `release.wheel`)."""
    graph = _package_graph()
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph) or [])
    assert _find_cycle({"publish": {"inspect"}, "inspect": {"variants"}, "variants": {"publish"}}) == [
        "inspect", "variants", "publish", "inspect",
    ]  # fmt: skip


def test_no_import_cycles() -> None:
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_dependencies_point_from_commands_to_stages_to_plan_to_configuration() -> None:
    wrong = [
        f"{a} imports {b}"
        for a, targets in _graph().items()
        for b in targets
        if _layer(a) >= 0 and _layer(b) >= 0 and _layer(b) < _layer(a)
    ]
    assert wrong == []


def test_no_stage_imports_another_stage() -> None:
    """Stages stand on the machine (`release/machine/`), not on each other: what two stages share
    moves down; only the orchestrators (`rehearse`, `reproduce`) run other stages."""
    stages = set(dict(LAYERS)["stages"])
    crossing = sorted(
        f"{a} imports {b}" for a, targets in _package_graph().items() if a in stages
        for b in targets if b in stages and b != a
    )  # fmt: skip
    assert crossing == []
    assert set(dict(LAYERS)["orchestrators"]) == {"rehearse", "reproduce"}


def test_no_package_is_named_like_build_output() -> None:
    """No directory of `release/` is named `build` (or `dist`): tools and readers skip such names."""
    output = ("build", "dist", "out", "target")
    named = [p.name for p in RELEASE.iterdir() if p.name in output and any(p.glob("*.py"))]
    assert named == []


def test_no_module_over_500_lines() -> None:
    long = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in _modules().items()}
    assert {n: c for n, c in long.items() if c > 500} == {}


def _code_strings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {  # every bare string statement: docstrings, attribute docstrings
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value
        if isinstance(node, ast.Name | ast.Attribute):
            yield node.id if isinstance(node, ast.Name) else node.attr


@pytest.mark.parametrize(
    ("needle", "home"),
    [
        (".dist-info/", "release/wheel/archive.py"),
        ("parse_wheel_filename", "release/wheel/names.py"),
        (".verify.json", "release/wheel/names.py"),
        ("InvalidWheelFilename", "release/wheel/names.py"),
        ("HeaderParser", "release/wheel/archive.py"),
    ],
)
def test_each_wheel_fact_is_read_in_one_place(needle: str, home: str) -> None:
    """METADATA, the file name and the report suffix each have one reader."""
    places = sorted(
        str(p.relative_to(RELEASE.parent))
        for p in _modules().values()
        if any(needle in s for s in _code_strings(p))
    )
    assert places == [home]


def test_executors_take_steps_not_a_matrix_and_a_name() -> None:
    """No stage or command looks a variant up by name in the matrix (`loaded.variant(name)`):
    only the plan resolves, and commands ask the plan (`plan.variant(name)`)."""
    offenders = [
        name
        for name, path in _modules().items()
        if (_layer(name) in (STAGES, INSPECTION) and ".variant(" in path.read_text(encoding="utf-8"))
        or (_layer(name) == 0 and "loaded.variant(" in path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def _source_hits(pattern: str, *, home: str | None = None) -> list[str]:
    """`module:line` of every line of `release/` that matches `pattern`, outside `home`."""
    compiled = re.compile(pattern)
    return [
        f"{name}:{number}"
        for name, path in _modules().items()
        if home is None or str(path.relative_to(RELEASE.parent)) != home
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if compiled.search(line)
    ]


def test_the_python_tag_is_spelled_in_one_place() -> None:
    """'3.12' -> 'cp312' is `release.wheel.names.python_tag`; steps carry it as `python_tag`."""
    assert _source_hits(r"""["']cp["']\s*\+|f["']cp\{|["']cp%""", home="release/wheel/names.py") == []


def test_wheel_tags_are_split_in_one_place() -> None:
    """`interpreter-abi-platform` and the file name's fields are split by `release.wheel.names`."""
    home = "release/wheel/names.py"
    assert _source_hits(r"""split\(\s*["']-["']|partition\(\s*["']-["']\s*\)\[""", home=home) == []
    assert _source_hits(r"""\[:-4\]|removesuffix\(\s*["']\.whl["']""", home=home) == []


def test_the_platform_floor_is_parsed_in_one_place() -> None:
    """`manylinux_2_28_x86_64` is taken apart by `parse_platform_tag` (and matched by `FLOOR`)."""
    assert _source_hits(r"""floor\w*\.split\(|floor\w*\.count\(""") == []


def test_ci_is_read_in_one_place() -> None:
    """`CI`, `GITHUB_ACTIONS`, `GITHUB_REPOSITORY` and `PYENV_ROOT` are read by `release.settings`
    only: the toolkit, noxfile.py and the test suite (its conftest included) ask `in_ci()`,
    `pyenv_root()` or a flag declared with `settings.argument`, so they cannot disagree."""
    reading = re.compile(
        r"""(environ\.get\(|environ\[|getenv\()\s*["'](CI|GITHUB_ACTIONS|GITHUB_REPOSITORY|PYENV_ROOT)["']"""
    )
    home = RELEASE / "settings.py"
    files = [*RELEASE.rglob("*.py"), *(RELEASE.parent / "tests").rglob("*.py"), RELEASE.parent / "noxfile.py"]
    hits = [
        f"{path.relative_to(RELEASE.parent)}:{number}"
        for path in files
        if path != home and path.is_file()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if reading.search(line)
    ]
    assert hits == []
    assert not (RELEASE / "environment.py").exists(), "settings.py absorbed environment.py"


def test_runtime_globs_are_decided_in_one_place() -> None:
    """A backend's runtime libraries are read from its data by `release.config` only (the loader
    validates them; `runtime_globs` and `known_runtime_globs` combine them), never as raw JSON."""
    uses = [
        name
        for name, path in _modules().items()
        if not name.startswith("release.config.") and "runtime_libraries" in set(_code_strings(path))
    ]
    assert uses == []


def test_one_elf_reader() -> None:
    """ELF files are read by `release.inspect.elf` (verify's bounded reader), smoke included."""
    assert [n for n, p in _modules().items() if any(m.startswith("elftools") for m in _imports(p))] == []


ZIPFILE_PENDING: set[str] = set()
"""Modules still reading with zipfile outside `release.wheel` (none)."""


def test_zip_archives_are_opened_in_wheel_only() -> None:
    """`zipfile.ZipFile` is used by `release.wheel` only: untrusted wheels go through its bounded
    reader, our own output through `release.wheel.own` and `release.wheel.rewrite`.
    Commands have no exemption."""
    zip_file = re.compile(r"\bZipFile\b")
    opened = sorted(
        name
        for name, path in _modules().items()
        if not name.startswith("release.wheel.") and zip_file.search(path.read_text(encoding="utf-8"))
    )
    assert [n for n in opened if n not in ZIPFILE_PENDING] == []


@pytest.mark.parametrize(
    ("cls", "home"), [("ResolvedVariant", "release.plan.resolve"), ("BuildStep", "release.plan.steps")]
)
def test_every_resolved_fact_is_read_somewhere(cls: str, home: str) -> None:
    """A fact the plan carries is one a stage reads: an unread field is a second, stale source."""
    tree = ast.parse(_modules()[home].read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    fields = [
        n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    ] + [n.name for n in node.body if isinstance(n, ast.FunctionDef)]
    read = {
        n.attr
        for name, path in _modules().items()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.Attribute) and not (name == home and isinstance(n.ctx, ast.Store))
    }
    assert [f for f in fields if f not in read and not f.startswith("_")] == []


def test_the_linter_reads_every_toolkit_module() -> None:
    """`nox -s lint` runs ruff over the whole toolkit. Ruff reads an exclude pattern without a slash
    as a name to match anywhere in the tree: "build" hid release/build/ as well as the build output."""
    import tomlkit

    config = tomlkit.parse((RELEASE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    ruff = config["tool"]["ruff"]
    patterns = [str(p) for p in [*ruff.get("exclude", []), *ruff.get("extend-exclude", [])]]
    names = {part for path in RELEASE.rglob("*.py") for part in path.relative_to(RELEASE.parent).parts}
    hidden = sorted((p, n) for p in patterns if "/" not in p for n in names if fnmatch.fnmatch(n, p))
    assert not hidden, f"pyproject.toml's ruff exclude hides toolkit modules (pattern, name): {hidden}"


def test_every_toolkit_import_in_the_tree_names_a_module_that_exists() -> None:
    """A module that moved (`release.environment` into `release.settings`, `release.build` into
    `release.builder` and `release.machine`) leaves no import behind, in the toolkit or in any
    test tier (the integration tier's imports run only where its tests do)."""
    import importlib.util

    root = RELEASE.parent
    files = [*RELEASE.rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]
    missing = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = node.module or "" if isinstance(node, ast.ImportFrom) and node.level == 0 else ""
            if module.split(".")[0] == "release":
                if importlib.util.find_spec(module) is None:
                    missing.append(f"{path.relative_to(root)}:{node.lineno}: {module}")
                    continue
                assert isinstance(node, ast.ImportFrom)
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    package = importlib.util.find_spec(module)
                    if package is not None and package.submodule_search_locations and not hasattr(
                        importlib.import_module(module), alias.name
                    ) and importlib.util.find_spec(sub) is None:
                        missing.append(f"{path.relative_to(root)}:{node.lineno}: {sub}")
    assert missing == []


def namespace_mentions(source: str) -> list[int]:
    """The lines where `source` names argparse's Namespace (`argparse.Namespace`, or `Namespace`
    imported from argparse)."""
    tree = ast.parse(source)
    imported = {
        a.asname or a.name for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "argparse" for a in node.names
        if a.name == "Namespace"
    }  # fmt: skip
    lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "argparse" and any(a.name == "Namespace" for a in node.names)]  # fmt: skip
    lines += [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in imported]
    # a string annotation ("argparse.Namespace") too: the text, not the tree
    lines += [n for n, line in enumerate(source.splitlines(), 1) if "argparse.Namespace" in line]
    return sorted(set(lines))


@pytest.mark.parametrize(
    "code",
    [
        "def leg(args: argparse.Namespace) -> None: ...",
        'def leg(args: "argparse.Namespace") -> None: ...',
        "from argparse import Namespace as N",
    ],
)
def test_the_namespace_rule_sees_one(code: str) -> None:
    assert namespace_mentions(code) == [1]


def test_no_namespace_enters_a_stage() -> None:
    """The flags stop at the command: a stage takes a record of what it needs (`PairOptions`), so
    it can be called without a command line and its inputs are named."""
    home = {RELEASE / "cli.py"}
    found = [
        f"{path.relative_to(RELEASE.parent)}:{line}"
        for path in sorted(RELEASE.rglob("*.py"))
        if path not in home and "commands" not in path.relative_to(RELEASE).parts
        for line in namespace_mentions(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def command_imports(graph: dict[str, set[str]]) -> list[str]:
    """`a imports b` for each command module (`release.commands.*`, one per command of `cli.COMMANDS`)
    that imports another: what two commands share lives in the stage, plan or machine packages, not
    in one of them. `release.flags` (the shared flags, declared once) is no command."""
    from release.cli import COMMANDS

    commands = {f"release.commands.{module}" for module, _help in COMMANDS.values()}

    def is_command(name: str) -> bool:
        return name in commands

    return sorted(f"{a} imports {b}" for a, targets in graph.items() if is_command(a)
                  for b in targets if is_command(b) and b != a)  # fmt: skip


def test_the_command_rule_sees_one() -> None:
    planted = {"release.commands.build": {"release.commands.plan", "release.plan.steps"}}
    assert command_imports(planted) == ["release.commands.build imports release.commands.plan"]


def test_no_command_imports_another_command() -> None:
    assert command_imports(_graph()) == []
    assert "release.flags" in _graph()["release.commands.build"], "the flags are shared, not a command"
