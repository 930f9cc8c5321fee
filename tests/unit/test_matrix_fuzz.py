"""Whatever the YAML, loading gives a matrix or a clean `MatrixError`, and the CLI exits 0 or 3.

Four sources of documents: random nested structures, random edits of the real matrix (keys
deleted, values swapped for other types, unknown keys inserted, keys misspelt), random text,
including line-level edits of the real file, and random YAML merge keys (`<<`) in the real file.
A failure prints one `error:` line, then one line per further problem: no key or value forges
a line of its own.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from release import cli
from release.config import matrix
from release.errors import MatrixError

ROOT = Path(__file__).resolve().parents[2]
REAL_TEXT = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
REAL: dict[str, Any] = yaml.safe_load(REAL_TEXT)
REAL_JSON = json.dumps(REAL)  # a fast deep copy: the matrix holds only JSON types



def fuzz(examples: int) -> Any:
    """Hypothesis settings: no deadline, no example database written into the repository."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _field_names() -> list[str]:
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            names.update(str(k) for k in node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(REAL)
    return sorted(names)


FIELD_NAMES = _field_names()
text_chars = st.characters(exclude_categories=("Cs",))
keys = st.sampled_from(FIELD_NAMES) | st.text(text_chars, max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(text_chars, max_size=12)
    | st.sampled_from(["3.12", "3.9", "rocm", "cpu", "prefix", "libxfer*", "gfx942", "/opt/rocm/lib"])
)
TAGS = st.sampled_from(
    ["!foo", "!!int", "!!float", "!!bool", "!!null", "!!str", "!!timestamp", "!!binary", "!!set", "!!omap",
     "!!python/name:os.system", "&a", "*a", "<<:", "? "]
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=16,
)


class Fuzzer:
    """Runs `python -m release --matrix FILE plan` in-process and sees what `matrix.loads` did.

    One parse per example keeps the property fast: the CLI's own call of `loads` is observed, so
    an exception of any other type than `MatrixError` escapes `cli.main` and fails the example.
    Backend data and the argument parser are built once, as only matrix.yaml is fuzzed here.
    """

    def __init__(self, file: Path) -> None:
        self.file = file
        self.outcomes: list[object] = []

    def loads(self, text: str, **kwargs: Any) -> matrix.LoadedMatrix:
        try:
            result = REAL_LOADS(text, **kwargs)
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append(result)
        return result

    def check(self, text: str) -> None:
        """`loads` returns or raises MatrixError with located problems; the CLI exits 0 or 3, no traceback."""
        self.outcomes.clear()
        self.file.write_text(text, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["--matrix", str(self.file), "plan"])
        assert "Traceback" not in out.getvalue() + err.getvalue()
        assert len(self.outcomes) == 1
        outcome = self.outcomes[0]
        if isinstance(outcome, MatrixError):
            assert code == 3, err.getvalue()
            assert outcome.problems
            lines = err.getvalue().splitlines()
            assert len(lines) == len(outcome.problems), err.getvalue()
            assert lines[0].startswith("error: ")
            assert not any(line.startswith("error:") for line in lines[1:])
            max_line = len(text.splitlines()) + 1
            for problem in outcome.problems:
                assert problem.file == str(self.file)
                assert problem.line is None or 1 <= problem.line <= max_line, problem
                assert problem.message
                assert str(problem) in err.getvalue()
        else:
            assert isinstance(outcome, matrix.LoadedMatrix), outcome
            if code == 3:  # read, then refused by plan's own checks: the engine's project, its requires
                first = err.getvalue().splitlines()[0]
                assert first.startswith("error: "), err.getvalue()
                assert re.search(r": (engine\.source|variants\.\w+\.build_requires)", first), err.getvalue()
                return
            assert code == 0, err.getvalue()
            assert "build steps from matrix.yaml" in out.getvalue()


REAL_LOADS = matrix.loads


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzer]:
    result = Fuzzer(tmp_path_factory.mktemp("fuzz") / "matrix.yaml")
    (result.file.parent / "engine").symlink_to(ROOT / "engine")  # engine.source must hold the project
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(matrix, "load_backends", functools.lru_cache(maxsize=None)(matrix.load_backends))
        monkeypatch.setattr(cli, "build_parser", functools.lru_cache(maxsize=None)(cli.build_parser))
        monkeypatch.setattr(matrix, "loads", result.loads)
        yield result


