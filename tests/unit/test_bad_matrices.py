"""Bad matrices, one small mutation of the real matrix.yaml each, through `release.cli.main`.

Every case must end in exit code 3 with exactly one `error:` line on stderr (a further line per
further problem, none forged by a key or value), the expected `matrix.yaml:LINE: key:` and
message fragment, and no traceback. The line is given as a marker: the one line of the mutated
text that starts with it, or `(anchor, marker)`: the first line starting with the marker after
the one line starting with the anchor; `None` where YAML itself cannot say (no line).

Below the table: what reaches cibuildwheel's parsers, files that are not regular files, the
soname-glob overlap, YAML merge keys and the `--select` brace-expansion limit.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import itertools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from release import cli
from release.builder import cibw
from release.config import checks, dataschema, globs, matrix
from release.errors import MatrixError
from release.plan.steps import make_plan

VLLM_21 = "docker.io/vllm/vllm-openai-rocm:v0.21"  # one of two vLLM images: this one, once
ROOT = Path(__file__).resolve().parents[2]
REAL = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
BACKENDS = ROOT / "packaging" / "backends"

Mutation = Callable[[str], str]
LineSpec = str | tuple[str, str] | None


def sub(old: str, new: str, count: int = 1) -> Mutation:
    """Replace text that occurs exactly `count` times in the real matrix (all of them)."""

    def mutate(text: str) -> str:
        assert text.count(old) == count, f"matrix.yaml holds {old!r} {text.count(old)} times, not {count}"
        return text.replace(old, new)

    return mutate


def under(anchor: str, old: str, new: str) -> Mutation:
    """Replace the first `old` after the one line that starts with `anchor`."""

    def mutate(text: str) -> str:
        start = _one_line(text, anchor)
        at = text.index(old, start)
        return text[:at] + new + text[at + len(old) :]

    return mutate


def then(*mutations: Mutation) -> Mutation:
    def mutate(text: str) -> str:
        for m in mutations:
            text = m(text)
        return text

    return mutate


def _one_line(text: str, prefix: str) -> int:
    """The offset of the one line that starts with `prefix`."""
    offsets = [m.start() for m in re.finditer(r"^", text, re.MULTILINE) if text.startswith(prefix, m.start())]
    assert len(offsets) == 1, f"{prefix!r} starts {len(offsets)} lines"
    return offsets[0]


def line_of(text: str, spec: LineSpec) -> int | None:
    if spec is None:
        return None
    anchor, marker = spec if isinstance(spec, tuple) else ("", spec)
    lines = text.splitlines()
    if anchor:
        first = text[: _one_line(text, anchor)].count("\n") + 1
        return next(i for i in range(first, len(lines)) if lines[i].startswith(marker)) + 1
    return text[: _one_line(text, marker)].count("\n") + 1


class Bad(NamedTuple):
    mutation: Mutation
    line: LineSpec
    key: str
    fragment: str


def bad(description: str, mutation: Mutation, line: LineSpec, key: str, fragment: str) -> Any:
    return pytest.param(Bad(mutation, line, key, fragment), id=description)


V = "variants"
CPU = "  cpu:\n    distribution: xfer-engine-cpu\n"
DEFINES_CPU = "cmake_defines: {XFER_BACKEND: cpu}"
DEFINES_HIP = "cmake_defines: {XFER_BACKEND: hip}"
ROCM_EXCLUDE = 'exclude: ["libamdhip64.so*", "libhsa-runtime64.so*"]'
PYPI = 'repository: "https://upload.pypi.org/legacy/"'
MUSA_EXCLUDE = 'exclude: ["libmusart.so*", "libmusa.so*"]'
FLOOR = "floor: manylinux_2_28 "
PYTHONS = 'python: ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t", "3.15t"]'
ARCHES = "  architectures: [x86_64, aarch64]"


def cpu_extra(yaml_line: str) -> Mutation:
    """A line added to variants.cpu, right after its cmake_defines."""
    return sub(f"    {DEFINES_CPU}\n", f"    {DEFINES_CPU}\n    {yaml_line}\n")


def with_base(base: str) -> Mutation:
    """variants.cpu merges `x-base: &base {BASE}` (a mapping defined above the variants)."""
    return then(
        sub("\nvariants:\n", f"\nx-base: &base {{{base}}}\nvariants:\n"),
        sub(CPU, "  cpu:\n    <<: *base\n    distribution: xfer-engine-cpu\n"),
    )


def musa_exclude(pattern: str) -> Mutation:
    return sub(MUSA_EXCLUDE, f'exclude: ["{pattern}"]')


# fmt: off
CASES = [
    # ---------------------------------------------------------------- unknown keys, with hints
    bad("top-level-misspelt", sub('\npython: ["3.10"', '\npyhton: ["3.10"'),
        "pyhton:", "pyhton", "did you mean 'python'?"),
    bad("engine-misspelt", sub("\nengine:\n", "\nengin:\n"),
        "engin:", "engin", "did you mean 'engine'?"),
    bad("import-name-misspelt", sub("  import_name: xfer", "  import_nme: xfer"),
        "  import_nme:", "engine.import_nme", "did you mean 'import_name'?"),
    bad("own-libraries-misspelt", sub("  own_libraries:", "  own_library:"),
        "  own_library:", "engine.own_library", "did you mean 'own_libraries'?"),
    bad("prebuild-key-misspelt", sub("    cmake_source: .", "    cmake_sources: ."),
        "    cmake_sources:", "engine.prebuild.cmake_sources", "did you mean 'cmake_source'?"),
    bad("metadata-key-misspelt",
        sub('    classifiers:\n      - "Programming', '    classifier:\n      - "Programming'),
        "    classifier:", "engine.metadata.classifier", "did you mean 'classifiers'?"),
    bad("smoke-key-misspelt", sub("    commands:\n", "    command:\n"),
        "    command:", "engine.smoke.command", "did you mean 'commands'?"),
    bad("variant-key-misspelt", sub('    toolkit: "13.0"', '    tookit: "13.0"'),
        "    tookit:", "variants.cuda.tookit", "did you mean 'toolkit'?"),
    bad("architectures-singular", sub("    architectures: [gfx942", "    architecture: [gfx942"),
        "    architecture: [", "variants.rocm.architecture", "did you mean 'architectures'?"),
    bad("device-code-dashed", sub("    device_code: false", "    device-code: false"),
        "    device-code:", "variants.rocm.device-code", "did you mean 'device_code'?"),
    bad("image-key-misspelt", sub(f'    container: "{VLLM_21}', f'    containers: "{VLLM_21}'),
        "    containers:", "images.vllm-rocm.containers", "did you mean 'container'?"),
    bad("simulate-key-misspelt", sub("{runtime: absent, rootfs:", "{runtime: absent, rootf:"),
        ("  clean-minbase:", "    simulate:"), "images.clean-minbase.simulate.rootf",
        "did you mean 'rootfs'?"),
    bad("hardware-key-misspelt", under("  mi355x:", "    runner:", "    runners:"),
        ("  mi355x:", "    runners:"), "hardware.mi355x.runners", "did you mean 'runner'?"),
    bad("publish-key-dashed", sub("  tag_pattern:", "  tag-pattern:"),
        "  tag-pattern:", "publish.tag-pattern", "did you mean 'tag_pattern'?"),
    bad("platform-key-singular", sub("  system_libraries: []", "  system_library: []"),
        "  system_library:", "platform.system_library", "did you mean 'system_libraries'?"),
    bad("unknown-key-far-from-all", cpu_extra("colour: red"),
        ("  cpu:", "    colour:"), "variants.cpu.colour", "unknown key; known keys: distribution, backend"),
    # ---------------------------------------------------------------- duplicates and key types
    bad("duplicate-top-level-key", sub("\nhardware:\n", "\nplatform: {}\nhardware:\n"),
        "platform: {}", "platform", "duplicate key (first defined on line"),
    bad("duplicate-variant", sub("\n  musa:\n", "\n  cuda:\n"),
        ("  rocm:", "  cuda:"), "variants.cuda", "duplicate key (first defined on line"),
    bad("duplicate-image", sub("\n  rocm-absent:\n", "\n  rocm-distro:\n"),
        ("  rocm-ld-library-path:", "  rocm-distro:"), "images.rocm-distro", "duplicate key"),
    bad("duplicate-hardware", sub("\n\npublish:\n", "\n  mi300x: {gpu: x, architecture: y}\n\npublish:\n"),
        "  mi300x: {", "hardware.mi300x", "duplicate key"),
    bad("integer-key", cpu_extra("1: one"),
        ("  cpu:", "    1:"), "variants.cpu.1", "keys must be strings, not an int ('1'): quote it"),
    bad("boolean-key", sub("\nimages:\n", "\nimages:\n  true: {simulate: {runtime: absent}}\n"),
        "  true:", "images.true", "keys must be strings, not a bool"),
    bad("null-key", sub("\nhardware:\n", "\nhardware:\n  ~: {gpu: x, architecture: y, runner: [z]}\n"),
        "  ~:", "hardware.~", "keys must be strings, not a null"),
    bad("float-key", cpu_extra("3.12: x"),
        ("  cpu:", "    3.12:"), "variants.cpu.3.12", "keys must be strings, not a float"),
    bad("list-as-key", cpu_extra("? [a, b]\n    : x"),
        ("  cpu:", "    ? [a, b]"), "variants.cpu.?", "keys must be strings, not a list"),
    # ---------------------------------------------------------------- wrong shapes
    bad("engine-as-list", sub("\nengine:\n  source: engine", "\nengine:\n- source: engine"),
        ("engine:", "- source"), "engine", "expected a mapping with keys source, import_name"),
    bad("python-as-string", sub(PYTHONS, 'python: "3.12"'),
        "python:", "python", "expected a list of strings"),
    bad("python-item-as-list", sub('python: ["3.10", "3.11"', 'python: [["3.10"], "3.11"'),
        "python:", "python[0]", "expected a string, got a list"),
    bad("variant-as-string", sub(CPU, "  cpu: xfer-engine-cpu\n  cpux:\n    distribution: xfer-engine-cpu\n"),
        "  cpu: xfer", "variants.cpu", "expected a mapping with keys distribution, backend"),
    bad("exclude-item-as-mapping", sub(ROCM_EXCLUDE, 'exclude: [{soname: "libamdhip64.so*"}]'),
        ("  rocm:", "    exclude:"), "variants.rocm.exclude[0]", "expected a string, got a mapping"),
    bad("cmake-defines-as-list", sub(DEFINES_HIP, "cmake_defines: [XFER_BACKEND=hip]"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines", "expected a mapping"),
    bad("define-as-bool", sub(DEFINES_HIP, "cmake_defines: {XFER_BACKEND: true}"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.XFER_BACKEND",
        'expected a string, got true: quote it ("true")'),
    bad("define-as-null", sub(DEFINES_HIP, "cmake_defines: {XFER_BACKEND: }"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.XFER_BACKEND",
        "expected a string, got nothing"),
    bad("env-value-as-int", cpu_extra("env: {OMP_NUM_THREADS: 4}"),
        ("  cpu:", "    env:"), "variants.cpu.env.OMP_NUM_THREADS", 'quote it ("4")'),
    bad("device-code-as-string", sub("device_code: false", 'device_code: "false"'),
        "    device_code:", "variants.rocm.device_code", "expected true or false, got 'false'"),
    bad("device-code-as-int", sub("device_code: false", "device_code: 0"),
        "    device_code:", "variants.rocm.device_code", "expected true or false, got '0'"),
    bad("nodes-as-float", under("  mi350x-pd:", "nodes: 2 ", "nodes: 2.0 "),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "expected an integer, got '2.0'"),
    bad("nodes-as-bool", under("  mi350x-pd:", "nodes: 2 ", "nodes: true "),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "expected an integer, got 'true'"),
    bad("schema-version-quoted", sub("schema_version: 1\n", 'schema_version: "1"\n'),
        "schema_version:", "schema_version", "'1' is not one of 1"),
    bad("toolkit-as-float", sub('toolkit: "13.0"', "toolkit: 13.0"),
        ("  cuda:", "    toolkit:"), "variants.cuda.toolkit",
        'YAML read 13.0 as the number 13.0: quote it ("13.0")'),
    bad("version-as-float", sub('version: "0.1.0"', "version: 0.1"),
        "  version:", "engine.version", "YAML read 0.1 as the number 0.1"),
    bad("binary-tag-on-a-string", sub(FLOOR, "floor: !!binary '@@@' "),
        "  floor:", "platform.floor", "expected a string, got '@@@'"),
    bad("timestamp-as-string", sub('version: "0.1.0"', "version: 2024-01-01"),
        "  version:", "engine.version", "expected a string, got '2024-01-01'"),
    # ---------------------------------------------------------------- missing required keys
    bad("missing-schema-version", sub("schema_version: 1\n", ""),
        "engine:", "schema_version", "missing required key"),
    bad("missing-engine-source", sub("  source: engine ", "  x-source: engine "),
        "  x-source:", "engine.source", "missing required key"),
    bad("missing-distribution", sub("    distribution: xfer-engine\n", ""),
        "    backend: cuda", "variants.cuda.distribution", "missing required key"),
    bad("missing-gpu", under("  mi355x:", '    gpu: "AMD Instinct MI355X"\n', ""),
        ("  mi355x:", "    architecture:"), "hardware.mi355x.gpu", "missing required key"),
    bad("missing-simulate-runtime",
        under("  rocm-distro:", "simulate: {runtime: system}", "simulate: {}"),
        ("  rocm-distro:", "    simulate:"), "images.rocm-distro.simulate.runtime", "missing required key"),
    bad("missing-floor", sub(f"  {FLOOR}", f"  x-{FLOOR}"),
        "  x-floor:", "platform.floor", "missing required key"),
    bad("missing-prefix-define", sub("    prefix_define: XFER_CORE_PREFIX\n", ""),
        "    cmake_source:", "engine.prebuild.prefix_define", "missing required key"),
    # ---------------------------------------------------------------- values checked across keys
    bad("python-3.16", sub('"3.14t", "3.15t"]\n\nplatform', '"3.14t", "3.16"]\n\nplatform'),
        "python:", "python[7]", "'3.16' is not supported"),
    bad("python-3.8-first", sub('\npython: ["3.10"', '\npython: ["3.8"'),
        "python:", "python[0]", "'3.8' is not supported"),
    bad("python-listed-twice", sub('"3.14t", "3.15t"]\n\nplatform', '"3.14t", "3.14t"]\n\nplatform'),
        "python:", "python[7]", "'3.14t' is listed twice"),
    bad("python-none", sub(PYTHONS, "python: []"),
        "python:", "python", "list at least one Python version"),
    bad("floor-of-one-arch-for-two", sub(FLOOR, "floor: manylinux_2_28_x86_64 "),
        "  floor:", "platform.floor", "the floor of x86_64 alone, but platform.architectures lists aarch64"),
    bad("architecture-debian-name", sub(ARCHES, "  architectures: [arm64]"),
        "  architectures:", "platform.architectures[0]",
        "'arm64' is no machine architecture; did you mean 'aarch64'?"),
    bad("floors-of-another-machine",
        sub(ARCHES, f"  floors: {{aarch64: manylinux_2_34_x86_64}}\n{ARCHES}"),
        "  floors:", "platform.floors.aarch64", "is not a platform tag of aarch64"),
    bad("floor-plain-linux", sub(FLOOR, "floor: linux_x86_64 "),
        "  floor:", "platform.floor", "is not a platform tag like manylinux_2_28_x86_64"),
    bad("import-name-dashed", sub("import_name: xfer ", "import_name: xfer-engine "),
        "  import_name:", "engine.import_name", "'xfer-engine' is not a Python identifier"),
    bad("import-name-dotted", sub("import_name: xfer ", "import_name: xfer.core "),
        "  import_name:", "engine.import_name", "is not a Python identifier"),
    bad("version-word", sub('version: "0.1.0"', 'version: "latest"'),
        "  version:", "engine.version", "'latest' is not a PEP 440 version"),
    bad("cmake-source-outside", sub("    cmake_source: .", "    cmake_source: ../elsewhere"),
        "    cmake_source:", "engine.prebuild.cmake_source", "must be a directory inside engine.source"),
    bad("cmake-source-absolute", sub("    cmake_source: .", "    cmake_source: /usr/src"),
        "    cmake_source:", "engine.prebuild.cmake_source", "must be a directory inside"),
    bad("prefix-define-with-space", sub("prefix_define: XFER_CORE_PREFIX", 'prefix_define: "XFER CORE"'),
        "    prefix_define:", "engine.prebuild.prefix_define", "'XFER CORE' is not a CMake variable name"),
    bad("prefix-define-with-dash-d", sub("prefix_define: XFER_CORE_PREFIX", "prefix_define: -DXFER"),
        "    prefix_define:", "engine.prebuild.prefix_define", "is not a CMake variable name"),
    bad("script-with-space", sub("scripts: [xfer-master]", 'scripts: ["xfer master"]'),
        "  scripts:", "engine.scripts[0]", "'xfer master' is not a console script name"),
    bad("script-path", sub("scripts: [xfer-master]", 'scripts: ["../bin/sh"]'),
        "  scripts:", "engine.scripts[0]", "is not a console script name"),
    bad("script-glob", sub("scripts: [xfer-master]", 'scripts: ["*"]'),
        "  scripts:", "engine.scripts[0]", "'*' is not a console script name"),
    bad("script-command-substitution", sub("scripts: [xfer-master]", 'scripts: ["$(id)"]'),
        "  scripts:", "engine.scripts[0]", "is not a console script name"),
    bad("smoke-command-empty-list", sub('- ["xfer-master", "--version"]', "- []"),
        "      - []", "engine.smoke.commands[0]", "an empty command"),
    bad("smoke-command-empty-program", sub('- ["xfer-master", "--version"]', '- ["", "--version"]'),
        '      - ["", "--version"]', "engine.smoke.commands[0]", "an empty command"),
    bad("tag-pattern-empty", sub('tag_pattern: "v*"', 'tag_pattern: ""'),
        "  tag_pattern:", "publish.tag_pattern", "no tag could ever publish"),
    bad("tag-pattern-blank", sub('tag_pattern: "v*"', 'tag_pattern: "   "'),
        "  tag_pattern:", "publish.tag_pattern", "no tag could ever publish"),
    bad("repository-ftp",
        sub('repository: "https://upload.pypi.org/legacy/"', 'repository: "ftp://pypi.org/"'),
        "  repository:", "publish.repository", "'ftp://pypi.org/' is not an http(s) URL"),
    bad("repository-with-newline",
        sub(PYPI, 'repository: "https://x/\\nrepository-url=evil"'),
        "  repository:", "publish.repository", "'https://x/\\nrepository-url=evil' is not an http(s) URL"),
    bad("repository-with-space",
        sub('repository: "https://upload.pypi.org/legacy/"', 'repository: "https://x y/"'),
        "  repository:", "publish.repository", "is not an http(s) URL"),
    bad("prerelease-repository-name",
        sub('prerelease_repository: "https://test.pypi.org/legacy/"', "prerelease_repository: testpypi"),
        "  prerelease_repository:", "publish.prerelease_repository", "'testpypi' is not an http(s) URL"),
    bad("prerelease-repository-null",
        sub('prerelease_repository: "https://test.pypi.org/legacy/"', "prerelease_repository: null"),
        "  prerelease_repository:", "publish.prerelease_repository", "needs a repository URL"),
    bad("backend-typo", sub("backend: cuda\n", "backend: cudaa\n"),
        "    backend: cudaa", "variants.cuda.backend", "unknown backend 'cudaa'; did you mean 'cuda'?"),
    bad("backend-unknown", sub("backend: musa\n", "backend: xpu\n"),
        "    backend: xpu", "variants.musa.backend", "add packaging/backends/xpu.json"),
    bad("distribution-with-space", sub("distribution: xfer-engine-cpu", 'distribution: "xfer engine cpu"'),
        '    distribution: "xfer', "variants.cpu.distribution", "is not a valid distribution name"),
    bad("distribution-leading-dash", sub("distribution: xfer-engine-cpu", "distribution: -xfer"),
        "    distribution: -xfer", "variants.cpu.distribution", "is not a valid distribution name"),
    bad("distribution-same-after-normalizing",
        sub("distribution: xfer-engine-cpu", "distribution: Xfer.Engine"),
        ("  cuda:", "    distribution:"), "variants.cuda.distribution",
        "'xfer-engine' is already the distribution of variant 'cpu'"),
    bad("variant-name-uppercase", sub("\n  rocm:\n", "\n  ROCm:\n"),
        "  ROCm:", "variants.ROCm", "variant name 'ROCm' must be lowercase letters and digits"),
    bad("variant-name-dashed", sub("\n  rocm:\n", "\n  rocm-6:\n"),
        "  rocm-6:", "variants.rocm-6", "must be lowercase letters and digits"),
    bad("toolkit-with-command", sub('toolkit: "7.2"', 'toolkit: "7.2; rm -rf ~"'),
        ("  rocm:", "    toolkit:"), "variants.rocm.toolkit", "'7.2; rm -rf ~' is not a toolkit version"),
    bad("toolkit-substitution", sub('toolkit: "7.2"', 'toolkit: "$(id)"'),
        ("  rocm:", "    toolkit:"), "variants.rocm.toolkit", "is not a toolkit version like '6.4'"),
    bad("toolkit-word", sub('toolkit: "4.0"', 'toolkit: "four"'),
        ("  musa:", "    toolkit:"), "variants.musa.toolkit", "'four' is not a toolkit version"),
    # ---------------------------------------------------------------- names a shell-like parser reads
    bad("env-key-command", cpu_extra("env: {'X=$(touch f) Y': '1'}"),
        ("  cpu:", "    env:"), "variants.cpu.env.X=$(touch f) Y", "is not an environment variable name"),
    bad("env-key-assignment", cpu_extra("env: {A=B: '1'}"),
        ("  cpu:", "    env:"), "variants.cpu.env.A=B", "'A=B' is not an environment variable name"),
    bad("env-key-leading-digit", cpu_extra("env: {1ABC: x}"),
        ("  cpu:", "    env:"), "variants.cpu.env.1ABC", "not starting with a digit"),
    bad("env-key-space", cpu_extra("env: {'A B': x}"),
        ("  cpu:", "    env:"), "variants.cpu.env.A B", "'A B' is not an environment variable name"),
    bad("env-key-empty", cpu_extra("env: {'': x}"),
        ("  cpu:", "    env:"), "variants.cpu.env.''", "'' is not an environment variable name"),
    bad("env-key-dollar", cpu_extra("env: {$HOME: x}"),
        ("  cpu:", "    env:"), "variants.cpu.env.$HOME", "is not an environment variable name"),
    bad("env-key-backtick", cpu_extra("env: {'`id`': x}"),
        ("  cpu:", "    env:"), "variants.cpu.env.`id`", "is not an environment variable name"),
    bad("env-value-nul", cpu_extra('env: {A: "x\\0y"}'),
        ("  cpu:", "    env:"), "variants.cpu.env.A", "'x\\x00y' contains a NUL character"),
    bad("define-key-typed", sub(DEFINES_HIP, "cmake_defines: {XFER_BACKEND:STRING: hip}"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.XFER_BACKEND:STRING",
        "is not a CMake variable name"),
    bad("define-key-assignment", sub(DEFINES_HIP, "cmake_defines: {A=B: hip}"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.A=B",
        "'A=B' is not a CMake variable name"),
    bad("define-key-dash-d", sub(DEFINES_HIP, "cmake_defines: {-DX: hip}"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.-DX", "is not a CMake variable name"),
    bad("define-key-space", sub(DEFINES_HIP, "cmake_defines: {'X Y': hip}"),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.X Y", "is not a CMake variable name"),
    bad("define-value-nul", sub(DEFINES_HIP, 'cmake_defines: {XFER_BACKEND: "h\\0ip"}'),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.XFER_BACKEND",
        "contains a NUL character"),
    bad("setting-key-space", cpu_extra("config_settings: {'build dir': x}"),
        ("  cpu:", "    config_settings:"), "variants.cpu.config_settings.build dir",
        "'build dir' is not a config-settings key"),
    bad("setting-key-assignment", cpu_extra("config_settings: {x=y: z}"),
        ("  cpu:", "    config_settings:"), "variants.cpu.config_settings.x=y",
        "is not a config-settings key"),
    bad("setting-key-option", cpu_extra("config_settings: {-C: z}"),
        ("  cpu:", "    config_settings:"), "variants.cpu.config_settings.-C",
        "is not a config-settings key"),
    bad("setting-key-substitution", cpu_extra("config_settings: {'$(id)': z}"),
        ("  cpu:", "    config_settings:"), "variants.cpu.config_settings.$(id)",
        "is not a config-settings key"),
    # ---------------------------------------------------------------- the engine's own libraries
    bad("exclude-every-so", musa_exclude("*.so*"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]",
        "'*.so*' would also exclude the engine's own library 'libxfer*' (engine.own_libraries; both match"),
    bad("exclude-any-soname-1", musa_exclude("lib*.so.1"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "both match 'libxfer.so.1'"),
    bad("exclude-everything", musa_exclude("*"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]",
        "would also exclude the engine's own library"),
    bad("exclude-question-marks", musa_exclude("lib?fer*"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "both match 'libxfer'"),
    bad("exclude-character-class", musa_exclude("lib[a-z]fer.so"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "both match 'libxfer.so'"),
    bad("exclude-own-core", musa_exclude("libxfer_core.so"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "both match 'libxfer_core.so'"),
    bad("exclude-infix", musa_exclude("*xfer*"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]",
        "would also exclude the engine's own library"),
    bad("exclude-against-soname-own",
        then(sub('own_libraries: ["libxfer*"]', 'own_libraries: ["libxfer.so.1"]'), musa_exclude("*.so*")),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "both match 'libxfer.so.1'"),
    bad("exclude-against-default-own",
        then(sub('  own_libraries: ["libxfer*"]', "  own_libraries: []"), musa_exclude("lib*")),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "own library 'libxfer*'"),
    bad("exclude-against-import-name-glob",
        then(sub('["libxfer*"]', '["libxfer_core.so"]'), musa_exclude("libxfer.so.1")),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "own library 'libxfer*'"),
    bad("exclude-libpython", musa_exclude("libpython3.12.so.1.0"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "would exclude libpython"),
    bad("exclude-too-long", musa_exclude("libm" + "u" * 300 + ".so"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "longer than 255 characters"),
    bad("own-library-too-long", sub('own_libraries: ["libxfer*"]', f'own_libraries: ["lib{"x" * 260}*"]'),
        "  own_libraries:", "engine.own_libraries[0]", "longer than 255 characters"),
    # ---------------------------------------------------------------- images and hardware
    bad("device-code-without-architectures",
        then(sub("device_code: false", "device_code: true"), sub("[gfx942, gfx950]", "[]")),
        ("  rocm:", "    architectures:"), "variants.rocm.architectures", "device_code is true"),
    bad("image-undefined", sub("images: [clean-minbase]", "images: [clean]"),
        ("  cpu:", "    images:"), "variants.cpu.images[0]", "image 'clean' is not defined under images"),
    bad("hardware-undefined", sub("hardware: [mi300x, mi355x,", "hardware: [mi325x, mi355x,"),
        ("  rocm:", "    hardware:"), "variants.rocm.hardware[0]", "hardware tier 'mi325x' is not defined"),
    bad("image-with-nothing", under("  rocm-distro:", "    simulate: {runtime: system}\n", ""),
        "  rocm-distro:", "images.rocm-distro", "give a container reference, a simulation, or both"),
    bad("prefix-runtime-without-prefix",
        under("  rocm-ld-library-path:", "prefix: /opt/rocm/lib, ", ""),
        ("  rocm-ld-library-path:", "    simulate:"), "images.rocm-ld-library-path.simulate.prefix",
        "runtime: prefix needs the library directory"),
    bad("prefix-relative",
        under("  rocm-ld-library-path:", "prefix: /opt/rocm/lib, ", "prefix: rocm/lib, "),
        ("  rocm-ld-library-path:", "    simulate:"), "images.rocm-ld-library-path.simulate.prefix",
        "'rocm/lib' must be an absolute path"),
    bad("simulate-via-unknown",
        sub("LD_LIBRARY_PATH}\n    debian: {suite: trixie, packages: [libamdhip64-7/experimental]}\n"
            "  rocm-absent",
            "ldconfig}\n    debian: {suite: trixie, packages: [libamdhip64-7/experimental]}\n  rocm-absent"),
        ("  rocm-ld-library-path:", "    simulate:"), "images.rocm-ld-library-path.simulate.via",
        "'ldconfig' is not one of 'ld.so.conf.d', 'LD_LIBRARY_PATH'"),
    bad("simulate-rootfs-unknown", sub("rootfs: debootstrap-minbase", "rootfs: alpine"),
        ("  clean-minbase:", "    simulate:"), "images.clean-minbase.simulate.rootfs",
        "'alpine' is not one of"),
    bad("image-expect-unknown", under("  rocm-absent:", "    expect: runtime-missing", "    expect: fail"),
        ("  rocm-absent:", "    expect:"), "images.rocm-absent.expect",
        "'fail' is not one of 'pass', 'runtime-missing'"),
    bad("image-python-unsupported", under("  sglang-rocm:", 'python: ["3.10"]', 'python: ["3.9"]'),
        ("  sglang-rocm:", "    python:"), "images.sglang-rocm.python[0]", "'3.9' is not supported"),
    bad("runner-empty", under("  mi355x:", "runner: [self-hosted, linux, x64, rocm, mi355x]", "runner: []"),
        ("  mi355x:", "    runner:"), "hardware.mi355x.runner", "list the runner labels"),
    bad("nodes-three", under("  mi350x-pd:", "nodes: 2 ", "nodes: 3 "),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "1 (one runner) or 2"),
    bad("nodes-zero", under("  mi350x-pd:", "nodes: 2 ", "nodes: 0 "),
        ("  mi350x-pd:", "    nodes:"), "hardware.mi350x-pd.nodes", "1 (one runner) or 2"),
    bad("prerelease-unknown", sub("prerelease: separate-index", "prerelease: never"),
        "  prerelease:", "publish.prerelease", "'never' is not one of 'publish', 'separate-index', 'skip'"),
    bad("github-release-quoted", sub("github_release: true", 'github_release: "true"'),
        "  github_release:", "publish.github_release", "expected true or false, got 'true'"),
    # ---------------------------------------------------------------- YAML itself
    bad("tab-indentation", sub("    backend: cuda\n", "\tbackend: cuda\n"),
        "\tbackend", "", "invalid YAML: found a tab character"),
    bad("unclosed-quote", sub('version: "0.1.0"', 'version: "0.1.0'),
        "  own_libraries:", "", "invalid YAML: did not find expected key"),
    bad("unclosed-flow-mapping",
        under("  rocm-distro:", "simulate: {runtime: system}", "simulate: {runtime: system"),
        ("  rocm-distro:", "    debian:"), "", "invalid YAML: did not find expected ',' or '}'"),
    bad("undefined-alias", sub("images: [clean-minbase]", "images: *nowhere"),
        ("  cpu:", "    images:"), "", "invalid YAML: found undefined alias"),
    bad("nul-in-text", sub("  floor: manylinux", "  floor: \0manylinux"),
        "  floor:", "", "the character '\\x00' is not allowed in YAML text"),
    bad("escape-in-text", sub("  floor: manylinux", "  floor: \x1b[2Jmanylinux"),
        "  floor:", "", "the character '\\x1b' is not allowed in YAML text"),
    bad("document-is-a-list", lambda text: "- " + text.replace("\n", "\n  "),
        "- # yaml", "", "expected a mapping with keys schema_version, engine"),
    bad("second-document", lambda text: text + "---\nschema_version: 1\n",
        "---", "", "but found another document"),
    bad("nested-too-deep", sub("\npython:", "\nx-deep: " + "[" * 65 + "]" * 65 + "\npython:"),
        "x-deep:", "", "lists and mappings nested more than 64 deep"),
    # ---------------------------------------------------------------- merge keys (<<)
    bad("merge-of-a-scalar", sub(CPU, "  cpu:\n    <<: 5\n    distribution: xfer-engine-cpu\n"),
        ("  cpu:", "    <<:"), "variants.cpu.<<", "a merge key (<<) takes a mapping or a list of mappings"),
    bad("merge-list-with-a-scalar",
        sub(CPU, "  cpu:\n    <<: [{toolkit: '1'}, 5]\n    distribution: xfer-engine-cpu\n"),
        ("  cpu:", "    <<:"), "variants.cpu.<<", "takes a mapping or a list of mappings"),
    bad("merge-of-itself", sub(CPU, "  cpu:\n    <<: &self {<<: *self}\n    distribution: xfer-engine-cpu\n"),
        ("  cpu:", "    <<:"), "variants.cpu.<<", "includes the mapping that holds it"),
    bad("merged-unknown-key",
        with_base("backend: cpu, colour: red"),
        "x-base:", "variants.cpu.colour", "unknown key"),
    bad("merged-bad-value",
        with_base("backend: cpu, device_code: maybe"),
        "x-base:", "variants.cpu.device_code", "expected true or false, got 'maybe'"),
    bad("own-key-line-not-the-merged-one",
        then(sub('toolkit: "4.0"', 'toolkit: "4.0; id"'),
             sub("  musa:\n    distribution: xfer-engine-musa\n",
                 "  musa:\n    <<: {toolkit: '1.0'}\n    distribution: xfer-engine-musa\n")),
        ("  musa:", "    toolkit:"), "variants.musa.toolkit", "'4.0; id' is not a toolkit version"),
    # ---------------------------------------------------------------- text that tries to forge lines
    bad("key-with-newline", cpu_extra('"bad\\nmatrix.yaml:1: forged: error": 1'),
        ("  cpu:", '    "bad'), "variants.cpu.'bad\\nmatrix.yaml:1: forged: error'", "unknown key"),
    bad("key-with-carriage-return", cpu_extra('"bad\\rerror: forged": 1'),
        ("  cpu:", '    "bad'), "variants.cpu.'bad\\rerror: forged'", "unknown key"),
    bad("key-with-ansi-escape", cpu_extra('"\\e[2Jx": 1'),
        ("  cpu:", '    "\\e'), "variants.cpu.'\\x1b[2Jx'", "unknown key"),
    bad("key-with-line-separator", cpu_extra('"a\\Lb": 1'),
        ("  cpu:", '    "a\\L'), "variants.cpu.'a\\u2028b'", "unknown key"),
    bad("variant-name-with-newline", sub("\n  musa:\n", '\n  "musa\\nerror: forged":\n'),
        '  "musa', "variants.'musa\\nerror: forged'",
        "variant name 'musa\\nerror: forged' must be lowercase"),
    bad("env-key-with-newline", cpu_extra('env: {"A\\nB": x}'),
        ("  cpu:", "    env:"), "variants.cpu.env.'A\\nB'", "'A\\nB' is not an environment variable name"),
    bad("value-with-newline", sub('toolkit: "4.0"', 'toolkit: "4.0\\nerror: forged"'),
        ("  musa:", "    toolkit:"), "variants.musa.toolkit",
        "'4.0\\nerror: forged' is not a toolkit version"),
    bad("image-reference-with-newline", sub("images: [clean-minbase]", 'images: ["clean\\nminbase"]'),
        ("  cpu:", "    images:"), "variants.cpu.images[0]", "image 'clean\\nminbase' is not defined"),
    bad("tag-with-encoded-newline", sub('version: "0.1.0"', "version: !foo%0Aerror x"),
        "  version:", "engine.version", "cannot read 'x' as !foo\\nerror"),
    # ------------------------------------- every value is one line (it reaches a shell or an env file)
    bad("define-value-with-newline", sub(DEFINES_HIP, 'cmake_defines: {XFER_BACKEND: "hip\\nCIBW_SKIP=*"}'),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.XFER_BACKEND",
        "the value holds '\\n' (a control character): a matrix value is one line"),
    bad("define-value-with-carriage-return", sub(DEFINES_CPU, 'cmake_defines: {XFER_BACKEND: "cpu\\r"}'),
        ("  cpu:", "    cmake_defines:"), "variants.cpu.cmake_defines.XFER_BACKEND", "the value holds '\\r'"),
    bad("define-value-with-line-separator", sub(DEFINES_CPU, 'cmake_defines: {XFER_BACKEND: "cpu\\Lx"}'),
        ("  cpu:", "    cmake_defines:"), "variants.cpu.cmake_defines.XFER_BACKEND",
        "(LINE SEPARATOR): a matrix value is one line"),
    bad("define-value-with-escape", sub(DEFINES_CPU, 'cmake_defines: {XFER_BACKEND: "cpu\\e[2J"}'),
        ("  cpu:", "    cmake_defines:"), "variants.cpu.cmake_defines.XFER_BACKEND",
        "the value holds '\\x1b'"),
    bad("setting-value-with-newline", cpu_extra('config_settings: {build-dir: "b\\nCIBW_BUILD=*"}'),
        ("  cpu:", "    config_settings:"), "variants.cpu.config_settings.build-dir",
        "$GITHUB_ENV and $GITHUB_OUTPUT, cibuildwheel's environment and config-settings"),
    bad("exclude-with-newline", musa_exclude("libmusart.so*\\nx"),
        ("  musa:", "    exclude:"), "variants.musa.exclude[0]", "the value holds '\\n'"),
    bad("before-all-with-newline",
        sub("  # before_all: bash scripts/deps.sh", '  before_all: "bash deps.sh\\nrm -rf /"'),
        "  before_all:", "engine.before_all", "the value holds '\\n'"),
    bad("runner-label-with-newline", sub("runner: [self-hosted, linux, x64, rocm, mi300x]",
                                         'runner: [self-hosted, "linux\\nx", x64, rocm, mi300x]'),
        ("  mi300x:", "    runner:"), "hardware.mi300x.runner[1]", "the value holds '\\n'"),
    bad("gpu-with-carriage-return", sub('gpu: "AMD Instinct MI300X"', 'gpu: "AMD Instinct MI300X\\r"'),
        ("  mi300x:", "    gpu:"), "hardware.mi300x.gpu", "the value holds '\\r'"),
    bad("smoke-word-with-newline", sub('["xfer-master", "--version"]', '["xfer-master", "--version\\nx"]'),
        ("    commands:", '      - ["xfer-master"'), "engine.smoke.commands[0][1]", "the value holds '\\n'"),
    bad("description-with-newline", sub('"A clean Debian with nothing', '"A clean\\nDebian with nothing'),
        ("  clean-minbase:", "    description:"), "images.clean-minbase.description",
        "the value holds '\\n'"),
    bad("cmake-arg-with-newline", sub('"-DXFER_BUILD_PYTHON=OFF"', '"-DXFER_BUILD_PYTHON=OFF\\n-DX=1"'),
        "    cmake_args:", "engine.prebuild.cmake_args[0]", "the value holds '\\n'"),
    bad("define-key-with-newline", sub(DEFINES_HIP, 'cmake_defines: {"X\\nY": hip}'),
        ("  rocm:", "    cmake_defines:"), "variants.rocm.cmake_defines.'X\\nY'",
        "is not a CMake variable name"),
]
# fmt: on


def _run_plan(tmp_path: Path, text: str, *argv: str) -> tuple[int, str, str]:
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    if not (tmp_path / "engine").exists():
        (tmp_path / "engine").symlink_to(ROOT / "engine")  # engine.source must hold the project
    return _main(["--matrix", str(path), *(argv or ("plan",))])


def _main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def assert_one_error(err: str, problems: int | None = None) -> None:
    """One `error:` line; with `problems`, exactly that many lines (none forged by a key)."""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert [line.startswith("error: ") for line in lines].count(True) == 1, err
    assert lines[0].startswith("error: "), err
    if problems is not None:
        assert len(lines) == problems, err


def test_the_table_holds_over_100_distinct_mutations() -> None:
    texts = {case.mutation(REAL) for param in CASES for case in param.values if isinstance(case, Bad)}
    assert len({param.id for param in CASES}) == len(CASES)
    assert len(texts) == len(CASES) >= 100
    assert REAL not in texts


@pytest.mark.parametrize("case", CASES)
def test_bad_matrix_is_one_located_error(case: Bad, tmp_path: Path) -> None:
    text = case.mutation(REAL)
    code, out, err = _run_plan(tmp_path, text)
    assert code == 3, err
    assert out == ""
    with pytest.raises(MatrixError) as info:
        matrix.loads(text, path=tmp_path / "matrix.yaml", display="matrix.yaml")
    assert_one_error(err, len(info.value.problems))
    line = line_of(text, case.line)
    where = f"matrix.yaml:{line}:" if line is not None else "matrix.yaml:"
    located = [str(p) for p in info.value.problems if p.key == case.key]
    assert located, [str(p) for p in info.value.problems]
    assert any(p.startswith(where) and case.fragment in p for p in located), located
    assert f"{where}{f' {case.key}:' if case.key else ''}" in err
    assert case.fragment in err


# ------------------------------------------------------------------------------------------------
# What reaches cibuildwheel's parsers


AWKWARD = [
    "$(touch pwned)", "`touch pwned`", "${HOME}", "<(cat /etc/passwd)", ">(x)", "a'b\"c", "\\",
    "line\nbreak", "A=B", "", " lead and trail ", "semi;colon|pipe&amp", "~user", "* ? [a]", "é ✓",
]  # fmt: skip


@pytest.mark.parametrize("value", AWKWARD)
def test_values_reach_cibuildwheel_literally(value: str) -> None:
    """Through cibuildwheel's own bashlex evaluator; no command runs (processes are forbidden)."""
    environment = pytest.importorskip("cibuildwheel.environment")
    parsed = environment.parse_environment(f"K={cibw.quote(value)} L=1").as_dictionary({})
    assert parsed == {"K": value, "L": "1"}


