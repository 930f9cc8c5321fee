"""`release verify` rule by rule, on small wheels built here with the real compiler.

One good ROCm wheel passes every rule; each case changes one thing and must make exactly the
named rule fire. Libraries are tiny C files compiled with `gcc -shared -fPIC`; the ROCm runtime
is a stand-in built here with the soname `libamdhip64.so.5` (never the real one).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from release.config import matrix as matrix_mod
from release.inspect.report import SCHEMA_FILE
from release.inspect.rules import RULE_IDS
from release.inspect.verify import verify_wheel
from release.plan.resolve import variant_for_distribution
from release.plan.steps import make_plan
from tests.unit.test_rules_abi import MATRIX as RULES_ABI_MATRIX
from tests.unit.test_rules_good import cyclonedx, grafted_origins

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

MATRIX = """\
schema_version: 1
engine:
  source: engine
  import_name: xfer
  version: "0.1.0"
python: ["3.12", "3.13"]
platform:
  floor: manylinux_2_28_x86_64
  system_libraries: ["libdeclared_standin.so.*"]
variants:
  cpu:
    distribution: xfer-engine-cpu
    backend: cpu
  rocm:
    distribution: xfer-engine-rocm
    backend: rocm
    toolkit: "5.2"
    exclude: ["libamdhip64.so*", "libhsa-runtime64.so*"]
    architectures: [gfx942, gfx950]
    device_code: false
  rocmdev:
    distribution: xfer-engine-rocmdev
    backend: rocm
    exclude: ["libamdhip64.so*", "libhsa-runtime64.so*"]
    architectures: [gfx942, gfx950]
    device_code: true
"""

GUARDED_INIT = b'''\
"""The engine's import package (test wheel)."""
from importlib.metadata import distributions

_mine = [d for d in distributions() if (d.metadata["Name"] or "").startswith("xfer-engine")]
if len(_mine) > 1:
    raise ImportError("two xfer-engine variants are installed")
