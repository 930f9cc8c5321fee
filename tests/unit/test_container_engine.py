"""The container engine is one value with one lifecycle, in `release/machine/containers.py`: no
other module spells an engine subcommand, and no signature takes the engine as a bare string."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from release import process
from release.machine import containers
from release.machine.containers import Container, ContainerEngine

RELEASE = Path(__file__).resolve().parents[2] / "release"
MACHINE = RELEASE / "machine"

SUBCOMMANDS = frozenset({
    "run", "exec", "cp", "rm", "rmi", "image", "images", "inspect", "exists", "pull", "push", "tag",
    "commit", "build", "create", "start", "stop", "kill", "import", "export", "save", "load", "system",
    "info", "ps", "logs", "container", "volume", "network", "manifest", "buildx",
})  # fmt: skip
"""Every engine subcommand (and subcommand group) that podman and docker share."""


def _engine_like(node: ast.expr) -> bool:
    """A word that names a container engine: "podman"/"docker" (or a path to one), or a name or
    attribute that says engine (`engine`, `self.engine`, `ENGINE`, `podman_path`)."""
    if isinstance(node, ast.Starred):
        return _engine_like(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return Path(node.value).name in ("podman", "docker")
    if not isinstance(node, ast.Name | ast.Attribute):
        return False
    name = ast.unparse(node).lower()  # `self.engine.command` says engine too
    return any(word in name for word in ("engine", "podman", "docker"))


def _subcommand(node: ast.expr | None = None) -> bool:
    return isinstance(node, ast.Constant) and node.value in SUBCOMMANDS


def spelled(source: str) -> list[int]:
    """The lines of `source` where an argument list puts an engine subcommand after the engine:
    a list or tuple display, or a call's positional arguments (`[engine, "image", "inspect"]`,
    `("podman", "rm", "-f", name)`, `run(engine, "pull", ref)`), or a call of a method of the
    engine with a subcommand first (`engine.argv("rmi", old)`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        words: list[ast.expr] = []
        if isinstance(node, ast.List | ast.Tuple):
            words = list(node.elts)
        elif isinstance(node, ast.Call):
            words = list(node.args)
            method = node.func
            if isinstance(method, ast.Attribute) and _engine_like(method.value) and _subcommand(*words[:1]):
                lines.append(node.lineno)
                continue
        if any(_engine_like(a) and _subcommand(b) for a, b in itertools.pairwise(words)):
            lines.append(node.lineno)
    return sorted(set(lines))


def _outside_machine() -> Iterator[Path]:
    return (p for p in sorted(RELEASE.rglob("*.py")) if not p.is_relative_to(MACHINE))


@pytest.mark.parametrize(
    "code",
    [
        'process.run([engine, "image", "inspect", "--format", "{{.Id}}", tag], timeout=60)',
        'process.run(["podman", "rm", "-f", name], timeout=120)',
        'argv = [self.engine, "exec", "-w", str(workdir)]',
        'proc = process.start(("/usr/bin/docker", "system", "service"), stdout=log)',
        'process.run([*ENGINE_ARGV, "save", tag])',
        'run_engine(podman, "pull", reference)',
        'engine.argv("rmi", old)',
    ],
)
def test_the_rule_sees_a_subcommand_however_it_is_spelled(code: str) -> None:
    assert spelled(code) == [1]


@pytest.mark.parametrize(
    "code",
    [
        'process.run(["git", "tag", "-l"], timeout=60)',
        'engine.run_script(image, "getconf GNU_LIBC_VERSION")',
        'argv = [sys.executable, "-m", "pip", "install"]',
        'say(f"{engine} image {tag}")',
    ],
)
def test_the_rule_leaves_other_programs_alone(code: str) -> None:
    assert spelled(code) == []


def test_no_module_outside_machine_spells_an_engine_subcommand() -> None:
    hits = [
        f"{path.relative_to(RELEASE.parent)}:{line}"
        for path in _outside_machine()
        for line in spelled(path.read_text(encoding="utf-8"))
    ]
    assert hits == []
    assert spelled((MACHINE / "containers.py").read_text(encoding="utf-8")), "the rule must see the home"


def test_the_image_id_query_is_spelled_once() -> None:
    """`image inspect --format {{.Id}}` is `ContainerEngine.image_id`, and nothing else asks it."""
    places = [
        f"{path.relative_to(RELEASE.parent)}:{node.lineno}"
        for path in sorted(RELEASE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value == "{{.Id}}"
    ]
    assert len(places) == 1 and places[0].startswith("release/machine/containers.py:"), places


def test_the_engine_is_no_bare_string_in_a_signature() -> None:
    """Every parameter named like an engine is annotated `ContainerEngine` (or a callable giving
    one), never `str`."""
    bare = []
    for path in sorted(RELEASE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for argument in arguments:
                annotation = ast.unparse(argument.annotation) if argument.annotation else ""
                if "engine" in argument.arg and "str" in annotation.split(" | "):
                    where = f"{path.relative_to(RELEASE.parent)}:{node.lineno}"
                    bare.append(f"{where} {argument.arg}: {annotation}")
    assert bare == []


def test_cibuildwheel_is_given_the_engine_the_network_and_the_mounts_in_one_string() -> None:
    engine = ContainerEngine("/usr/bin/podman")
    assert engine.cibuildwheel() == "podman; create_args: --network=host"
    spelled_ = engine.cibuildwheel([(Path("/c c"), "/ccache"), (Path("/links"), "/find-links:ro")])
    assert spelled_ == (
        "podman; create_args: --network=host '--volume=/c c:/ccache' --volume=/links:/find-links:ro"
    )


@pytest.mark.parametrize(
    ("command", "variable", "remote"),
    [
        ("podman", "CONTAINER_HOST", True),
        ("podman", "DOCKER_HOST", False),
        ("/usr/bin/docker", "DOCKER_HOST", True),
    ],
)
def test_a_remote_engine_is_the_engines_own_variable(command: str, variable: str, remote: bool) -> None:
    found = ContainerEngine(command).remote({variable: "unix:///run/x.sock"})
    assert found == (f"{variable}=unix:///run/x.sock" if remote else None)


def test_one_lifecycle_start_exec_remove(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The engine starts the container, the container runs commands and goes: every argv from here."""
    ran: list[list[str]] = []

    def engine(argv: list[str], **_options: object) -> process.Result:
        ran.append(list(argv))
        return process.Result(tuple(argv), 0, "", "")

    monkeypatch.setattr(containers.process, "run", engine)
    box = ContainerEngine("docker").start("img", "box-1", mounts=[(tmp_path, True)], flags=["--ipc=host"])
    assert box == Container(ContainerEngine("docker"), "img", "box-1")
    box.exec(["true"], env={"A": "1"})
    box.remove()
    assert ran == [
        ["docker", "run", "-d", "--rm", "--network=host", "--name", "box-1", "--ipc=host",
         "-v", f"{tmp_path}:{tmp_path}", "--entrypoint", "/bin/sh", "img", "-c", "sleep 86400"],
        ["docker", "exec", "-e", "A=1", "box-1", "true"],
        ["docker", "rm", "-f", "box-1"],
    ]  # fmt: skip
