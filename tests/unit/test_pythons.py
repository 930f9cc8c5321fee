"""Supported Pythons are data: `release/config/pythons.json`, one row per CPython interpreter (a
version, or its free-threaded build `3.14t`). Each row becomes one frozen `Python` record, and every
room takes its tags and paths from it: adding 3.16 and 3.16t is two rows, and the plan, cibuildwheel's
selectors, the workflows' outputs and the local images' interpreter paths follow with no code change."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from cibuildwheel.selector import BuildSelector, EnableGroup

from release.builder import cibw
from release.commands.plan import github_outputs
from release.config import pythons
from release.config.matrix import loads
from release.errors import MatrixError
from release.init import workflows
from release.init.scaffold import pythons_allowed
from release.machine import imaging
from release.plan.github_only import github_only_line, split_github_only
from release.plan.steps import make_plan
from release.wheel.cpython import Python, parse_key, parse_tag
from release.wheel.names import manylinux_interpreter, parse_wheel_name, python_tag

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"


def _matrix_text(*versions: str) -> str:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / "engine")
    data["python"] = list(versions)
    return yaml.safe_dump(data, sort_keys=False)


def test_the_packaged_table() -> None:
    supported = ("3.10", "3.11", "3.12", "3.13", "3.14", "3.14t", "3.15", "3.15t")
    assert pythons.supported_pythons() == supported
    assert pythons.newer_pythons() == ()
    assert pythons.supported_range() == "3.10-3.15 and 3.14t-3.15t"
    assert pythons.newest(supported) == "3.15"  # a job's one Python: the newest GIL build


@pytest.mark.parametrize(
    ("key", "tags", "path", "loads_"),
    [
        ("3.12", ("cp312", "cp312", "cp312"), "/opt/python/cp312-cp312", ("abi3",)),
        ("3.14t", ("cp314t", "cp314", "cp314t"), "/opt/python/cp314-cp314t", ()),
        ("3.15", ("cp315", "cp315", "cp315"), "/opt/python/cp315-cp315", ("abi3",)),
        ("3.15t", ("cp315t", "cp315", "cp315t"), "/opt/python/cp315-cp315t", ("abi3t",)),
    ],
)
def test_a_python_is_a_record_with_its_tags_paths_and_stable_abis(
    key: str, tags: tuple[str, str, str], path: str, loads_: tuple[str, ...]
) -> None:
    """cibuildwheel's identifier and the plan say cp314t; the wheel's tag is cp314-cp314t (PEP 425's
    interpreter tag is the version's, the ABI tag says free-threaded); manylinux keeps it at
    /opt/python/cp314-cp314t; abi3 loads in GIL builds, abi3t (PEP 803) in free-threaded 3.15+."""
    record = pythons.python(key)
    assert (record.identifier_tag, record.interpreter_tag, record.abi_tag) == tags
    assert record.manylinux_path() == path == manylinux_interpreter(key).removesuffix("/bin/python")
    assert record.stable_abis == loads_
    assert record.key == key and python_tag(key) == tags[0]
    assert record.executable == f"python{key}"
    assert parse_tag(tags[0]) == Python(record.minor, record.free_threaded)


@pytest.mark.parametrize(
    "text", ["3.14T", "3.14tt", "python3.14", "3.١٤", "3.14 ", "3.14\n", "3.1234", "4.0"]
)
def test_text_that_names_no_cpython_is_no_record(text: str) -> None:
    assert parse_key(text) is None
    with pytest.raises(ValueError, match="is not a CPython version"):
        pythons.python(text)


def test_adding_a_python_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = pythons.PYTHONS_FILE.read_text(encoding="utf-8")
    with pytest.raises(MatrixError, match=r"'3\.16' is not supported"):
        loads(_matrix_text("3.15", "3.16"), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    edited = text.replace('"3.15t": "supported"\n', '"3.15t": "supported",\n  "3.16": "supported"\n')
    added = [line for line in edited.splitlines() if line not in text.splitlines()]
    assert added == ['  "3.15t": "supported",', '  "3.16": "supported"']  # a comma and the row
    table = tmp_path / "pythons.json"
    table.write_text(edited, encoding="utf-8")
    monkeypatch.setattr(pythons, "PYTHONS_FILE", table)
    assert pythons.supported_pythons()[-1] == "3.16"
    loaded = loads(_matrix_text("3.15", "3.16"), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    assert loaded.matrix.python == ("3.15", "3.16")
    assert pythons_allowed(">=3.13", pythons.supported_pythons()) == ("3.13", "3.14", "3.15", "3.16")
    assert pythons.supported_range() == "3.10-3.16 and 3.14t-3.15t"


def test_3_16_and_3_16t_are_two_rows_and_everything_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rows of a temporary pythons.json, no code changed: the plan has cp316 and cp316t steps;
    cibuildwheel's own selector builds each identifier and never the other; the release workflow's
    outputs carry them (its templates render unchanged); a build image keeps 3.16t at
    /opt/python/cp316-cp316t; and this machine, with no free-threaded CPython, calls the t steps
    GitHub-only in one line."""
    text = pythons.PYTHONS_FILE.read_text(encoding="utf-8")
    table = tmp_path / "pythons.json"
    edited = text.replace(
        '"3.15t": "supported"\n', '"3.15t": "supported",\n  "3.16": "supported",\n  "3.16t": "supported"\n'
    )
    table.write_text(edited, encoding="utf-8")
    before = workflows.rendered(ROOT, workflows.TOOLKIT_REPOSITORY)
    monkeypatch.setattr(pythons, "PYTHONS_FILE", table)
    (tmp_path / "engine").symlink_to(ROOT / "engine")
    loaded = loads(
        _matrix_text("3.15", "3.16", "3.16t"), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS
    )
    plan = make_plan(loaded)

    cpu = [s for s in plan.builds_of("cpu") if s.variant.floor.endswith("x86_64")]
    assert [s.identifier for s in cpu] == [
        "cp315-cpu-manylinux_x86_64", "cp316-cpu-manylinux_x86_64", "cp316t-cpu-manylinux_x86_64",
    ]  # fmt: skip
    options = cibw.cibuildwheel_options(tuple(cpu))
    assert options["build"] == "cp315-manylinux_x86_64 cp316-manylinux_x86_64 cp316t-manylinux_x86_64"
    assert "enable" not in options  # free-threaded 3.14+ builds by default; no deprecated group
    for step in cpu:
        alone = cibw.cibuildwheel_options((step,))["build"]
        # cibuildwheel 4.3 counts cp316 as a prerelease (its `enable` group); exactness is the point.
        selector = BuildSelector(build_config=alone, skip_config="", enable=frozenset(EnableGroup))
        chosen = {i for i in options["build"].split() if selector(i)}
        assert chosen == {alone}, f"{alone} also selects {chosen - {alone}}"

    outputs = github_outputs(plan, "release", tag="v0.1.0")
    assert {"python": "3.16t"} in json.loads(outputs["pythons"])["include"]
    built = {e["identifier"]: e for e in json.loads(outputs["build"])["include"]}
    assert built["cp316t-cuda-manylinux_aarch64"]["abi"] == "cp316t"
    assert workflows.rendered(ROOT, workflows.TOOLKIT_REPOSITORY) == before  # the workflows read the plan

    assert imaging._cp("3.16t") == "cp316-cp316t"
    assert manylinux_interpreter("3.16") == "/opt/python/cp316-cp316/bin/python"

    here, github = split_github_only(plan.builds, lambda _p: False)
    assert {s.python for s in github} == {"3.16t"} and all(not s.free_threaded for s in here)
    line = github_only_line(github)
    assert (
        line is not None
        and "\n" not in line
        and line.startswith("GitHub-only: 5 build steps of Python 3.16t")
    )


@pytest.mark.parametrize(
    ("wheel", "serves", "refuses"),
    [
        ("x-1-cp314-cp314-manylinux_2_28_x86_64.whl", {"3.14"}, {"3.14t", "3.15", "3.15t"}),
        ("x-1-cp314-cp314t-manylinux_2_28_x86_64.whl", {"3.14t"}, {"3.14", "3.15", "3.15t"}),
        ("x-1-cp312-abi3-manylinux_2_28_x86_64.whl", {"3.12", "3.14", "3.15"}, {"3.11", "3.14t", "3.15t"}),
        ("x-1-cp315-abi3.abi3t-manylinux_2_28_x86_64.whl", {"3.15", "3.15t"}, {"3.14", "3.14t"}),
    ],
)
def test_a_free_threaded_interpreter_gets_the_t_wheel_and_a_gil_one_never_does(
    wheel: str, serves: set[str], refuses: set[str]
) -> None:
    """What an installer picks, from packaging's tags of each interpreter: a GIL 3.14 never takes
    cp314t, 3.14t never takes cp314 nor abi3, and abi3t serves free-threaded 3.15 on."""
    name = parse_wheel_name(wheel)
    assert {k for k in serves | refuses if name.serves(k)} == serves


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (
            '{\n  "3.10": "supported",\n  "3.11": "maybe"\n}\n',
            3,
            "is not one of 'supported', 'newer', 'prerelease'",
        ),
        ('{\n  "3.10": "supported",\n  "python3.11": "newer"\n}\n', 3, "like '3.13'"),
        ('{\n  "3.10": "supported",\n  "3.11T": "newer"\n}\n', 3, "or '3.13t' (free-threaded)"),
        ('{\n  "3.11": "supported",\n  "3.10": "supported"\n}\n', 1, "oldest first"),
        ('{\n  "3.11t": "supported",\n  "3.11": "supported"\n}\n', 1, "3.14 before 3.14t"),
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


def test_a_free_threaded_stable_abi_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(_matrix_text("3.14", "3.14t"))
    data["engine"]["stable_abi"] = "3.14t"
    with pytest.raises(MatrixError, match=r"'3\.14t' is a free-threaded build, which never loads abi3"):
        loads(yaml.safe_dump(data, sort_keys=False), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)


def test_no_python_list_is_written_in_code() -> None:
    """Every list of CPython versions comes from pythons.json (docstrings and examples aside)."""
    listing = re.compile(r"""\(\s*["']3\.1\d["']\s*,\s*["']3\.1\d["']""")
    for path in sorted((ROOT / "release").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not listing.search(text), f"{path.relative_to(ROOT)} writes a list of Python versions"


def test_no_room_spells_an_opt_python_path() -> None:
    """The record is the one speller of /opt/python/cpXY-cpXY[t] (a free-threaded build lives at
    cp314-cp314t, not cp314t-cp314t): no other module formats such a path."""
    spelled = re.compile(r"""/opt/python/\{|/opt/python/cp\{|cp\{[^}]*replace\(["']\.""")
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "release").rglob("*.py"))
        if path.name != "cpython.py" and spelled.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
