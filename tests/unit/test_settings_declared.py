"""Every environment variable the toolkit reads or writes is declared in `release/settings.py` and
read or written there only: no other module of `release/` asks `os.environ` or `os.getenv` for a
variable, sets one, or reads a test hook (`PYTEST_CURRENT_TEST`). Handing the whole environment on
to a child (`{**os.environ, ...}`, `settings.environment()`) is no read of a variable.

What is checked, beside the direct reads: `os.environ` outside settings.py appears only unpacked
into a dict display (`{**os.environ, ...}`); any other use (an alias `env = os.environ`, `dict(...)`,
`.copy()`, `.items()`, passing it on as an argument) is a read, because from there a variable is read
under another name. And a name bound to such a dict display is not read by a constant name in the
same function (`env = {**os.environ}; env.get("X")`). A parameter a caller filled from the
environment is not followed (that would take a type checker); `settings.raw(NAME, environ)` is how
a function reads one from a mapping it is given."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from release import settings

RELEASE = Path(__file__).resolve().parents[2] / "release"
HOME = RELEASE / "settings.py"
ENVIRON_METHODS = ("get", "pop", "setdefault", "update", "__getitem__")
READERS = frozenset({"raw", "text", "path", "number", "switch", "given", "setting"})


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and ast.unparse(node.value) == "os"


def reads(source: str) -> list[int]:
    """The lines where `source` reads or writes one variable of the environment itself."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            lines.append(node.lineno)  # os.environ["X"], read or written
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func
            on_environ = _is_environ(method.value) and method.attr in ENVIRON_METHODS
            on_os = ast.unparse(method.value) == "os" and method.attr in ("getenv", "putenv", "unsetenv")
            if on_environ or on_os:
                lines.append(node.lineno)
    return sorted(set(lines + aliases(source)))


def _scopes(tree: ast.AST) -> list[list[ast.AST]]:
    """The nodes of each function (and of the module) without those of the functions inside it."""
    found: list[list[ast.AST]] = []

    def collect(scope: ast.AST) -> None:
        nodes: list[ast.AST] = []
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                collect(node)
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
        found.append(nodes)

    collect(tree)
    return found


def aliases(source: str) -> list[int]:
    """The lines where `os.environ` is used other than unpacked into a dict display, and where a
    name bound to such a display is read by a constant name."""
    tree = ast.parse(source)
    unpacked = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values, strict=True)
        if key is None and _is_environ(value)
    }
    direct = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
    direct |= {
        id(node.func.value) for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in ENVIRON_METHODS
    }  # fmt: skip  (those `reads` names already)
    lines = [
        node.lineno for node in ast.walk(tree)
        if _is_environ(node) and id(node) not in unpacked and id(node) not in direct  # type: ignore[arg-type]
    ]  # fmt: skip
    for nodes in _scopes(tree):
        copies = {
            target.id
            for node in nodes
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            and any(id(v) in unpacked for v in node.value.values)
            for target in node.targets
            if isinstance(target, ast.Name)
        }  # fmt: skip
        for node in nodes:
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                on, key = node.value, node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                if node.func.attr not in ("get", "setdefault"):  # pop: a child's, removed
                    continue
                on, key = node.func.value, node.args[0]
            elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
                on, key = node.comparators[0], node.left
            else:
                continue
            if isinstance(on, ast.Name) and on.id in copies and isinstance(key, ast.Constant):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize(
    "code",
    [
        'os.environ.get("SOURCE_DATE_EPOCH")',
        'value = os.environ["GH_TOKEN"]',
        'os.environ["SOURCE_DATE_EPOCH"] = epoch',
        "os.environ.pop(name, None)",
        'os.getenv("XDG_CACHE_HOME", "~/.cache")',
    ],
)
def test_the_rule_sees_a_read_or_a_write(code: str) -> None:
    assert reads(code) == [1]


@pytest.mark.parametrize(
    "code",
    [
        'env = os.environ\nenv.get("SOURCE_DATE_EPOCH")',
        "env = dict(os.environ)",
        "env = os.environ.copy()",
        'cibw = [k for k, v in os.environ.items() if k.startswith("CIBW_")]',
        "credentials = Credentials.from_env(os.environ)",
        'env = os.environ if env is None else env\nenv.get("GITHUB_REF_NAME")',
    ],
)
def test_the_rule_sees_an_alias_of_the_environment(code: str) -> None:
    assert reads(code) == [1]


@pytest.mark.parametrize(
    "code",
    [
        'def f():\n    env = {**os.environ, "X": "1"}\n    return env.get("PIP_CONSTRAINT")',
        'def f():\n    env = {**os.environ}\n    return env["GH_TOKEN"]',
        'def f():\n    env = {**os.environ}\n    if "CI" in env:\n        pass',
    ],
)
def test_the_rule_sees_a_read_of_a_copy(code: str) -> None:
    assert reads(code) != []


def test_handing_the_environment_on_is_no_read() -> None:
    code = (
        'env = {**os.environ, "PATH": tools}\nenv["SOURCE_DATE_EPOCH"] = epoch\n'
        "child = settings.environment()\nrun(argv, env={**os.environ})\n"
        'def f(env):\n    return env.get("PATH")'
    )
    assert reads(code) == []


def test_no_module_but_settings_reads_or_writes_a_variable() -> None:
    hits = [
        f"{path.relative_to(RELEASE.parent)}:{line}"
        for path in sorted(RELEASE.rglob("*.py"))
        if path != HOME
        for line in reads(path.read_text(encoding="utf-8"))
    ]
    assert hits == []
    assert reads(HOME.read_text(encoding="utf-8")), "the rule must see settings.py's own reads"


def test_no_test_hook_is_read_in_product_code() -> None:
    assert [p for p in RELEASE.rglob("*.py") if "PYTEST_CURRENT_TEST" in p.read_text(encoding="utf-8")] == []


def test_every_name_asked_of_settings_is_declared() -> None:
    """`settings.raw("X")` (and its siblings) with a name that is not declared would fail at run
    time; here it fails at once."""
    asked = set()
    for path in sorted(RELEASE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and ast.unparse(node.func.value) == "settings" and node.func.attr in READERS
                and node.args and isinstance(node.args[0], ast.Constant)
            ):  # fmt: skip
                asked.add(str(node.args[0].value))
    declared = {s.name for s in settings.SETTINGS}
    assert asked - declared == set()
    assert {"SOURCE_DATE_EPOCH", "GH_TOKEN", "GITHUB_TOKEN", "GITHUB_RUN_ID", "PIP_CONSTRAINT"} <= asked


def test_a_written_setting_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    with settings.given("SOURCE_DATE_EPOCH", "315532800"):
        assert settings.raw("SOURCE_DATE_EPOCH") == "315532800"
    assert settings.raw("SOURCE_DATE_EPOCH") == ""
    with pytest.raises(KeyError):
        settings.given("NOT_DECLARED", "1").__enter__()
