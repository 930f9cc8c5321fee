"""A broken matrix.yaml gives `matrix.yaml:LINE: dotted.key: message` and exit code 3, never a traceback.

Each case is (YAML text or a mutation of the real matrix, expected line, expected dotted key,
expected message fragment), with the description as its id. The expected line is a number, or
for mutations of the real matrix a marker: the line of the mutated text that starts with it (it
must be exactly one), or `(anchor, marker)`: the first line starting with the marker after the
line starting with the anchor. Cases so keep their exact line when matrix.yaml grows, and a
mutation fails loudly when the text it edits is gone from matrix.yaml.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from release import cli
from release.config import matrix
from release.errors import MatrixError

ROOT = Path(__file__).resolve().parents[2]
REAL = (ROOT / "matrix.yaml").read_text(encoding="utf-8")

Mutation = Callable[[str], str]
# rocm-distro's simulation (rocm6-only simulates the same runtime, on sid)
DISTRO_SIMULATE = "simulate: {runtime: system}\n    debian: {suite: trixie"
LineSpec = int | str | tuple[str, str]

MINIMAL = """\
schema_version: 1
engine:
  source: engine
  import_name: xfer
python: ["3.12"]
platform:
  floor: manylinux_2_28_x86_64
variants:
  cpu:
    distribution: xfer-engine-cpu
    backend: cpu
"""


def sub(old: str, new: str) -> Mutation:
    """Replace text that occurs exactly once in the real matrix."""

    def mutate(text: str) -> str:
        assert text.count(old) == 1, f"matrix.yaml no longer holds {old!r} exactly once"
        return text.replace(old, new)

    return mutate


# mi350x-pd's line (the Grace GB200 tier has `nodes: 2` too, commented "on one node")
NODES = "nodes: 2                          # prefill on one runner"


def nodes(value: str) -> Mutation:
    """mi350x-pd's `nodes:` set to `value`."""
    return sub(NODES, NODES.replace("nodes: 2 ", f"nodes: {value} "))


def minimal(old: str, new: str) -> str:
    assert MINIMAL.count(old) == 1
    return MINIMAL.replace(old, new)


def line_of(text: str, spec: LineSpec) -> int:
    if isinstance(spec, int):
        return spec
    lines = text.splitlines()
    anchor, marker = spec if isinstance(spec, tuple) else ("", spec)
    if anchor:
        starts = [i for i, content in enumerate(lines) if content.startswith(anchor)]
        assert len(starts) == 1, f"anchor {anchor!r} is on lines {starts}"
        after = starts[0] + 1
        return next(i for i in range(after, len(lines)) if lines[i].startswith(marker)) + 1
    hits = [i for i, content in enumerate(lines, start=1) if content.startswith(marker)]
    assert len(hits) == 1, f"marker {marker!r} is on lines {hits}"
    return hits[0]


class Bad(NamedTuple):
    source: str | Mutation
    line: LineSpec
    key: str
    fragment: str

    @property
    def text(self) -> str:
        return self.source if isinstance(self.source, str) else self.source(REAL)


def bad(description: str, source: str | Mutation, line: LineSpec, key: str, fragment: str) -> Any:
    return pytest.param(Bad(source, line, key, fragment), id=description)