'''
UNGUARDED_INIT = b'"""No guard at all."""\nfrom ._xfer import *\n'

SOURCES = {
    # Test stand-in for the ROCm runtime: only its soname matters.
    "hip_standin.c": "int xfer_test_hip_standin_get_device_count(void) { return 0; }\n",
    "ext_rocm.c": (
        "int xfer_test_hip_standin_get_device_count(void);\n"
        "int PyInit__xfer(void) { return xfer_test_hip_standin_get_device_count(); }\n"
    ),
    "ext_plain.c": "int PyInit__xfer(void) { return 42; }\n",
    "core.c": "int xfer_test_core(int x) { return x * 3 + 1; }\n",
    "dup.c": "long xfer_test_dup(long x) { return x * 7 - 5; }\n",
    "debug.c": "int xfer_test_debug(int x) { int y = x + 2; return y * y; }\n",
    "runpath.c": "int xfer_test_runpath(int x) { return x - 9; }\n",
    "device.c": "int xfer_test_device(int x) { return x ^ 0x5a; }\n",
    "undeclared_standin.c": "int xfer_test_undeclared(void) { return 11; }\n",
    "declared_standin.c": "int xfer_test_declared(void) { return 12; }\n",
    "uses_undeclared.c": (
        "int xfer_test_undeclared(void);\nint xfer_test_uses(void) { return xfer_test_undeclared(); }\n"
    ),
    "uses_declared.c": (
        "int xfer_test_declared(void);\nint xfer_test_uses2(void) { return xfer_test_declared(); }\n"
    ),
    "new_glibc.c": (
        "#include <pthread.h>\n#include <dlfcn.h>\n"
        "static void *run(void *p) { return p; }\n"
        "int xfer_test_new_glibc(void) { pthread_t t; if (pthread_create(&t, 0, run, 0)) return -1;\n"
        '  return pthread_join(t, 0) + (dlsym(RTLD_DEFAULT, "x") != 0); }\n'
    ),
}


def _gcc(out: Path, source: Path, *extra: str) -> Path:
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(source), *extra], check=True)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Every ELF file the cases use, compiled once."""
    if shutil.which("gcc") is None or shutil.which("objcopy") is None:
        pytest.skip("gcc and objcopy are needed to build the test libraries")
    d = tmp_path_factory.mktemp("libs")
    for name, text in SOURCES.items():
        (d / name).write_text(text)
    hip = _gcc(d / "libamdhip64.so.5", d / "hip_standin.c", "-Wl,-soname,libamdhip64.so.5")
    _gcc(d / "libamdhip64.so.6", d / "hip_standin.c", "-Wl,-soname,libamdhip64.so.6")
    _gcc(
        d / "libundeclared_standin.so.1", d / "undeclared_standin.c", "-Wl,-soname,libundeclared_standin.so.1"
    )
    _gcc(d / "libdeclared_standin.so.1", d / "declared_standin.c", "-Wl,-soname,libdeclared_standin.so.1")
    link = ["-Wl,--no-as-needed", f"-L{d}"]
    built = {
        "hip_standin": hip,
        "ext_rocm": _gcc(
            d / "_xfer_rocm.so",
            d / "ext_rocm.c",
            *link,
            "-l:libamdhip64.so.5",
            "-Wl,-rpath,$ORIGIN/../xfer_engine_rocm.libs",
        ),
        "ext_rocm6": _gcc(
            d / "_xfer_rocm6.so",
            d / "ext_rocm.c",
            *link,
            "-l:libamdhip64.so.6",
            "-Wl,-rpath,$ORIGIN/../xfer_engine_rocm.libs",
        ),
        "ext_plain": _gcc(d / "_xfer_plain.so", d / "ext_plain.c"),
        "core": _gcc(d / "libxfercore.so", d / "core.c", "-Wl,-soname,libxfercore-1a2b3c4d.so.0", "-s"),
        "dup": _gcc(d / "libdup.so", d / "dup.c", "-Wl,-soname,libdup.so.1"),
        "dup_renamed": _gcc(d / "libdup2.so", d / "dup.c", "-Wl,-soname,libdup-9f8e7d6c.so.1"),
        "debug": _gcc(d / "libdebug.so", d / "debug.c", "-g"),
        "runpath": _gcc(d / "librunpath.so", d / "runpath.c", "-Wl,--enable-new-dtags,-rpath,/tmp/build/lib"),
        "uses_undeclared": _gcc(
            d / "libuses.so", d / "uses_undeclared.c", *link, "-l:libundeclared_standin.so.1"
        ),
        "uses_declared": _gcc(d / "libuses2.so", d / "uses_declared.c", *link, "-l:libdeclared_standin.so.1"),
        "new_glibc": _gcc(d / "libnewglibc.so", d / "new_glibc.c"),
    }
    for arches, key in (("gfx942", "device_942"), ("gfx942 gfx950", "device_all")):
        payload = d / f"{key}.bin"
        payload.write_bytes(
            b"__CLANG_OFFLOAD_BUNDLE__"
            + b"".join(f"\0hipv4-amdgcn-amd-amdhsa--{a}\0".encode() for a in arches.split())
            + b"\0" * 64
        )
        lib = _gcc(d / f"lib{key}.so", d / "device.c")
        subprocess.run(["objcopy", "--add-section", f".hip_fatbin={payload}", str(lib)], check=True)
        built[key] = lib
    return {k: v.read_bytes() for k, v in built.items()}


@dataclass
class WheelSpec:
    """A wheel to build: files by member path, with their unix modes."""

    distribution: str = "xfer_engine_rocm"
    version: str = "0.1.0"
    tag: str = "cp312-cp312-manylinux_2_28_x86_64"
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    metadata_name: str | None = None
    requires_python: str | None = ">=3.12"
    """METADATA's Requires-Python (None: no such field)."""
    sbom: bool = True
    """auditwheel's SBOM, naming the wheel and every grafted library (when it grafts any)."""

    @property
    def requires(self) -> str:
        return "" if self.requires_python is None else f"Requires-Python: {self.requires_python}\n"

    def build(self, directory: Path) -> Path:
        dist_info = f"{self.distribution}-{self.version}.dist-info"
        name = self.metadata_name or self.distribution.replace("_", "-")
        files = dict(self.files)
        path = directory / f"{self.distribution}-{self.version}-{self.tag}.whl"
        origins = grafted_origins(list(files))
        if self.sbom and origins:
            sbom = cyclonedx(self.distribution, self.version, path.name, origins)
            files[f"{dist_info}/sboms/auditwheel.cdx.json"] = (sbom, 0o644)
        files[f"{dist_info}/METADATA"] = (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {self.version}\n{self.requires}".encode(),
            0o644,
        )
        files[f"{dist_info}/WHEEL"] = (
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {self.tag}\n".encode(),
            0o644,
        )
        record = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for member, (data, mode) in files.items():
                info = zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0))
                info.external_attr = (0o100000 | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(f"{member},sha256={digest},{len(data)}")
            record.append(f"{dist_info}/RECORD,,")
            zf.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
        return path


def good_rocm(libs: dict[str, bytes]) -> WheelSpec:
    """A ROCm wheel that passes every rule."""
    return WheelSpec(
        files={
            "xfer/__init__.py": (GUARDED_INIT, 0o644),
            "xfer/_xfer.cpython-312-x86_64-linux-gnu.so": (libs["ext_rocm"], 0o755),
            "xfer_engine_rocm.libs/libxfercore-1a2b3c4d.so.0": (libs["core"], 0o755),
            "xfer_engine_rocm-0.1.0.data/scripts/xfer-run": (b'#!/bin/sh\nexec python -m xfer "$@"\n', 0o755),
        }
    )


def _add(key: str, member: str, mode: int = 0o755) -> Callable[[WheelSpec, dict[str, bytes]], None]:
    def change(spec: WheelSpec, libs: dict[str, bytes]) -> None:
        spec.files[member] = (libs[key], mode)

    return change


def _set(**values: object) -> Callable[[WheelSpec, dict[str, bytes]], None]:
    def change(spec: WheelSpec, libs: dict[str, bytes]) -> None:
        for key, value in values.items():
            setattr(spec, key, value)

    return change


def _chain(
    *changes: Callable[[WheelSpec, dict[str, bytes]], None],
) -> Callable[[WheelSpec, dict[str, bytes]], None]:
    def change(spec: WheelSpec, libs: dict[str, bytes]) -> None:
        for c in changes:
            c(spec, libs)

    return change


def _file(member: str, data: bytes, mode: int) -> Callable[[WheelSpec, dict[str, bytes]], None]:
    def change(spec: WheelSpec, libs: dict[str, bytes]) -> None:
        spec.files[member] = (data, mode)

    return change


def _rename(member: str, new: str) -> Callable[[WheelSpec, dict[str, bytes]], None]:
    def change(spec: WheelSpec, libs: dict[str, bytes]) -> None:
        spec.files[new] = spec.files.pop(member)

    return change


def _drop(member: str) -> Callable[[WheelSpec, dict[str, bytes]], None]:
    def change(spec: WheelSpec, libs: dict[str, bytes]) -> None:
        del spec.files[member]

    return change


@dataclass(frozen=True)
class Case:
    name: str
    change: Callable[[WheelSpec, dict[str, bytes]], None]
    rule: str
    status: str
    variant: str | None = None
    release: bool = False
    expected_version: str | None = None
    paths: tuple[str, ...] = ()


EXT = "xfer/_xfer.cpython-312-x86_64-linux-gnu.so"
LIBS = "xfer_engine_rocm.libs"

CASES = [
    Case(
        "vendored runtime stand-in",
        _add("hip_standin", f"{LIBS}/libamdhip64.so.5"),
        "vendored-runtime",
        "fail",
        paths=(f"{LIBS}/libamdhip64.so.5",),
    ),
    Case(
        "vendored runtime renamed by repair",
        _add("hip_standin", f"{LIBS}/libamdhip64-0a1b2c3d.so.5"),
        "vendored-runtime",
        "fail",
        paths=(f"{LIBS}/libamdhip64-0a1b2c3d.so.5",),
    ),
    # The matrix declares ROCm 5.2: an extension built against HIP 6 fails to import there.
    Case("extension binds another toolkit's runtime", _add("ext_rocm6", EXT), "runtime-abi", "fail"),
    Case("extension without the runtime NEEDED", _add("ext_plain", EXT), "missing-runtime-needed", "fail"),
    Case(
        "same library under two names",
        _chain(_add("dup", f"{LIBS}/libdup.so.1"), _add("dup_renamed", f"{LIBS}/libdup-9f8e7d6c.so.1")),
        "duplicate-library",
        "fail",
        paths=(f"{LIBS}/libdup.so.1", f"{LIBS}/libdup-9f8e7d6c.so.1"),
    ),
    Case(
        "same soname twice",
        _chain(_add("dup", f"{LIBS}/libdup.so.1"), _add("dup", "xfer/libdup.so.1")),
        "duplicate-library",
        "fail",
    ),
    Case(
        "unstripped -g library",
        _add("debug", f"{LIBS}/libdebug.so"),
        "debug-info",
        "fail",
        paths=(f"{LIBS}/libdebug.so",),
    ),
    Case(
        "absolute RUNPATH /tmp/build/lib",
        _add("runpath", f"{LIBS}/librunpath.so"),
        "build-path-rpath",
        "fail",
        paths=(f"{LIBS}/librunpath.so",),
    ),
    Case(
        "GLIBC_2.34 symbols in a manylinux_2_17 wheel",
        _chain(_add("new_glibc", f"{LIBS}/libnewglibc.so"), _set(tag="cp312-cp312-manylinux_2_17_x86_64")),
        "platform-floor",
        "fail",
        paths=(f"{LIBS}/libnewglibc.so",),
    ),
    Case(
        "GLIBC_2.34 symbols fit a manylinux_2_34 tag, newer than the floor: warning",
        _chain(_add("new_glibc", f"{LIBS}/libnewglibc.so"), _set(tag="cp312-cp312-manylinux_2_34_x86_64")),
        "platform-floor",
        "warn",
    ),
    Case(
        "tag newer than the floor with --release",
        _set(tag="cp312-cp312-manylinux_2_34_x86_64"),
        "platform-floor",
        "fail",
        release=True,
    ),
    Case("linux_x86_64 tag", _set(tag="cp312-cp312-linux_x86_64"), "platform-floor", "warn"),
    Case(
        "NEEDED on an undeclared library",
        _add("uses_undeclared", f"{LIBS}/libuses.so"),
        "external-dependency",
        "fail",
        paths=(f"{LIBS}/libuses.so",),
    ),
    Case(
        ".hip_fatbin with gfx942 in a device_code: false variant",
        _add("device_942", f"{LIBS}/libdev.so"),
        "device-code",
        "fail",
        paths=(f"{LIBS}/libdev.so",),
    ),
    Case(
        "declared gfx950 missing from the code objects",
        _chain(_add("device_942", f"{LIBS}/libdev.so"), _set(distribution="xfer_engine_rocmdev")),
        "device-code",
        "fail",
    ),
    Case(
        "wrong distribution name for the variant",
        _set(distribution="xfer_engine_rokm"),
        "wheel-name",
        "fail",
        variant="rocm",
    ),
    Case(
        "distribution that is no variant's: a foreign wheel",
        _set(distribution="xfer_engine_rokm"),
        "wheel-name",
        "not-applicable",
    ),
    Case(
        "python tag outside the matrix",
        _chain(
            _set(tag="cp311-cp311-manylinux_2_28_x86_64", requires_python=">=3.11"),
            _rename(EXT, EXT.replace("cpython-312", "cpython-311")),
        ),
        "wheel-name",
        "fail",
    ),
    Case(
        "Requires-Python that excludes the wheel's Python",
        _set(requires_python=">=3.13"),
        "requires-python",
        "fail",
    ),
    Case(
        "version other than the release tag",
        lambda s, libs: None,
        "wheel-name",
        "fail",
        expected_version="v0.2.0",
    ),
    Case("METADATA name differs from the file name", _set(metadata_name="xfer-engine"), "wheel-name", "fail"),
    Case(
        "script without its run bit",
        _file("xfer_engine_rocm-0.1.0.data/scripts/xfer-run", b"#!/bin/sh\necho hi\n", 0o644),
        "non-executable-script",
        "fail",
        paths=("xfer_engine_rocm-0.1.0.data/scripts/xfer-run",),
    ),
    Case(
        "__init__.py without the guard",
        _file("xfer/__init__.py", UNGUARDED_INIT, 0o644),
        "variant-conflict",
        "fail",
    ),
    Case("no __init__.py at all", _drop("xfer/__init__.py"), "variant-conflict", "fail"),
    Case(
        "a grafted library and no SBOM, --release",
        _set(sbom=False),
        "sbom-lists-grafted",
        "fail",
        release=True,
        paths=(f"{LIBS}/libxfercore-1a2b3c4d.so.0",),
    ),
    # Must not fire:
    Case(
        "declared system library", _add("uses_declared", f"{LIBS}/libuses2.so"), "external-dependency", "pass"
    ),
    Case(
        "declared architectures present",
        _chain(_add("device_all", f"{LIBS}/libdev.so"), _set(distribution="xfer_engine_rocmdev")),
        "device-code",
        "pass",
    ),
    Case(
        "the release tag matches the version",
        lambda s, libs: None,
        "wheel-name",
        "pass",
        expected_version="v0.1.0",
    ),
    Case("strip removed the debug info", _add("core", f"{LIBS}/libother.so"), "debug-info", "pass"),
]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> matrix_mod.LoadedMatrix:
    d = tmp_path_factory.mktemp("project")
    (d / "engine").mkdir()
    (d / "matrix.yaml").write_text(MATRIX)
    return matrix_mod.load(d / "matrix.yaml", backends_dir=ROOT / "packaging" / "backends")


def _report(spec: WheelSpec, tmp_path: Path, loaded: matrix_mod.LoadedMatrix | None, **kw: object) -> dict:
    wheel = spec.build(tmp_path)
    variants = make_plan(loaded).variants if loaded is not None else {}
    name = kw.pop("variant", None)
    chosen = variants[str(name)] if name else variant_for_distribution(variants, wheel.name.split("-")[0])
    matrix = str(loaded.path) if loaded is not None else None
    return verify_wheel(wheel, variant=chosen, matrix=matrix, **kw).to_json()  # type: ignore[arg-type]


def _status(report: dict, rule: str) -> dict:
    return next(r for r in report["rules"] if r["id"] == rule)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule(case: Case, libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path) -> None:
    spec = good_rocm(libs)
    case.change(spec, libs)
    report = _report(
        spec,
        tmp_path,
        loaded,
        variant=case.variant,
        release=case.release,
        expected_version=case.expected_version,
    )
    result = _status(report, case.rule)
    assert result["status"] == case.status, result
    for path in case.paths:
        assert path in result["paths"], result
    if case.status == "fail":
        assert report["ok"] is False
        # The change makes only the named rule fail.
        others = [r["id"] for r in report["rules"] if r["status"] == "fail" and r["id"] != case.rule]
        assert others == [], report["rules"]


@pytest.mark.parametrize("rule", RULE_IDS)
def test_good_wheel_passes(
    rule: str, libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    report = _report(good_rocm(libs), tmp_path, loaded)
    # consistency compares the wheels of a release: a wheel verified alone has nothing to compare;
    # stable-abi: the good wheel is a per-Python wheel of a variant without stable_abi;
    # variant-metadata: it is a plain wheel, not a PEP 825 variant wheel;
    # free-threading-classifier: a cp312 wheel is for the GIL build.
    alone = rule in {"consistency", "stable-abi", "variant-metadata", "free-threading-classifier"}
    assert _status(report, rule)["status"] == ("not-applicable" if alone else "pass")
    assert report["ok"] is True
    assert report["releasable"] is True
    assert report["runtime_bound"] == ["libamdhip64.so.5"]


def test_cpu_variant_needs_no_runtime(
    libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    spec = WheelSpec(
        distribution="xfer_engine_cpu",
        files={
            "xfer/__init__.py": (GUARDED_INIT, 0o644),
            EXT: (libs["ext_plain"], 0o755),
        },
    )
    report = _report(spec, tmp_path, loaded)
    assert report["variant"] == "cpu"
    assert _status(report, "missing-runtime-needed")["status"] == "not-applicable"
    assert _status(report, "vendored-runtime")["status"] == "pass"
    assert report["ok"] is True


def test_without_matrix_rules_are_not_applicable(libs: dict[str, bytes], tmp_path: Path) -> None:
    report = _report(good_rocm(libs), tmp_path, None)
    statuses = {r["id"]: r["status"] for r in report["rules"]}
    for rule in (
        "vendored-runtime",
        "missing-runtime-needed",
        "device-code",
        "wheel-name",
        "variant-conflict",
    ):
        assert statuses[rule] == "not-applicable", rule
    for rule in (
        "duplicate-library",
        "debug-info",
        "build-path-rpath",
        "platform-floor",
        "external-dependency",
    ):
        assert statuses[rule] == "pass", rule
    # The runtime is still recognized from the toolkit's backend data.
    assert report["runtime_bound"] == ["libamdhip64.so.5"]
    assert report["variant"] is None and report["matrix"] is None


def test_elf_files_in_report(libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path) -> None:
    spec = good_rocm(libs)
    _add("new_glibc", f"{LIBS}/libnewglibc.so")(spec, libs)
    _add("runpath", f"{LIBS}/librunpath.so")(spec, libs)
    report = _report(spec, tmp_path, loaded)
    files = {e["path"]: e for e in report["elf_files"]}
    assert files[EXT]["needed"][0] == "libamdhip64.so.5"
    assert files[EXT]["runpath"] == ["$ORIGIN/../xfer_engine_rocm.libs"]
    assert files[f"{LIBS}/libxfercore-1a2b3c4d.so.0"]["soname"] == "libxfercore-1a2b3c4d.so.0"
    assert files[f"{LIBS}/libnewglibc.so"]["max_glibc"] == "2.34"
    assert files[f"{LIBS}/librunpath.so"]["runpath"] == ["/tmp/build/lib"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "release", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_cli_json_validates_and_exit_codes(
    libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text())
    spec = good_rocm(libs)
    spec.tag = "cp312-cp312-manylinux_2_34_x86_64"
    wheel = spec.build(tmp_path)
    matrix = str(loaded.path)

    normal = _cli("--matrix", matrix, "verify", str(wheel), "--json", cwd=tmp_path)
    assert normal.returncode == 0, normal.stderr
    report = json.loads(normal.stdout)
    jsonschema.validate(report, schema)
    assert report["ok"] is True and report["releasable"] is False
    assert _status(report, "platform-floor")["status"] == "warn"
    assert "not releasable" in _status(report, "platform-floor")["message"]

    release = _cli("--matrix", matrix, "verify", str(wheel), "--json", "--release", cwd=tmp_path)
    assert release.returncode == 6, release.stderr
    report = json.loads(release.stdout)
    jsonschema.validate(report, schema)
    assert report["release_mode"] is True
    assert _status(report, "platform-floor")["status"] == "fail"
    assert "platform-floor" in release.stderr

    readable = _cli("--matrix", matrix, "verify", str(wheel), cwd=tmp_path)
    assert readable.returncode == 0
    assert "WARN  platform-floor" in readable.stdout
    assert "runtime bound: libamdhip64.so.5" in readable.stdout

    # No matrix at all (none in the working directory): matrix rules say n/a.
    bare = _cli("verify", str(wheel), "--json", "--write-reports", cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    report = json.loads(bare.stdout)
    jsonschema.validate(report, schema)
    assert _status(report, "wheel-name")["status"] == "not-applicable"
    written = json.loads((tmp_path / (wheel.name + ".verify.json")).read_text())
    assert written["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_cli_fails_with_exit_6(
    libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    spec = good_rocm(libs)
    _add("hip_standin", f"{LIBS}/libamdhip64.so.5")(spec, libs)
    wheel = spec.build(tmp_path)
    result = _cli("--matrix", str(loaded.path), "verify", str(wheel), cwd=tmp_path)
    assert result.returncode == 6
    assert "FAIL  vendored-runtime" in result.stdout
    assert f"{LIBS}/libamdhip64.so.5" in result.stdout
    assert "vendored-runtime" in result.stderr


def test_cli_checks_consistency_across_the_wheels_of_a_release(
    libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    rocm = good_rocm(libs).build(tmp_path)
    script = (b'#!/bin/sh\nexec python -m xfer "$@"\n', 0o755)
    files = {
        "xfer/__init__.py": (GUARDED_INIT, 0o644),
        EXT: (libs["ext_plain"], 0o755),
        "xfer_engine_cpu-0.1.0.data/scripts/xfer-run": script,
    }
    cpu = WheelSpec(distribution="xfer_engine_cpu", files=files).build(tmp_path)
    ok = _cli("--matrix", str(loaded.path), "verify", str(rocm), str(cpu), "--json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert [_status(r, "consistency")["status"] for r in json.loads(ok.stdout)] == ["pass", "pass"]

    scripts = "xfer_engine_cpu-{}.data/scripts/xfer-run"
    files[scripts.format("0.2.0")] = files.pop(scripts.format("0.1.0"))
    later = WheelSpec(distribution="xfer_engine_cpu", version="0.2.0", files=files).build(tmp_path)
    mixed = _cli("--matrix", str(loaded.path), "verify", str(rocm), str(later), "--json", cwd=tmp_path)
    assert mixed.returncode == 6
    statuses = [_status(r, "consistency") for r in json.loads(mixed.stdout)]
    assert all(s["status"] == "fail" and "mixes versions" in s["message"] for s in statuses)


def test_write_reports_never_follows_a_symlink(
    libs: dict[str, bytes], loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    wheel = good_rocm(libs).build(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious.txt"
    target.write_text("do not touch\n")
    (tmp_path / (wheel.name + ".verify.json")).symlink_to(target)
    result = _cli("--matrix", str(loaded.path), "verify", str(wheel), "--write-reports", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "do not touch\n"
    report = tmp_path / (wheel.name + ".verify.json")
    assert not report.is_symlink()
    assert json.loads(report.read_text())["wheel"] == wheel.name


# --- stable-abi: real extensions against CPython 3.12's headers, audited by abi3audit ------------

ABI3_MATRIX = RULES_ABI_MATRIX  # the unit tests' stable_abi matrix: one matrix, two tiers
ABI3_EXT = "xfer/_xfer.abi3.so"
LIMITED_SOURCE = """\
#define Py_LIMITED_API 0x030C0000
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xfer", NULL, -1, methods};
PyMODINIT_FUNC PyInit__xfer(void) { return PyModule_Create(&module); }
"""
# The full API: PyUnicode_AsUTF8 and _PyObject_GetDictPtr are in no version's limited API (3.13's
# headers still declare the first in cpython/).
FULL_API_SOURCE = """\
#include <Python.h>
static PyObject *name(PyObject *self, PyObject *arg) {
    PyObject **dict = _PyObject_GetDictPtr(arg);
    return PyLong_FromLong((long)(dict != NULL) + (long)PyUnicode_AsUTF8(arg)[0]);
}
static PyMethodDef methods[] = {{"name", name, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xfer", NULL, -1, methods};
PyMODINIT_FUNC PyInit__xfer(void) { return PyModule_Create(&module); }
"""
# The limited API of 3.13: PyLong_AsInt joined it then, so a cp312-abi3 tag promises too much.
NEWER_API_SOURCE = """\
#define Py_LIMITED_API 0x030D0000
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) { return PyLong_FromLong(2L * PyLong_AsInt(arg)); }
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xfer", NULL, -1, methods};
PyMODINIT_FUNC PyInit__xfer(void) { return PyModule_Create(&module); }
"""


def _include(python: str) -> str | None:
    from release.machine.interpreters import find_interpreter

    found = find_interpreter(python)
    if found is None:
        return None
    code = "import sysconfig; print(sysconfig.get_paths()['include'])"
    return subprocess.run([str(found), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def abi3_exts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """One module built for the limited API of 3.12 and for the full API (3.12's headers), and one
    for the limited API of 3.13 (3.13's headers)."""
    include = {v: _include(v) for v in ("3.12", "3.13")}
    if shutil.which("gcc") is None or None in include.values():
        pytest.skip("gcc and CPython 3.12 and 3.13 are needed to build the test extensions")
    d = tmp_path_factory.mktemp("abi3")
    built = {}
    for key, text, python in (
        ("limited", LIMITED_SOURCE, "3.12"),
        ("full", FULL_API_SOURCE, "3.12"),
        ("newer", NEWER_API_SOURCE, "3.13"),
    ):
        (d / f"{key}.c").write_text(text)
        built[key] = _gcc(d / f"{key}.so", d / f"{key}.c", f"-I{include[python]}").read_bytes()
    return built


@pytest.fixture(scope="module")
def abi3_loaded(tmp_path_factory: pytest.TempPathFactory) -> matrix_mod.LoadedMatrix:
    d = tmp_path_factory.mktemp("abi3project")
    (d / "engine").mkdir()
    (d / "matrix.yaml").write_text(ABI3_MATRIX)
    return matrix_mod.load(d / "matrix.yaml", backends_dir=ROOT / "packaging" / "backends")


def _abi3_wheel(
    ext: bytes, tag: str = "cp312-abi3-manylinux_2_28_x86_64", dist: str = "xfer_engine_cpu"
) -> WheelSpec:
    return WheelSpec(
        distribution=dist,
        tag=tag,
        files={"xfer/__init__.py": (GUARDED_INIT, 0o644), ABI3_EXT: (ext, 0o755)},
    )


def test_stable_abi_a_limited_api_wheel_passes(
    abi3_exts: dict[str, bytes], abi3_loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    report = _report(_abi3_wheel(abi3_exts["limited"]), tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "pass", result
    assert "limited API of Python 3.12 (abi3audit)" in result["message"]
    assert report["ok"] is True, [r for r in report["rules"] if r["status"] == "fail"]


def test_stable_abi_names_the_symbols_outside_the_limited_api(
    abi3_exts: dict[str, bytes], abi3_loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    report = _report(_abi3_wheel(abi3_exts["full"]), tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "fail", result
    assert result["paths"] == [ABI3_EXT]
    assert "PyUnicode_AsUTF8, _PyObject_GetDictPtr (not in the limited API)" in result["message"]
    assert [r["id"] for r in report["rules"] if r["status"] == "fail"] == ["stable-abi"]


def test_stable_abi_names_the_symbols_newer_than_the_floor(
    abi3_exts: dict[str, bytes], abi3_loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    report = _report(_abi3_wheel(abi3_exts["newer"]), tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "fail", result
    assert "PyLong_AsInt (from 3.13), newer than the floor 3.12" in result["message"]
    assert "not in the limited API" not in result["message"]


@pytest.mark.parametrize(
    "case",
    [
        ("cp313-abi3-manylinux_2_28_x86_64", "xfer_engine_cpu", "expected cp312-abi3"),
        ("cp312-cp312-manylinux_2_28_x86_64", "xfer_engine_cpu", "expected one cp312-abi3 wheel"),
        ("cp312-abi3-manylinux_2_28_x86_64", "xfer_engine_percpu", "its stable_abi is off"),
    ],
    ids=["floor-3.13", "per-python-at-the-floor", "abi3-in-an-off-variant"],
)
def test_stable_abi_a_tag_other_than_the_variants_fails(
    abi3_exts: dict[str, bytes],
    abi3_loaded: matrix_mod.LoadedMatrix,
    tmp_path: Path,
    case: tuple[str, str, str],
) -> None:
    tag, dist, says = case
    report = _report(_abi3_wheel(abi3_exts["limited"], tag, dist), tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "fail", result
    assert says in result["message"]


def test_stable_abi_a_wheel_below_the_floor_is_not_applicable(
    abi3_exts: dict[str, bytes], abi3_loaded: matrix_mod.LoadedMatrix, tmp_path: Path
) -> None:
    spec = _abi3_wheel(abi3_exts["full"], "cp311-cp311-manylinux_2_28_x86_64")
    report = _report(spec, tmp_path, abi3_loaded)
    assert _status(report, "stable-abi")["status"] == "not-applicable"


def test_stable_abi_an_audit_past_its_deadline_fails_the_rule(
    abi3_exts: dict[str, bytes],
    abi3_loaded: matrix_mod.LoadedMatrix,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from release.inspect import stableabi

    monkeypatch.setattr(stableabi, "DEADLINE", 0.01)
    report = _report(_abi3_wheel(abi3_exts["limited"]), tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "fail", result
    assert "abi3audit did not finish within 0.01 s" in result["message"]


# A library larger than the stream keeps whole (8 MiB), unstripped: its .symtab and .strtab lie
# past 24 MiB of data, outside every range the one pass keeps, and are read again for abi3audit.
LARGE_PAD = "\n__attribute__((used)) static const unsigned char pad[24 << 20] = {1};\n"


@pytest.fixture(scope="module")
def large_full_api(abi3_exts: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    d = tmp_path_factory.mktemp("abi3large")
    (d / "large.c").write_text(FULL_API_SOURCE + LARGE_PAD)
    data = _gcc(d / "large.so", d / "large.c", f"-I{_include('3.12')}").read_bytes()
    assert len(data) > 24 << 20 and b".symtab" in data
    return data


def test_stable_abi_audits_a_sparse_copy_of_what_the_one_pass_kept(
    large_full_api: bytes,
    abi3_loaded: matrix_mod.LoadedMatrix,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from release.inspect import stableabi

    copies: list[tuple[int, int, bytes]] = []
    audit = stableabi.audit_limited_api

    def measured(wheel, paths, floor):  # type: ignore[no-untyped-def]
        def symbol_copy(member: str, target: Path) -> bool:
            written = copy(member, target)
            copies.append((target.stat().st_size, target.stat().st_blocks * 512, target.read_bytes()))
            return written

        copy = wheel.symbol_copy
        wheel.symbol_copy = symbol_copy
        return audit(wheel, paths, floor)

    monkeypatch.setattr("release.inspect.rules.abi.audit_limited_api", measured)
    report = _report(_abi3_wheel(large_full_api), tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "fail", result
    assert "PyUnicode_AsUTF8, _PyObject_GetDictPtr (not in the limited API)" in result["message"]
    # The copy has the library's size but holds only its tables: a hole where its 24 MiB of data are.
    ((size, on_disk, copy),) = copies
    assert size == len(large_full_api) and on_disk < 1 << 20, (size, on_disk)
    # ...and the symbol tables it holds are the library's, read again after the stream passed them.
    with io.BytesIO(large_full_api) as fh:
        symtab = ELFFile(fh).get_section_by_name(".symtab")
        assert symtab is not None
        lo, hi = symtab["sh_offset"], symtab["sh_offset"] + symtab["sh_size"]
    assert lo > 24 << 20 and copy[lo:hi] == large_full_api[lo:hi]

    # Tables past the limit: the member is streamed again whole, with the same verdict.
    copies.clear()
    (tmp_path / "again").mkdir()
    monkeypatch.setattr("release.inspect.symboltables.LIMIT", 0)
    again = _status(_report(_abi3_wheel(large_full_api), tmp_path / "again", abi3_loaded), "stable-abi")
    assert again["message"] == result["message"]
    ((size, on_disk, copy),) = copies
    assert size == len(large_full_api) and on_disk >= 24 << 20 and copy == large_full_api


def test_stable_abi_audits_each_distinct_library_that_names_python_once(
    abi3_exts: dict[str, bytes],
    libs: dict[str, bytes],
    abi3_loaded: matrix_mod.LoadedMatrix,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The full-API module twice (as a versioned library's links are: the same bytes under three
    names) and a library whose symbols name nothing of Python's: abi3audit is given one file, and
    both copies of the module are named in the finding."""
    from release import process

    argvs: list[list[str]] = []
    run = process.run

    def recorded(argv, **kw):  # type: ignore[no-untyped-def]
        argvs.append(list(argv))
        return run(argv, **kw)

    monkeypatch.setattr(process, "run", recorded)
    spec = _abi3_wheel(abi3_exts["full"])
    spec.files["xfer/_xfer_again.abi3.so"] = (abi3_exts["full"], 0o755)
    spec.files["xfer/libplain.so"] = (libs["dup"], 0o755)
    report = _report(spec, tmp_path, abi3_loaded)
    result = _status(report, "stable-abi")
    assert result["status"] == "fail", result
    assert result["paths"] == [ABI3_EXT, "xfer/_xfer_again.abi3.so"]
    (argv,) = argvs
    assert len([a for a in argv if a.endswith(".abi3.so")]) == 1, argv