def _dump(doc: object) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True)


def _paths(node: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into the document (dict keys and list indexes), the root included."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_paths(value, (*prefix, i)))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


@st.composite
def mutated_matrices(draw: st.DrawFn) -> str:
    doc: Any = json.loads(REAL_JSON)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["delete", "replace", "insert", "rename"]))
        if not path:
            if op == "replace":
                doc = draw(values)
            continue
        parent = _parent(doc, path)
        last = path[-1]
        if op == "delete":
            del parent[last]
        elif op == "replace":
            parent[last] = draw(values)
        elif op == "insert":
            target = parent[last]
            if isinstance(target, dict):
                target[draw(keys)] = draw(values)
            elif isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), draw(values))
            else:
                parent[last] = [target, draw(values)]
        elif isinstance(parent, dict):
            new_key = draw(keys | st.just(str(last)[:-1]) | st.just(str(last).upper()))
            parent[new_key] = parent.pop(last)
        else:
            parent[last] = {str(last): parent[last]}
    return _dump(doc)


@st.composite
def edited_text(draw: st.DrawFn) -> str:
    lines = REAL_TEXT.splitlines(keepends=True)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "indent", "dedent", "insert", "chars", "tag"]))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "indent":
            lines[i] = "  " + lines[i]
        elif op == "dedent":
            lines[i] = lines[i].removeprefix("  ")
        elif op == "tag":
            lines[i] = lines[i].replace(": ", f": {draw(TAGS)} ", 1)
        elif op == "insert":
            lines.insert(i, draw(st.text(text_chars, max_size=30)) + "\n")
        else:
            j = draw(st.integers(0, len(lines[i])))
            junk = draw(st.text(st.sampled_from(list(":-[]{},&*!|>'\"#%@` \t?\\0123.abc")), max_size=4))
            lines[i] = lines[i][:j] + junk + lines[i][j:]
    return "".join(lines)


_MAPPING_LINES = [
    i for i, line in enumerate(REAL_TEXT.splitlines()) if re.fullmatch(r"( *)[a-z][\w-]*:( *#.*)?", line)
]


@st.composite
def merged_matrices(draw: st.DrawFn) -> str:
    """The real matrix with an anchored value (`x-m: &m …`) merged into one of its mappings."""
    lines = REAL_TEXT.splitlines(keepends=True)
    merged = draw(st.dictionaries(keys, values, max_size=4) | values)
    at = draw(st.sampled_from(_MAPPING_LINES))
    child = lines[at + 1]
    indent = child[: len(child) - len(child.lstrip(" "))] or "  "
    reference = draw(st.sampled_from(["*m", "[*m]", "[*m, *m]", "[*m, {}]", "*m\n" + indent + "<<: *m"]))
    lines.insert(at + 1, f"{indent}<<: {reference}\n")
    return f"x-m: &m {json.dumps(merged)}\n" + "".join(lines)


@fuzz(150)
@given(doc=values)
def test_random_structures(doc: object, fuzzer: Fuzzer) -> None:
    fuzzer.check(_dump(doc))


@fuzz(100)  # a full parse of the real matrix each: the slow ones
@given(text=mutated_matrices())
def test_random_edits_of_the_real_matrix(text: str, fuzzer: Fuzzer) -> None:
    fuzzer.check(text)


@fuzz(100)
@given(text=edited_text() | st.text(text_chars, max_size=200))
def test_random_text(text: str, fuzzer: Fuzzer) -> None:
    fuzzer.check(text)


@fuzz(100)
@given(text=merged_matrices())
def test_random_merge_keys(text: str, fuzzer: Fuzzer) -> None:
    fuzzer.check(text)


def test_the_unedited_real_matrix_is_clean(fuzzer: Fuzzer) -> None:
    fuzzer.check(REAL_TEXT)
    fuzzer.check(_dump(REAL))


def test_the_fuzzer_sees_a_crash(fuzzer: Fuzzer, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(matrix, "check", crash)
    with pytest.raises(KeyError):
        fuzzer.check(REAL_TEXT)