@settings(max_examples=300, deadline=None, database=None)
@given(value=st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), max_size=12))
def test_any_value_round_trips_through_bashlex(value: str) -> None:
    environment = pytest.importorskip("cibuildwheel.environment")
    assert environment.parse_environment(f"K={cibw.quote(value)}").as_dictionary({}) == {"K": value}


def test_cibuildwheel_config_of_awkward_values(tmp_path: Path) -> None:
    # A line break in an env value is refused by the matrix checks (test_matrix_errors).
    awkward = [value for value in AWKWARD if "\n" not in value]
    env = ", ".join(f"V{i}: {json.dumps(value)}" for i, value in enumerate(awkward))
    text = cpu_extra(f"env: {{{env}}}")(REAL)
    code, out, err = _run_plan(tmp_path, text, "cibuildwheel-config", "--variant", "cpu", "--format", "json")
    assert code == 0, err
    environment = pytest.importorskip("cibuildwheel.environment")
    rendered = json.loads(out)["environment"]
    parsed = environment.parse_environment(rendered).as_dictionary({})
    ours = {k: v for k, v in parsed.items() if k.startswith("V")}
    assert ours == {f"V{i}": v for i, v in enumerate(awkward)}


def test_an_unchecked_name_is_refused_where_it_is_rendered() -> None:
    with pytest.raises(cli.UsageError, match="cibuildwheel would evaluate it"):
        cibw._name("X=$(touch f) Y")


