"""Hostile inputs to the newer paths (issue 45), in-process (no process starts): each ends in one
line and a non-zero exit, within its deadline, with nothing written outside the project and no
control character printed. The HTTP cases (credentials, hash-less listings, dripping answers,
deadlines) need a server on 127.0.0.1: tests/integration/test_upload_transport.py.

Each cause is fixed once, where every caller goes through it: the reader (`release.wheel.files`),
the writer (`release.atomic`), the escaper (`release.table.printable`), the grammar
(`release.config.names`), and here each is held by the paths the probe found open.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from release import cli, table
from release.atomic import OutsideProject, write_text
from release.config.facts import load_facts
from release.config.matrix import loads
from release.errors import MatrixError, ReproduceError, SmokeError, UsageError
from release.hardware.leg import check_report
from release.init import scan
from release.publish import manifest, variant_upload
from release.reproduce.rebuild import recorded_epoch
from release.smoke.probe import changed_since
from release.wheel import files, own

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = (
    '[build-system]\nbuild-backend = "setuptools.build_meta"\n'
    + '[project]\nname = "ringlet"\nversion = "0.1"\n'
)
RLO, NUL = "\u202e", "\x00"


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    assert RLO not in text and NUL not in text and "\x1b" not in text, repr(text)
    return lines[0]


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def project(root: Path) -> Path:
    """A setuptools project with an import package (two variants: init writes a guard)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / "ringlet").mkdir()
    (root / "ringlet" / "__init__.py").write_text('"""ringlet."""\n', encoding="utf-8")
    return root


def init(root: Path, *args: str) -> int:
    return cli.main(
        ["init", str(root), "--variants", "cpu,rocm", "--output", str(root / "matrix.yaml"), *args]
    )


def tree(directory: Path) -> dict[str, bytes | str]:
    """Every path below `directory`: a file's bytes, a link's target."""
    found: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        rel = str(path.relative_to(directory))
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
    return found


# ------------------------------------------------------------------------------------------------
# The one reader: regular files only, bounded, nesting limited, one line


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "loop", "directory", "deep", "huge"])
def test_the_manifest_is_read_by_the_one_reader(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "manifest.json"
    if kind == "fifo":
        fifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    else:
        path.write_bytes(b" " * (manifest.MANIFEST_LIMIT + 1))
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        manifest.load(path)
    assert time.monotonic() - started < 5
    assert type(info.value).__name__ == "PublishError"
    one_line(str(info.value))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("with\u202eRLO-1.0-py3-none-any.whl", "not a wheel entry"),
        ("nul\x00-1.0-py3-none-any.whl", "not a wheel entry"),
    ],
)
def test_manifest_entry_names_with_control_characters_are_refused(
    tmp_path: Path, name: str, message: str
) -> None:
    path = tmp_path / "manifest.json"
    wheels = [{"name": name, "sha256": "ab" * 32, "size": 1}]
    path.write_text(
        json.dumps({"manifest_version": manifest.MANIFEST_VERSION, "wheels": wheels}), encoding="utf-8"
    )
    with pytest.raises(Exception, match=message) as info:
        manifest.load(path)
    one_line(str(info.value))


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("fifo", "a FIFO"),
        ("[" * 5000 + "]" * 5000, "nested deeper than"),
        (
            {"schema_version": 1, "images": {"a/b:c": {"reference": "x", "digest": None, "source": "probe"}}},
            "not an image name",
        ),
        (
            {
                "schema_version": 1,
                "images": {
                    "ok": {"reference": "x", "digest": None, "source": "probe", "pythons": {"3.x": "/p"}}
                },
            },
            "expected a version",
        ),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
    ids=["fifo", "deep", "image-name", "python-key", "not-utf8"],
)
def test_image_facts_are_read_and_held_to_the_grammar(tmp_path: Path, document: object, message: str) -> None:
    path = tmp_path / "images.facts.json"
    if document == "fifo":
        fifo(path)
    elif isinstance(document, bytes):
        path.write_bytes(document)
    else:
        path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    with pytest.raises(MatrixError, match=message) as info:
        load_facts(path)
    one_line(str(info.value))


@pytest.mark.parametrize(
    "report",
    ["[]", "[" * 5000, '{"sha256": "x", "rules": [1]}', '{"rules": "no"}', "fifo"],
    ids=["list", "deep", "rule-not-object", "rules-not-list", "fifo"],
)
def test_release_hardware_reads_a_verify_report_in_one_line(tmp_path: Path, report: str) -> None:
    wheel = tmp_path / "ringlet-0.1-cp312-cp312-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"PK")
    beside = wheel.with_name(wheel.name + ".verify.json")
    if report == "fifo":
        fifo(beside)
    else:
        beside.write_text(report, encoding="utf-8")
    with pytest.raises(SmokeError, match="no readable verify report") as info:
        check_report(wheel, local=False)
    one_line(str(info.value))


