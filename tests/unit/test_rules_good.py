"""Synthetic ELF facts for the rule tests (no zip, no compiler, no process), and the two cases every
rule shares: a good ROCm wheel passes every rule, and a foreign wheel leaves the matrix rules n/a.

The other `test_rules_*.py` files change one fact of the good wheel per case and check one rule.
"""

from __future__ import annotations

import functools
import hashlib
import json
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import pytest

from release.config import matrix as matrix_mod
from release.inspect.contents import Member, WheelContents
from release.inspect.elf import ElfInfo
from release.inspect.rules import RULE_IDS, RULES
from release.inspect.rules.registry import RuleContext, RuleResult, is_grafted, original_name
from release.inspect.verify import manylinux_policies
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from release.wheel.archive import install_path, record_digest

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
  system_libraries: ["libdeclared.so.*"]
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
  cuda:
    distribution: xfer-engine
    backend: cuda
    exclude: ["libcudart.so*", "libcuda.so*"]
  rocmdev:
    distribution: xfer-engine-rocmdev
    backend: rocm
    exclude: ["libamdhip64.so*", "libhsa-runtime64.so*"]
    architectures: [gfx942, gfx950]
    device_code: true
"""
MATRIX_FILE = "/project/matrix.yaml"
GUARDED_INIT = b"from importlib.metadata import distributions\n_all = list(distributions())\n"
EXT = "xfer/_xfer.cpython-312-x86_64-linux-gnu.so"
LIBS = "xfer_engine_rocm.libs"
CORE = f"{LIBS}/libxfercore-1a2b3c4d.so.0"
SCRIPT = "xfer_engine_rocm-0.1.0.data/scripts/xfer-run"


def cyclonedx(name: str, version: str, file_name: str, libraries: Sequence[str]) -> bytes:
    """An SBOM as auditwheel writes it: the wheel, and one library per original path of a grafted file."""
    purl = f"pkg:pypi/{quote(name, safe='')}@{quote(version, safe='')}?file_name={quote(file_name, safe='')}"
    own = {"type": "library", "bom-ref": purl, "name": name, "version": version, "purl": purl}
    components: list[dict[str, str]] = [own]
    for path in libraries:
        package = posixpath.basename(path).split(".")[0].removeprefix("lib") + "-libs"
        lib_purl = f"pkg:rpm/almalinux/{package}@1.0-1.el8"
        ref = f"{lib_purl}#{hashlib.sha256(path.encode()).hexdigest()}"
        components.append({"type": "library", "bom-ref": ref, "name": package, "version": "1.0-1.el8",
                           "purl": lib_purl})
    refs = [c["bom-ref"] for c in components[1:]]
    return json.dumps({
        "bomFormat": "CycloneDX", "specVersion": "1.4", "version": 1,
        "metadata": {"component": own, "tools": [{"name": "auditwheel", "version": "6.8.2"}]},
        "components": components,
        "dependencies": [{"ref": purl, "dependsOn": refs}, *({"ref": r} for r in refs)],
    }).encode()


def grafted_origins(members: Sequence[str]) -> list[str]:
    """Where auditwheel found each grafted member (`/lib64/<its name before grafting>`)."""
    return [
        f"/lib64/{original_name(posixpath.basename(m))}"
        for m in members
        if posixpath.dirname(m).endswith(".libs") and is_grafted(posixpath.basename(m))
    ]


@functools.cache
def variants() -> dict[str, ResolvedVariant]:
    loaded = matrix_mod.loads(MATRIX, path=Path(MATRIX_FILE), backends_dir=ROOT / "packaging" / "backends")
    return dict(make_plan(loaded).variants)


def elf(path: str, **facts: object) -> ElfInfo:
    """An ELF file's facts: nothing needed, no debug info, code unique to its path, unless given."""
    base = ElfInfo(
        path=path,
        size=4096,
        executable=False,
        needed=(),
        soname=None,
        rpath=(),
        runpath=(),
        version_requirements=(("libc.so.6", "GLIBC_2.2.5"),),
        debug_sections=(),
        device_sections=(),
        architectures=(),
        code_sha256=hashlib.sha256(path.encode()).hexdigest(),
    )
    return replace(base, **facts)  # type: ignore[arg-type]