# ------------------------------------------------------------------------------------------------
# Files that are not regular files


def test_a_character_device_is_refused_unread() -> None:
    code, _out, err = _main(["--matrix", "/dev/zero", "plan"])
    assert code == 3
    assert err == "error: /dev/zero: cannot read: a character device, not a regular file\n"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "matrix.yaml"
    os.mkfifo(fifo)
    code, _, err = _main(["--matrix", str(fifo), "plan"])
    assert code == 3
    assert err == f"error: {fifo}: cannot read: a FIFO, not a regular file\n"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    code, _, err = _main(["--matrix", str(tmp_path), "plan"])
    assert code == 3
    assert err == f"error: {tmp_path}: cannot read: a directory, not a file\n"


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "matrix.yaml"
    with big.open("wb") as f:
        f.truncate(matrix.MAX_MATRIX_BYTES + 1)  # sparse: a gigabyte would cost as little
    code, _, err = _main(["--matrix", str(big), "plan"])
    assert code == 3
    assert f"cannot read: larger than {matrix.MAX_MATRIX_BYTES:,} bytes" in err
    assert_one_error(err, 1)


def test_a_file_at_the_size_cap_is_read(tmp_path: Path) -> None:
    text = REAL + "#" * (matrix.MAX_MATRIX_BYTES - len(REAL.encode()))
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    assert path.stat().st_size == matrix.MAX_MATRIX_BYTES
    assert matrix.load(path, backends_dir=BACKENDS).matrix.engine.import_name == "xfer"


