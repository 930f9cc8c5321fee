"""Supported Pythons are data: `release/config/pythons.json`, one line per CPython version. Adding
3.14 is turning its line `newer` into `supported`; every check, list and message follows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from release.config import pythons
from release.config.matrix import loads
from release.errors import MatrixError
from release.init.scaffold import pythons_allowed

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"


def _matrix_text(*versions: str) -> str:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["python"] = list(versions)
    return yaml.safe_dump(data, sort_keys=False)


def test_the_packaged_table() -> None:
    assert pythons.supported_pythons() == ("3.10", "3.11", "3.12", "3.13", "3.14")
    assert pythons.newer_pythons() == ("3.15",)
    assert pythons.supported_range() == "3.10-3.14"


def test_adding_a_python_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = pythons.PYTHONS_FILE.read_text(encoding="utf-8")
    with pytest.raises(MatrixError, match=r"'3\.15' is not supported"):
        loads(_matrix_text("3.14", "3.15"), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    edited = text.replace('"3.15": "newer"', '"3.15": "supported"')
    changed = [(a, b) for a, b in zip(text.splitlines(), edited.splitlines(), strict=True) if a != b]
    assert len(changed) == 1
    table = tmp_path / "pythons.json"
    table.write_text(edited, encoding="utf-8")
    monkeypatch.setattr(pythons, "PYTHONS_FILE", table)
    assert pythons.supported_pythons()[-1] == "3.15"
    assert pythons.newer_pythons() == ()
    loaded = loads(_matrix_text("3.14", "3.15"), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    assert loaded.matrix.python == ("3.14", "3.15")
    assert pythons_allowed(">=3.13", pythons.supported_pythons()) == ("3.13", "3.14", "3.15")
    assert pythons.supported_range() == "3.10-3.15"


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('{\n  "3.10": "supported",\n  "3.11": "maybe"\n}\n', 3, "is not one of 'supported', 'newer'"),
        ('{\n  "3.10": "supported",\n  "python3.11": "newer"\n}\n', 3, "like '3.13'"),
        ('{\n  "3.11": "supported",\n  "3.10": "supported"\n}\n', 1, "oldest first"),
    ],
)
def test_a_bad_table_is_named_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, line: int, says: str
) -> None:
    table = tmp_path / "pythons.json"
    table.write_text(text, encoding="utf-8")
    monkeypatch.setattr(pythons, "PYTHONS_FILE", table)
    with pytest.raises(MatrixError) as caught:
        pythons.known_pythons()
    (problem,) = caught.value.problems
    assert (problem.file, problem.line) == (str(table), line)
    assert says in problem.message


def test_no_python_list_is_written_in_code() -> None:
    """Every list of CPython versions comes from pythons.json (docstrings and examples aside)."""
    listing = re.compile(r"""\(\s*["']3\.1\d["']\s*,\s*["']3\.1\d["']""")
    for path in sorted((ROOT / "release").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not listing.search(text), f"{path.relative_to(ROOT)} writes a list of Python versions"