CASES = [
    bad("unknown-top-level-key", sub("\nvariants:\n", "\nvariant:\n"),
        "variant:", "variant", "unknown key; did you mean 'variants'?"),
    bad("unknown-nested-key", sub('    exclude: ["libamdhip64.so*"', '    exlude: ["libamdhip64.so*"'),
        "    exlude:", "variants.rocm.exlude", "unknown key; did you mean 'exclude'?"),
    bad("unknown-image-key", sub('  rocm-distro:\n    description:', '  rocm-distro:\n    decsription:'),
        "    decsription:", "images.rocm-distro.decsription", "did you mean 'description'?"),
    bad("duplicate-yaml-key", minimal("  import_name: xfer\n", "  import_name: xfer\n  source: src\n"),
        5, "engine.source", "duplicate key (first defined on line 3)"),
    bad("duplicate-variant", minimal("    backend: cpu\n", "    backend: cpu\n  cpu:\n    backend: cpu\n"),
        12, "variants.cpu", "duplicate key (first defined on line 9)"),
    bad("missing-required-key", minimal("    backend: cpu\n", ""),
        10, "variants.cpu.backend", "missing required key"),
    bad("non-string-key", minimal("schema_version: 1\n", "schema_version: 1\n1: one\n"),
        2, "1", "keys must be strings"),
    bad("string-instead-of-list",
        sub('exclude: ["libamdhip64.so*", "libhsa-runtime64.so*"]', 'exclude: "libamdhip64.so*"'),
        '    exclude: "libamdhip64', "variants.rocm.exclude", "expected a list"),
    bad("list-instead-of-mapping",
        minimal("variants:\n  cpu:\n    distribution: xfer-engine-cpu\n    backend: cpu\n",
                "variants:\n  - cpu\n"),
        9, "variants", "expected a mapping"),
    bad("list-instead-of-dataclass", sub(DISTRO_SIMULATE, "simulate: [system]\n    debian: {suite: trixie"),
        ("  rocm-distro:", "    simulate:"), "images.rocm-distro.simulate",
        "expected a mapping with keys runtime, prefix"),
    bad("scalar-document", "just some text\n",
        1, "", "expected a mapping with keys schema_version, engine"),
    bad("null-required-mapping", minimal("platform:\n  floor: manylinux_2_28_x86_64\n", "platform:\n"),
        6, "platform", "expected a mapping, got nothing"),
    bad("number-instead-of-string",
        minimal("    backend: cpu\n", "    backend: cpu\n    cmake_defines: {XFER_DEBUG: 1}\n"),
        12, "variants.cpu.cmake_defines.XFER_DEBUG", 'quote it ("1")'),
    bad("string-instead-of-integer", nodes('"2"'),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "expected an integer, got '2'"),
    bad("string-instead-of-bool", sub("github_release: true", 'github_release: "yes"'),
        "  github_release:", "publish.github_release", "expected true or false"),
    bad("unknown-yaml-tag", sub('version: "0.1.0"', "version: !foo bar"),
        "  version: !foo", "engine.version", "cannot read 'bar' as !foo"),
    bad("bad-explicit-int", nodes("!!int two"),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "cannot read 'two'"),
    bad("python-as-float",
        sub('python: ["3.10", "3.11"', 'python: [3.10, "3.11"'),
        "python: [3.10", "python[0]", 'YAML read 3.10 as the number 3.1: quote it ("3.10")'),
    bad("python-unsupported", minimal('python: ["3.12"]', 'python: ["3.9"]'),
        5, "python[0]", "'3.9' is not supported (supported: 3.10, 3.11, 3.12, 3.13, 3.14, 3.14t, 3.15, "
        "3.15t)"),
    bad("python-duplicate", minimal('python: ["3.12"]', 'python:\n  - "3.12"\n  - "3.11"\n  - "3.12"'),
        8, "python[2]", "'3.12' is listed twice"),
    bad("python-empty", minimal('python: ["3.12"]', "python: []"),
        5, "python", "list at least one Python version"),
    bad("image-python-unsupported",
        sub('    python: ["3.12"]\n    simulate: {runtime: prefix, prefix: /opt/rocm/lib, via: ld.so.conf.d}',
            '    python: ["3.8"]\n    simulate: {runtime: prefix, prefix: /opt/rocm/lib, via: ld.so.conf.d}'),
        ("  vllm-rocm:", "    python:"), "images.vllm-rocm.python[0]", "'3.8' is not supported"),
    bad("unknown-backend", sub("backend: rocm", "backend: rcom"),
        "    backend: rcom", "variants.rocm.backend", "unknown backend 'rcom'; did you mean 'rocm'?"),
    bad("duplicate-distribution", sub("distribution: xfer-engine-musa", "distribution: xfer-engine-rocm"),
        ("  musa:", "    distribution:"), "variants.musa.distribution",
        "'xfer-engine-rocm' is already the distribution of variant 'rocm'"),
    bad("duplicate-distribution-pep503",
        sub("distribution: xfer-engine-musa", "distribution: XFER_Engine.ROCm"),
        "    distribution: XFER_", "variants.musa.distribution",
        "'XFER_Engine.ROCm' is already the distribution of variant 'rocm'"),
    bad("invalid-distribution-name", minimal("distribution: xfer-engine-cpu", 'distribution: "xfer engine"'),
        10, "variants.cpu.distribution", "'xfer engine' is not a valid distribution name (PEP 508)"),
    bad("exclude-own-library", sub('exclude: ["libmusart.so*"', 'exclude: ["libxfer*"'),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]",
        "would also exclude the engine's own library 'libxfer*'"),
    bad("undefined-image", sub("images: [clean-minbase]", "images: [clean-minbas]"),
        ("  cpu:", "    images:"), "variants.cpu.images[0]",
        "image 'clean-minbas' is not defined under images; "
                 "did you mean 'clean-minbase'?"),
    bad("undefined-hardware",
        sub("hardware: [mi300x, mi355x, mi350x-pd]", "hardware: [mi300x, mi355x, mi400x]"),
        ("  rocm:", "    hardware:"), "variants.rocm.hardware[2]",
        "hardware tier 'mi400x' is not defined under hardware"),
    bad("invalid-variant-name", sub("\n  musa:\n", "\n  Musa_1:\n"),
        "  Musa_1:", "variants.Musa_1", "variant name 'Musa_1' must be lowercase letters and digits"),
    bad("device-code-without-architectures",
        minimal("    backend: cpu\n", "    backend: cpu\n    device_code: true\n"),
        9, "variants.cpu.architectures", "device_code is true"),
    bad("no-variants",
        minimal("variants:\n  cpu:\n    distribution: xfer-engine-cpu\n    backend: cpu\n",
                "variants: {}\n"),
        8, "variants", "define at least one variant"),
    bad("bad-platform-floor", sub("floor: manylinux_2_28 ", "floor: manylinux2014_x86_64 "),
        "  floor:", "platform.floor", "'manylinux2014_x86_64' is not a platform tag"),
    bad("bad-import-name", minimal("import_name: xfer", "import_name: 9xfer"),
        4, "engine.import_name", "'9xfer' is not a Python identifier"),
    bad("bad-engine-version", sub('version: "0.1.0"', 'version: "zero"'),
        "  version:", "engine.version", "'zero' is not a PEP 440 version"),
    bad("bad-simulate-runtime",
        sub(DISTRO_SIMULATE, "simulate: {runtime: sytem}\n    debian: {suite: trixie"),
        ("  rocm-distro:", "    simulate:"), "images.rocm-distro.simulate.runtime",
        "'sytem' is not one of 'system', 'prefix', 'absent'; did you mean 'system'?"),
    bad("prefix-runtime-without-prefix",
        sub("prefix: /opt/rocm/lib, via: LD_LIBRARY_PATH}\n    debian",
                     "via: LD_LIBRARY_PATH}\n    debian"),
        ("  rocm-ld-library-path:", "    simulate:"), "images.rocm-ld-library-path.simulate.prefix",
        "runtime: prefix needs the library directory"),
    bad("relative-prefix",
        sub("prefix: /opt/rocm-7.2.4/lib, via: ld.so.conf.d}\n    debian",
            "prefix: opt/rocm-7.2.4/lib, via: ld.so.conf.d}\n    debian"),
        ("  rocm-opt-prefix:", "    simulate:"), "images.rocm-opt-prefix.simulate.prefix",
        "'opt/rocm-7.2.4/lib' must be an absolute path"),
    bad("image-without-container-or-simulation",
        sub("    simulate: {runtime: absent, rootfs: debootstrap-minbase}\n", ""),
        "  clean-minbase:", "images.clean-minbase", "give a container reference, a simulation, or both"),
    bad("bad-build-image-gcc",
        sub("debian: {suite: trixie, packages: [libamdhip64-dev/experimental",
            'debian: {suite: trixie, gcc: "g++-14", packages: [libamdhip64-dev/experimental'),
        ("  rocm:", "      debian:"), "variants.rocm.build_image.debian.gcc",
        "'g++-14' is not a GCC major like '14'"),
    bad("gcc-on-a-serving-image",
        sub("    debian: {suite: trixie}\n    expect:",
            '    debian: {suite: trixie, gcc: "14"}\n    expect:'),
        ("  rocm-absent:", "    debian:"), "images.rocm-absent.debian.gcc", "serving images compile nothing"),
    bad("toolkit-install-without-a-toolkit",
        sub("      debian: {suite: trixie}\n",
            "      debian: {suite: trixie, toolkit_install: [--from-pypi]}\n"),
        ("  cpu:", "      debian:"), "variants.cpu.build_image.debian.toolkit_install",
        "backend 'cpu' declares no toolkit"),
    bad("toolkit-install-without-a-version",
        sub('    toolkit: "13.0"\n', ""),
        ("  cuda:", "      debian:"), "variants.cuda.build_image.debian.toolkit_install",
        "declare its version (`toolkit:`)"),
    bad("bad-node-count", nodes("3"),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "1 (one runner) or 2"),
    bad("bad-prerelease-literal", sub("prerelease: separate-index", "prerelease: seperate-index"),
        "  prerelease:", "publish.prerelease", "did you mean 'separate-index'?"),
    bad("schema-version-2", sub("schema_version: 1\n", "schema_version: 2\n"),
        "schema_version:", "schema_version", "2 is not one of 1"),
    bad("schema-version-bool", sub("schema_version: 1\n", "schema_version: true\n"),
        "schema_version:", "schema_version", "True is not one of 1"),
    bad("yaml-syntax-error", sub("  floor: manylinux_2_28 ", "  floor: manylinux_2_28: x "),
        "  floor:", "", "invalid YAML: mapping values are not allowed"),
    bad("unclosed-bracket", minimal('python: ["3.12"]', 'python: ["3.12"'),
        6, "", "invalid YAML"),
    bad("two-documents", REAL + "---\nschema_version: 1\n",
        "---", "", "invalid YAML: but found another document"),
    bad("env-value-with-newline",
        minimal("    backend: cpu\n", '    backend: cpu\n    env:\n      CFLAGS: "-O2\\nrm -rf /"\n'),
        13, "variants.cpu.env.CFLAGS", "the value holds a line break"),
    bad("env-value-with-carriage-return",
        minimal("    backend: cpu\n", '    backend: cpu\n    env: {XFER_MODE: "fast\\r"}\n'),
        12, "variants.cpu.env.XFER_MODE", "an environment value is one line"),
    bad("empty-file", "",
        1, "", "the file is empty"),
    bad("comments-only", "# only a comment\n\n",
        1, "", "the file is empty"),
]