def test_a_wheel_that_is_a_fifo_is_refused_by_the_own_wheel_reader(tmp_path: Path) -> None:
    wheel = fifo(tmp_path / "ringlet-0.1-py3-none-any.whl")
    with pytest.raises(files.NotRegularFile):
        own.member_names(wheel)


# ------------------------------------------------------------------------------------------------
# release init: every file read safely, everything validated before anything is written


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "not-utf8", "huge"])
def test_init_reads_pyproject_by_the_one_reader(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "repo")
    pyproject = root / "pyproject.toml"
    pyproject.unlink()
    if kind == "fifo":
        fifo(pyproject)
    elif kind == "dev-zero":
        pyproject.symlink_to("/dev/zero")
    elif kind == "not-utf8":
        pyproject.write_bytes(b"[project]\nname = '\xff'\n")
    else:
        pyproject.write_bytes(b"#" * (8 << 20))
    before = tree(root)
    assert init(root) == 2
    one_line(capsys.readouterr().err)
    assert tree(root) == before


def test_a_non_utf8_init_py_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "repo")
    (root / "ringlet" / "__init__.py").write_bytes(b'"""\xff\xfe"""\n')
    before = tree(root)
    assert init(root, "--ci", "github") == 2
    line = one_line(capsys.readouterr().err)
    assert "__init__.py" in line and "not UTF-8" in line and "nothing was written" in line
    assert tree(root) == before  # no matrix, no noxfile, no workflows, no .gitignore


@pytest.mark.parametrize("link", [".github/workflows", ".github", "ringlet", ".release"])
def test_init_never_writes_through_a_linked_directory(
    tmp_path: Path, link: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    if link == "ringlet":
        (root / "ringlet").rename(outside / "ringlet")
        (root / "ringlet").symlink_to(outside / "ringlet")
    else:
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(outside)
    before, outside_before = tree(root), tree(outside)
    assert init(root, "--ci", "github") != 0
    assert "outside the project" in one_line(capsys.readouterr().err)
    assert tree(outside) == outside_before
    assert tree(root) == before  # all or nothing


@pytest.mark.parametrize(
    "name", [".github/workflows/release.yml", ".gitignore", "ringlet/__init__.py", "noxfile.py"]
)
def test_a_linked_file_is_replaced_never_followed(tmp_path: Path, name: str) -> None:
    root = project(tmp_path / "repo")
    target = tmp_path / "outside.txt"
    target.write_text("# theirs\n", encoding="utf-8")
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).unlink(missing_ok=True)
    (root / name).symlink_to(target)
    assert init(root, "--ci", "github", "--force") == 0
    assert target.read_text(encoding="utf-8") == "# theirs\n"
    assert not (root / name).is_symlink() or name == "noxfile.py"  # a noxfile that exists is kept


def test_workflows_write_never_writes_through_a_linked_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / ".github").mkdir(parents=True)
    (root / ".github" / "workflows").symlink_to(outside)
    assert cli.main(["workflows", str(root), "--write"]) != 0
    assert "outside the project" in one_line(capsys.readouterr().err)
    assert list(outside.iterdir()) == []


# ------------------------------------------------------------------------------------------------
# The init scan is linear in its input


@pytest.mark.parametrize(
    "text",
    [
        "set(X_BACKEND " * 20_000,
        "set_property(CACHE X_BACKEND PROPERTY STRINGS a " * 6000 + "\nset(X_BACKEND a CACHE STRING x)",
        'option(A "' * 28_000,
        "set(" + "A_" * 140_000,
    ],
    ids=["set-without-cache", "strings-without-paren", "option-open-quote", "long-identifier"],
)
def test_a_280kb_cmakelists_scans_in_well_under_a_second(text: str) -> None:
    started = time.monotonic()
    scan.parse_cmake_backend(text)
    scan.parse_cmake_options(text)
    assert time.monotonic() - started < 1.0


def test_the_cmake_backend_is_still_read_with_parentheses_in_its_help() -> None:
    text = (
        'set(X_BACKEND "cuda" CACHE STRING "backend (cuda|hip)")\n'
        "set_property(CACHE X_BACKEND PROPERTY STRINGS cuda hip)"
    )
    assert scan.parse_cmake_backend(text) == ("X_BACKEND", ("cuda", "hip"))