@dataclass
class Facts:
    """A wheel to hand to the rules: member modes and sizes, ELF facts, small text members.

    `contents()` adds the dist-info files (METADATA, WHEEL, and a RECORD with every member's
    digest) unless `dist_info` already holds one of them; `record_rows` changes RECORD's rows."""

    distribution: str = "xfer_engine_rocm"
    version: str = "0.1.0"
    tags: tuple[str, ...] = ("cp312-cp312-manylinux_2_28_x86_64",)
    modes: dict[str, int] = field(default_factory=dict)
    elves: dict[str, ElfInfo] = field(default_factory=dict)
    texts: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, str] | None = None
    dist_info: dict[str, str | None] = field(default_factory=dict)
    """Leaf (METADATA, WHEEL, RECORD) -> its text, or None to leave the file out."""
    record_rows: Callable[[list[list[str]]], list[list[str]]] | None = None
    symlinks: set[str] = field(default_factory=set)
    size: int = 50_000_000
    sbom: Literal["auto"] | bytes | None = "auto"
    """auditwheel's SBOM: 'auto' names this wheel and every grafted library, None leaves it out."""

    def add_elf(self, info: ElfInfo, mode: int = 0o755) -> None:
        self.elves[info.path] = info
        self.modes[info.path] = mode

    def add_text(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self.texts[name] = data
        self.modes[name] = mode

    @property
    def info_dir(self) -> str:
        return f"{self.distribution}-{self.version}.dist-info"

    @property
    def file_name(self) -> str:
        return f"{self.distribution}-{self.version}-{self.tags[0]}.whl"

    @property
    def sbom_member(self) -> str:
        return f"{self.info_dir}/sboms/auditwheel.cdx.json"

    def sbom_bytes(self) -> bytes | None:
        if self.sbom != "auto":
            return self.sbom
        origins = grafted_origins(list(self.modes))
        return cyclonedx(self.distribution, self.version, self.file_name, origins) if origins else None

    def _data(self, name: str) -> bytes:
        if name == self.sbom_member and (sbom := self.sbom_bytes()) is not None:
            return sbom
        return self.texts.get(name, f"ELF bytes of {name}".encode())

    def _with_dist_info(self) -> tuple[dict[str, int], dict[str, str]]:
        modes = dict(self.modes)
        if self.sbom_bytes() is not None:
            modes[self.sbom_member] = 0o644
        texts: dict[str, str] = {}
        defaults = {
            "METADATA": f"Metadata-Version: 2.1\nName: {self.distribution}\nVersion: {self.version}\n"
            "Requires-Python: >=3.10\n",
            "WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            + "".join(f"Tag: {t}\n" for t in self.tags),
        }
        for leaf, text in defaults.items():
            chosen = self.dist_info.get(leaf, text)
            if chosen is not None:
                texts[f"{self.info_dir}/{leaf}"] = chosen
        record_name = f"{self.info_dir}/RECORD"
        if self.dist_info.get("RECORD", "") is not None:
            rows = [
                [n, f"sha256={self._digest(n, texts)}", str(self._size(n, texts))] for n in [*modes, *texts]
            ]
            rows.append([record_name, "", ""])
            if self.record_rows is not None:
                rows = self.record_rows(rows)
            texts[record_name] = self.dist_info.get("RECORD") or "".join(",".join(r) + "\n" for r in rows)
        for name in texts:
            modes.setdefault(name, 0o644)
        return modes, texts

    def _digest(self, name: str, texts: dict[str, str]) -> str:
        data = texts[name].encode() if name in texts else self._data(name)
        return record_digest(hashlib.sha256(data).digest())

    def _size(self, name: str, texts: dict[str, str]) -> int:
        if name in self.elves:
            return self.elves[name].size
        return len(texts[name].encode()) if name in texts else len(self._data(name))

    def contents(self) -> WheelContents:
        modes, texts = self._with_dist_info()
        members = [
            Member(n, install_path(n), self._size(n, texts), m, self._digest(n, texts), n in self.symlinks)
            for n, m in modes.items()
        ]
        name = self.distribution.replace("_", "-")
        metadata = self.metadata if self.metadata is not None else {"Name": name, "Version": self.version}
        return WheelContents(
            path=Path(f"/wheels/{self.file_name}"),
            distribution=self.distribution,
            version=self.version,
            tags=self.tags,
            members=members,
            elf_files=list(self.elves.values()),
            read=lambda member: self._data(member) if member == self.sbom_member else self.texts[member],
            metadata=metadata,
            texts=texts,
            size=self.size,
        )


def good_rocm() -> Facts:
    """A ROCm wheel that passes every rule."""
    facts = Facts()
    facts.add_text("xfer/__init__.py", GUARDED_INIT)
    facts.add_elf(
        elf(EXT, needed=("libamdhip64.so.5", "libxfercore-1a2b3c4d.so.0", "libc.so.6"),
            runpath=("$ORIGIN/../xfer_engine_rocm.libs",))
    )
    facts.add_elf(elf(CORE, soname="libxfercore-1a2b3c4d.so.0", needed=("libstdc++.so.6",)))
    facts.add_text(SCRIPT, b'#!/bin/sh\nexec python -m xfer "$@"\n', 0o755)
    return facts


def context(
    facts: Facts,
    variant: str | None = "auto",
    *,
    matrix: bool = True,
    release: bool = False,
    expected_version: str | None = None,
) -> RuleContext:
    """The rules' context: `variant` 'auto' maps the distribution to its variant (None if foreign)."""
    known = variants() if matrix else {}
    if variant == "auto":
        name = facts.distribution.replace("_", "-")
        chosen = next((v for v in known.values() if v.distribution == name), None)
    else:
        chosen = known[variant] if variant is not None else None
    globs = chosen.excludes if chosen is not None else ("libamdhip64.so*", "libcudart.so*", "libmusart.so*")
    return RuleContext(
        wheel=facts.contents(),
        matrix=MATRIX_FILE if matrix else None,
        variant=chosen,
        excludes=globs,
        release=release,
        expected_version=expected_version,
        policies=manylinux_policies(),
    )


def apply(rule_id: str, ctx: RuleContext) -> RuleResult:
    return next(r for r in RULES if r.id == rule_id).apply(ctx)


Change = Callable[[Facts], None]


@dataclass(frozen=True)
class Case:
    """One row of a rule's table: a change to the good wheel, and what the rule must say."""

    name: str
    change: Change
    status: str
    paths: tuple[str, ...] = ()
    variant: str | None = "auto"
    matrix: bool = True
    release: bool = False
    expected_version: str | None = None
    says: str = ""


def check_case(rule_id: str, case: Case) -> None:
    facts = good_rocm()
    case.change(facts)
    ctx = context(
        facts, case.variant, matrix=case.matrix, release=case.release, expected_version=case.expected_version
    )
    result = apply(rule_id, ctx)
    assert result.id == rule_id
    assert result.status == case.status, result
    assert set(case.paths) <= set(result.paths), result
    assert case.says in result.message, result


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_good_wheel_passes_every_rule(rule_id: str) -> None:
    release_rule = next(r for r in RULES if r.id == rule_id).across is not None
    # stable-abi: the good wheel is a per-Python wheel of a variant without stable_abi;
    # variant-metadata: it is a plain wheel, not a PEP 825 variant wheel; free-threading-classifier:
    # it is a GIL-enabled wheel.
    alone = release_rule or rule_id in ("stable-abi", "variant-metadata", "free-threading-classifier")
    assert apply(rule_id, context(good_rocm())).status == ("not-applicable" if alone else "pass")


def _foreign(facts: Facts) -> None:
    facts.distribution = "someone_elses"


NEED_A_VARIANT = (
    "vendored-runtime", "missing-runtime-needed", "device-code", "wheel-name", "variant-conflict"
)


@pytest.mark.parametrize("rule_id", NEED_A_VARIANT)
@pytest.mark.parametrize("matrix", [True, False], ids=["foreign-wheel", "no-matrix"])
def test_rules_that_need_a_variant_are_not_applicable_without_one(rule_id: str, matrix: bool) -> None:
    facts = good_rocm()
    _foreign(facts)
    result = apply(rule_id, context(facts, matrix=matrix))
    assert result.status == "not-applicable", result
    assert ("no variant's distribution" in result.message) is matrix
