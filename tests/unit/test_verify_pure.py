"""Pure functions of `release verify` and `release.inspect.elf`: no process, no compiler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.config.backends import load_backends
from release.inspect.devicecode import architecture_names, find_architectures
from release.inspect.elfformat import Image, MissingRange
from release.inspect.policy import policies_from_json, policy_for
from release.inspect.report import SCHEMA_FILE, VerifyReport, failure_summary, render_report
from release.inspect.rules import RULE_IDS
from release.inspect.rules.registry import RuleResult, matches
from release.inspect.verify import manylinux_policies
from release.inspect.versions import max_required, parse_version, split_versioned
from release.wheel.archive import install_path
from release.wheel.names import parse_platform_tag


@pytest.mark.parametrize(
    ("tag", "family", "libc", "arch"),
    [
        ("manylinux_2_28_x86_64", "manylinux", (2, 28), "x86_64"),
        ("manylinux_2_34_aarch64", "manylinux", (2, 34), "aarch64"),
        ("manylinux2014_x86_64", "manylinux", (2, 17), "x86_64"),
        ("manylinux2010_x86_64", "manylinux", (2, 12), "x86_64"),
        ("manylinux1_x86_64", "manylinux", (2, 5), "x86_64"),
        ("musllinux_1_2_x86_64", "musllinux", (1, 2), "x86_64"),
        ("linux_x86_64", "linux", None, "x86_64"),
        ("any", "any", None, ""),
    ],
)
def test_parse_platform_tag(tag: str, family: str, libc: tuple[int, int] | None, arch: str) -> None:
    parsed = parse_platform_tag(tag)
    assert (parsed.family, parsed.libc, parsed.arch) == (family, libc, arch)


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        ("xfer/__init__.py", "xfer/__init__.py"),
        ("x-1.0.data/platlib/xfer/_x.so", "xfer/_x.so"),
        ("x-1.0.data/purelib/xfer/a.py", "xfer/a.py"),
        ("x-1.0.data/scripts/xfer-master", "<scripts>/xfer-master"),
        ("x-1.0.data/headers/x.h", "<headers>/x.h"),
    ],
)
def test_install_path(member: str, expected: str) -> None:
    assert install_path(member) == expected


@pytest.mark.parametrize(
    ("name", "patterns", "expected"),
    [
        ("libamdhip64.so.5", ["libamdhip64.so*"], True),
        # auditwheel grafts a vendored library under a hashed name: it is still the runtime
        ("libamdhip64-0a1b2c3d.so.5", ["libamdhip64.so*"], True),
        ("libamdhip64-0a1b2c3d.so.5.2.50200", ["libamdhip64.so.5*"], True),
        ("libamdhip64-notahash.so.5", ["libamdhip64.so*"], False),
        ("libamdhip64-0a1b2c3d.so.5", ["libamdhip64*.so*"], True),
        ("libcudart.so.13", ["libcudart.so*", "libcuda.so*"], True),
        ("libcudnn.so.9", ["libcudart.so*", "libcuda.so*"], False),
        ("LIBAMDHIP64.so.5", ["libamdhip64.so*"], False),
        ("libz.so.1", [], False),
    ],
)
def test_matches(name: str, patterns: list[str], expected: bool) -> None:
    assert matches(name, patterns) is expected


def test_versions() -> None:
    assert parse_version("2.34") == (2, 34)
    assert parse_version("3.4.29") > parse_version("3.4.9")
    assert split_versioned("GLIBCXX_3.4.29") == ("GLIBCXX", "3.4.29")
    assert split_versioned("GLIBC_PRIVATE") is None
    reqs = [("libc.so.6", "GLIBC_2.2.5"), ("libc.so.6", "GLIBC_2.34"), ("libstdc++.so.6", "GLIBCXX_3.4.21")]
    assert max_required(reqs, "GLIBC") == "2.34"
    assert max_required(reqs, "CXXABI") is None


def test_find_architectures_by_the_backend_data() -> None:
    backends = load_backends(Path(__file__).resolve().parents[2] / "packaging" / "backends")
    names = architecture_names(b.architectures for b in backends.values() if b.architectures)
    blob = b"\0hipv4-amdgcn-amd-amdhsa--gfx942\0...sm_90a\0gfx950:xnack-\0notgfx1x\0mp_21\0"
    assert find_architectures(blob, names) == ("gfx942", "gfx950", "mp_21", "sm_90a")
    # one backend's pattern finds its names only; a new backend's pattern is data, not code
    assert find_architectures(blob, architecture_names(["gfx[0-9]{3,4}[a-z]?"])) == ("gfx942", "gfx950")
    npu = architecture_names(["ascend[0-9]{3}[a-z]?"])
    assert find_architectures(b"\0npu--ascend910b\0gfx942\0xascend310\0", npu) == ("ascend910b",)
    assert find_architectures(blob, architecture_names([])) == ()


def test_policies_from_auditwheel_data() -> None:
    policies = manylinux_policies()
    names = [p.name for p in policies]
    assert "manylinux_2_28" in names and "manylinux_2_17" in names
    p228 = policy_for(policies, (2, 28))
    assert p228 is not None and p228.name == "manylinux_2_28"
    assert "libc.so.6" in p228.libraries and "libamdhip64.so.5" not in p228.libraries
    assert p228.max_allowed("x86_64", "GLIBC") == (2, 28)
    p234 = policy_for(policies, (2, 34))
    assert p234 is not None and p234.max_allowed("x86_64", "GLIBC") == (2, 34)
    assert policy_for(policies, (2, 1)) is None


def test_policies_from_json_shape() -> None:
    doc = [
        {"name": "linux", "lib_whitelist": []},
        {
            "name": "manylinux_2_99",
            "lib_whitelist": ["libc.so.6"],
            "symbol_versions": {"x86_64": {"GLIBC": ["2.5", "2.99", "2.10"]}},
        },
    ]
    (only,) = policies_from_json(doc)
    assert only.libc == (2, 99)
    assert only.max_allowed("x86_64", "GLIBC") == (2, 99)
    assert only.max_allowed("aarch64", "GLIBC") is None


def test_image_keeps_pieces_and_says_what_is_missing() -> None:
    image = Image(1000, [(0, b"a" * 10), (10, b"b" * 10), (5, b"c" * 3), (900, b"z" * 100)])
    assert image.read(5, 10) == b"aaaaabbbbb"
    assert image.read(950, 50) == b"z" * 50
    assert image.holds(0, 20) and not image.holds(15, 10)
    with pytest.raises(MissingRange) as missing:
        image.read(500, 4)
    assert (missing.value.offset, missing.value.length) == (500, 4)


def _report(**changes: object) -> VerifyReport:
    rules = tuple(RuleResult(r, "pass", "fine") for r in RULE_IDS)
    fields: dict[str, object] = {
        "wheel": Path("xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
        "size": 10,
        "unpacked_size": 30,
        "distribution": "xfer_engine_rocm",
        "version": "0.1.0",
        "tags": ("cp312-cp312-manylinux_2_28_x86_64",),
        "platform_tags": ("manylinux_2_28_x86_64",),
        "variant": "rocm",
        "matrix": "/x/matrix.yaml",
        "release_mode": False,
        "runtime_bound": ("libamdhip64.so.5",),
        "elf_files": (),
        "rules": rules,
    }
    fields.update(changes)
    return VerifyReport(**fields)  # type: ignore[arg-type]


def test_report_json_matches_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    report = _report()
    report.__dict__["sha256"] = "0" * 64  # the wheel does not exist here: skip hashing it
    document = report.to_json()
    jsonschema.validate(document, schema)
    assert document["schema_version"] == 3
    assert document["ok"] is True and document["releasable"] is True
    rule = {"id": "no-such-rule", "status": "pass", "message": "", "paths": []}
    broken = dict(document, rules=[rule] * len(RULE_IDS))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_ok_and_releasable() -> None:
    warn = tuple(RuleResult(r, "warn" if r == "platform-floor" else "pass", "m") for r in RULE_IDS)
    report = _report(rules=warn)
    assert report.ok and not report.releasable
    fail = tuple(RuleResult(r, "fail" if r == "debug-info" else "not-applicable", "m") for r in RULE_IDS)
    report = _report(rules=fail)
    assert not report.ok and not report.releasable
    text = render_report(report)
    assert "FAIL  debug-info" in text and "n/a" in text and "runtime bound: libamdhip64.so.5" in text


def test_one_line_names_the_failed_wheels_and_their_rules() -> None:
    """The summary `release verify`, `release variants` and the variant upload each raise."""
    failing = {"debug-info", "padding"}
    fail = tuple(RuleResult(r, "fail" if r in failing else "pass", "m") for r in RULE_IDS)
    bad = _report(wheel=Path("bad-1.0-py3-none-any.whl"), rules=fail)
    assert bad.failed == tuple(r for r in RULE_IDS if r in failing)
    assert failure_summary([_report(), _report()]) is None
    assert failure_summary([_report(), bad], "variant wheels") == (
        f"1 of 2 variant wheels failed verification: bad-1.0-py3-none-any.whl: {', '.join(bad.failed)}"
    )


def test_the_report_names_the_compilers_of_its_elf_files() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from tests.unit.test_rules_good import elf

    gcc14 = "GCC: (GNU) 14.2.1 20240801 (Red Hat 14.2.1-1)"
    gcc8 = "GCC: (GNU) 8.5.0 20210514 (Red Hat 8.5.0-26)"
    report = _report(elf_files=(
        elf("xfer/_xfer.so", comment=(gcc8, gcc14, "Linker: LLD 19.1.7")),
        elf("xfer_engine_rocm.libs/libxfercore.so", comment=(gcc14,)),
        elf("xfer/stripped.so"),
    ))  # fmt: skip
    assert report.compilers == (gcc14, gcc8)
    report.__dict__["sha256"] = "0" * 64
    document = report.to_json()
    jsonschema.validate(document, json.loads(SCHEMA_FILE.read_text()))
    assert document["compilers"] == [gcc14, gcc8]
    assert document["elf_files"][0]["comment"] == [gcc8, gcc14, "Linker: LLD 19.1.7"]  # type: ignore[index]
    assert f"compilers: {gcc14}; {gcc8}" in render_report(report)
    assert "compilers: none recorded" in render_report(_report())


def test_the_report_names_the_glibc_its_elf_files_need() -> None:
    from tests.unit.test_rules_good import elf

    binding = (("libc.so.6", "GLIBC_2.34"), ("libstdc++.so.6", "GLIBCXX_3.4.32"))
    core = (("libc.so.6", "GLIBC_2.39"), ("libc.so.6", "GLIBC_2.4"))
    report = _report(elf_files=(
        elf("xfer/_xfer.so", version_requirements=binding),
        elf("xfer_engine_rocm.libs/libxfercore.so", version_requirements=core),
    ))  # fmt: skip
    assert report.glibc_needed == "2.39"
    report.__dict__["sha256"] = "0" * 64
    assert report.to_json()["glibc_needed"] == "2.39"
    assert "glibc needed: 2.39" in render_report(report)
    assert _report().glibc_needed is None