def test_the_table_holds_at_least_20_distinct_bad_inputs() -> None:
    assert len({param.id for param in CASES}) == len(CASES)
    texts = {case.text for param in CASES for case in param.values if isinstance(case, Bad)}
    assert len(texts) == len(CASES) >= 20
    assert REAL not in texts


def _problem_for(problems: tuple[matrix.Problem, ...], key: str) -> matrix.Problem:
    found = [p for p in problems if p.key == key]
    assert found, f"no problem for {key!r} in {[str(p) for p in problems]}"
    return found[0]


@pytest.mark.parametrize("case", CASES)
def test_loads_reports_line_key_and_message(case: Bad) -> None:
    text = case.text
    with pytest.raises(MatrixError) as info:
        matrix.loads(text, path=Path("matrix.yaml"))
    problem = _problem_for(info.value.problems, case.key)
    assert problem.file == "matrix.yaml"
    assert problem.line == line_of(text, case.line)
    assert case.fragment in problem.message
    assert len(set(info.value.problems)) == len(info.value.problems), "a problem is reported twice"


@pytest.mark.parametrize("case", CASES)
def test_cli_exits_3_with_the_location_and_no_traceback(
    case: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = case.text
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan"]) == 3
    out, err = capsys.readouterr()
    where = f"matrix.yaml:{line_of(text, case.line)}:" + (f" {case.key}:" if case.key else "")
    assert where in err
    assert case.fragment in err
    assert "Traceback" not in out + err
    assert out == ""


def test_several_problems_are_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = REAL
    for mutate in (
        sub("backend: rocm", "backend: rcom"),
        sub('python: ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t"]',
            'python: ["3.10", "3.9"]'),
        sub("images: [clean-minbase]", "images: [nowhere]"),
        sub("floor: manylinux_2_28 ", "floor: linux_x86_64 "),
    ):
        text = mutate(text)
    with pytest.raises(MatrixError) as info:
        matrix.loads(text, path=Path("matrix.yaml"))
    keys = {p.key for p in info.value.problems}
    assert {"variants.rocm.backend", "python[1]", "variants.cpu.images[0]", "platform.floor"} <= keys

    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan"]) == 3
    err = capsys.readouterr().err
    for key, marker in (
        ("variants.rocm.backend", "    backend: rcom"),
        ("python[1]", "python: ["),
        ("variants.cpu.images[0]", "    images: [nowhere]"),
        ("platform.floor", "  floor:"),
    ):
        assert f"matrix.yaml:{line_of(text, marker)}: {key}:" in err


def test_reading_problems_are_all_reported_together() -> None:
    extra = "    exclude: libcpu\n    toolkit: [1]\n    colour: red\n"
    text = minimal("    backend: cpu\n", "    backend: cpu\n" + extra)
    with pytest.raises(MatrixError) as info:
        matrix.loads(text, path=Path("matrix.yaml"))
    assert [(p.line, p.key) for p in info.value.problems] == [
        (12, "variants.cpu.exclude"),
        (13, "variants.cpu.toolkit"),
        (14, "variants.cpu.colour"),
    ]


SOURCE_CASES = [
    pytest.param("nowhere", None, "'nowhere' does not exist", id="source-missing"),
    pytest.param("engine.txt", "file", "'engine.txt' is not a directory", id="source-is-a-file"),
    pytest.param("empty", "dir", "'empty' holds no PEP 517 project (no pyproject.toml or setup.py)",
                 id="source-without-project"),
    pytest.param("../../../../../../../../etc", None, "outside the directory of matrix.yaml",
                 id="source-escapes-to-etc"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "make", "fragment"), SOURCE_CASES)
def test_an_engine_source_without_a_project_is_a_located_error_at_plan_time(
    source: str, make: str | None, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if make == "file":
        (tmp_path / source).write_text("", encoding="utf-8")
    elif make == "dir":
        (tmp_path / source).mkdir()
    path = tmp_path / "matrix.yaml"
    path.write_text(minimal("source: engine", f"source: {source}"), encoding="utf-8")
    for command in ("plan", "build"):
        assert cli.main(["--matrix", str(path), command]) == 3
        out, err = capsys.readouterr()
        assert "matrix.yaml:3: engine.source: " in err
        assert fragment in err
        assert len(err.splitlines()) == 1
        assert "Traceback" not in out + err
        assert out == ""


@pytest.mark.parametrize("project", ["pyproject.toml", "setup.py"])
def test_an_engine_outside_the_matrix_directory_is_fine_when_it_is_a_project(
    project: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mooncake").mkdir()
    (tmp_path / "mooncake" / project).write_text("", encoding="utf-8")
    (tmp_path / "release").mkdir()
    path = tmp_path / "release" / "matrix.yaml"
    path.write_text(minimal("source: engine", "source: ../mooncake"), encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan"]) == 0
    assert "cp312-cpu" in capsys.readouterr().out