# ------------------------------------------------------------------------------------------------
# Untrusted text through one escaper; names and numbers by one grammar; options never injected


def test_tables_escape_control_and_bidi_characters(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    text = table.render(
        ("image", "fact"),
        [(f"evil{RLO}gpj.exe", "a\x1b[2Jb\x00")],
        environ={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    for shown in (text, summary.read_text(encoding="utf-8")):
        assert RLO not in shown and "\x1b" not in shown and NUL not in shown
        assert "\\u202e" in shown and "\\x1b" in shown


def test_every_error_line_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / f"no{RLO}such\x1b[31m"
    assert cli.main(["init", str(missing)]) == 2
    one_line(capsys.readouterr().err)


MATRIX = (ROOT / "matrix.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("xfer-engine-cpu", "xfer-engine-\u017fpu", "variants.cpu.distribution: 'xfer-engine-"),
        ("xfer-engine-cpu", "xfer-engine-\u212apu", "variants.cpu.distribution: 'xfer-engine-"),
        ("xfer-engine-cpu", "xfer-engine-\u0131pu", "variants.cpu.distribution: 'xfer-engine-"),
        ("clean-minbase", "clean/minbase", "is not an image name"),
        ("clean-minbase", "Clean-minbase", "is not an image name"),
        ("mi300x", "mi300x/x", "is not a hardware name"),
    ],
    ids=["long-s", "kelvin", "dotless-i", "image-slash", "image-upper", "hardware-slash"],
)
def test_names_are_ascii_and_held_to_one_grammar(old: str, new: str, message: str) -> None:
    assert old in MATRIX
    with pytest.raises(MatrixError) as info:
        loads(MATRIX.replace(old, new), path=ROOT / "matrix.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize("epoch", ["\u00b2", "\u0661\u0662\u0663", "9" * 5000, "-1", "1e9", ""])
def test_a_recorded_source_date_epoch_is_ascii_digits_with_bounds(epoch: str) -> None:
    release = SimpleNamespace(path=Path("manifest.json"), inputs={"source_date_epoch": epoch})
    with pytest.raises(ReproduceError) as info, recorded_epoch(release):  # type: ignore[arg-type]
        pass
    assert len(str(info.value)) < 300
    one_line(str(info.value))


def test_a_recorded_source_date_epoch_of_ascii_digits_is_set() -> None:
    release = SimpleNamespace(path=Path("manifest.json"), inputs={"source_date_epoch": "1700000000"})
    with recorded_epoch(release) as epoch:  # type: ignore[arg-type]
        assert os.environ["SOURCE_DATE_EPOCH"] == epoch == "1700000000"


@pytest.mark.parametrize("revision", ["--output=FILE", "-p", "--ext-diff", "HEAD\n--output=x"])
def test_changed_since_never_reaches_git_as_an_option(revision: str) -> None:
    loaded = SimpleNamespace(path=ROOT / "matrix.yaml", root=ROOT)
    with pytest.raises(UsageError, match="not a git revision"):  # refused before any process starts
        changed_since(loaded, revision)  # type: ignore[arg-type]


def test_a_link_loop_in_a_release_directory_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    wheels = {"a-1.0-py3-none-any.whl": {"name": "a-1.0-py3-none-any.whl", "path": "a-1.0-py3-none-any.whl"}}
    problems = manifest.check_directory(wheels, tmp_path, ignore=[tmp_path / "manifest.json"])
    assert any("loop" in p and "refused" in p for p in problems), problems


def test_a_link_loop_where_init_writes_is_outside_the_project(tmp_path: Path) -> None:
    (tmp_path / ".github").symlink_to(".github")
    with pytest.raises(OutsideProject, match="outside the project"):
        write_text(tmp_path / ".github" / "workflows" / "release.yml", "x", root=tmp_path)


def test_a_variant_set_with_a_fifo_for_a_wheel_is_refused_before_upload(tmp_path: Path) -> None:
    fifo(tmp_path / "demo_engine-1.0-cp312-cp312-manylinux_2_28_x86_64-cu12.whl")
    (tmp_path / "demo_engine-1.0-variants.json").symlink_to("/dev/zero")
    shared = SimpleNamespace(distribution="demo-engine")
    started = time.monotonic()
    with pytest.raises(Exception, match="a FIFO, not a regular file") as info:
        variant_upload.collect(tmp_path, shared, "1.0")  # type: ignore[arg-type]
    assert time.monotonic() - started < 5
    assert "Traceback" not in str(info.value)
