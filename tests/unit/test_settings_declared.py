"""Every environment variable the toolkit reads or writes is declared in `release/settings.py` and
read or written there only: no other module of `release/` asks `os.environ` or `os.getenv` for a
variable, sets one, or reads a test hook (`PYTEST_CURRENT_TEST`). Handing the whole environment on
to a child (`{**os.environ, ...}`) is no read of a variable."""

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
    return sorted(set(lines))


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


def test_handing_the_environment_on_is_no_read() -> None:
    assert reads('env = {**os.environ, "PATH": tools}\nchild = dict(os.environ)') == []


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