def test_a_missing_file_and_a_nul_in_the_path(tmp_path: Path) -> None:
    code, _, err = _main(["--matrix", str(tmp_path / "nowhere.yaml"), "plan"])
    assert (code, err) == (3, f"error: {tmp_path / 'nowhere.yaml'}: cannot read: No such file or directory\n")
    code, _, err = _main(["--matrix", "matrix\0.yaml", "plan"])
    assert code == 3
    assert_one_error(err, 1)
    assert "matrix\\x00.yaml" in err


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "m\nerror: forged.yaml"
    path.write_text("schema_version: 2\n", encoding="utf-8")
    code, _, err = _main(["--matrix", str(path), "plan"])
    assert code == 3
    assert_one_error(err)
    assert "m\\nerror: forged.yaml:1: schema_version" in err


def test_an_alias_bomb_stops_at_the_value_budget(tmp_path: Path) -> None:
    variant = "{distribution: d, backend: cpu, exclude: *l}"
    names = [f"v{i}" for i in range(dataschema.MAX_VALUES // 500 + 1)]
    bomb = "x-l: &l [" + ", ".join(["libz.so"] * 1000) + "]\n"
    text = sub("\nvariants:\n", "\n" + bomb + "variants:\n" + "".join(f"  {n}: {variant}\n" for n in names))(
        REAL
    )
    code, _, err = _run_plan(tmp_path, text)
    assert code == 3
    assert f"more than {dataschema.MAX_VALUES} values" in err
    assert_one_error(err, 1)


# ------------------------------------------------------------------------------------------------
# The soname-glob overlap behind the own-library guard


@pytest.mark.parametrize(
    ("a", "b", "common"),
    [
        ("*.so*", "libxfer*", True),
        ("lib*.so.1", "libxfer*", True),
        ("lib*.so.1", "libxfer.so.1", True),
        ("libamdhip64.so*", "libxfer*", False),
        ("libcuda.so*", "libcudart.so*", False),
        ("libcuda*", "libcudart.so*", True),
        ("lib[!x]*", "libxfer*", False),
        ("lib[x-z]fer.so", "libxfer*", True),
        ("lib[]x]fer", "libxfer", True),
        ("lib[", "lib[", True),
        ("lib[z-a]", "lib*", False),
        ("*", "", True),
        ("?", "", False),
        ("a*b*c", "*c*b*a*", True),
        ("a*b", "b*a", False),
    ],
)
def test_globs_overlap(a: str, b: str, common: bool) -> None:
    assert checks._globs_overlap(a, b) is common
    assert checks._globs_overlap(b, a) is common
    name = globs.common_match(a, b)
    if common:
        assert name is not None and fnmatch.fnmatchcase(name, a) and fnmatch.fnmatchcase(name, b)


_GLOB_ALPHABET = "ab.*?[]!-"
_NAMES = ["".join(t) for n in range(5) for t in itertools.product("ab.[]!-x", repeat=n)]


@settings(max_examples=400, deadline=None, database=None)
@given(
    a=st.text(st.sampled_from(_GLOB_ALPHABET), max_size=7),
    b=st.text(st.sampled_from(_GLOB_ALPHABET), max_size=7),
)
def test_overlap_agrees_with_fnmatch(a: str, b: str) -> None:
    """A found name matches both; when none is found, no short name matches both either."""
    name = globs.common_match(a, b)
    if name is not None:
        assert fnmatch.fnmatchcase(name, a) and fnmatch.fnmatchcase(name, b)
    else:
        assert not any(fnmatch.fnmatchcase(s, a) and fnmatch.fnmatchcase(s, b) for s in _NAMES)


def test_long_globs_stay_fast() -> None:
    a = "*a" * 120 + "[!a]"
    b = "a*" * 120 + "b"
    assert globs.common_match(a, b) is not None
    assert globs.common_match("[a-c]" * 50, "[d-f]*") is None


# ------------------------------------------------------------------------------------------------
# YAML merge keys


ROCM, MUSA = "    distribution: xfer-engine-rocm\n", "    distribution: xfer-engine-musa\n"
MERGED = then(
    sub("\nvariants:\n", "\nx-gpu: &gpu\n  runtime_needed: [libfoo]\n  architectures: [gfx000]\nvariants:\n"),
    sub(ROCM, "    <<: [*gpu, {toolkit: '9.9', runtime_needed: [libbar]}]\n" + ROCM),
    sub(MUSA, "    <<: *gpu\n" + MUSA),
)


def test_merge_keys_work(tmp_path: Path) -> None:
    text = MERGED(REAL)
    code, out, err = _run_plan(tmp_path, text)
    assert code == 0, err
    assert "build steps from matrix.yaml" in out
    loaded = matrix.loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    plain = matrix.loads(REAL, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    rocm, musa = loaded.matrix.variants["rocm"], loaded.matrix.variants["musa"]
    assert rocm.toolkit == "7.2"  # the mapping's own key wins over every merged one
    assert rocm.architectures == ("gfx942", "gfx950")
    assert rocm.runtime_needed == ("libfoo",)  # the first merged mapping wins over a later one
    assert (musa.runtime_needed, musa.architectures) == (("libfoo",), ("gfx000",))
    assert musa.exclude == plain.matrix.variants["musa"].exclude
    assert len(make_plan(loaded).builds) == len(make_plan(plain).builds)


def _chain(length: int) -> str:
    """variants.cpu takes its backend through `length` merged mappings, each merging the last."""
    anchors = "x-c0: &c0 {backend: cpu}\n" + "".join(
        f"x-c{i}: &c{i} {{<<: *c{i - 1}}}\n" for i in range(1, length)
    )
    text = sub("\nvariants:\n", "\n" + anchors + "variants:\n")(REAL)
    return sub("    distribution: xfer-engine-cpu\n    backend: cpu\n",
               f"    <<: *c{length - 1}\n    distribution: xfer-engine-cpu\n")(text)


def test_merges_of_merges(tmp_path: Path) -> None:
    loaded = matrix.loads(_chain(30), path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)
    assert loaded.matrix.variants["cpu"].backend == "cpu"
    code, _, err = _run_plan(tmp_path, _chain(40))
    assert code == 3
    assert "variants.cpu.<<: merge keys (<<) nested more than 32 deep" in err


# ------------------------------------------------------------------------------------------------
# The command line


def test_select_brace_expansion_is_capped(tmp_path: Path) -> None:
    code, out, err = _main(["--matrix", str(ROOT / "matrix.yaml"), "plan", "--select", "{1..100000}"])
    assert code == 2
    assert out == ""
    assert_one_error(err, 1)
    assert "expands to more than 4096 patterns" in err
