"""The verify report of one wheel: its model, its versioned JSON, the JSON Schema of that JSON
(generated here, from the registry's rule ids, and committed as `verify.schema.json`) and its
readable rendering."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import __version__
from release.inspect.elf import ElfInfo
from release.inspect.rules import RULE_IDS
from release.inspect.rules.registry import STATUSES, RuleResult
from release.inspect.stampkey import stamp_mac
from release.inspect.versions import max_required
from release.table import printable
from release.wheel.files import read_bounded, walk_files

SCHEMA_VERSION = 3
SCHEMA_FILE = Path(__file__).with_name("verify.schema.json")
_LABEL = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "not-applicable": "n/a"}


@dataclass(frozen=True)
class VerifyReport:
    """Everything `release verify` found in one wheel."""

    wheel: Path
    size: int
    unpacked_size: int
    distribution: str
    version: str
    tags: tuple[str, ...]
    platform_tags: tuple[str, ...]
    variant: str | None
    matrix: str | None
    release_mode: bool
    runtime_bound: tuple[str, ...]
    elf_files: tuple[ElfInfo, ...]
    rules: tuple[RuleResult, ...]
    sha256: str = ""
    """sha256 of exactly the bytes the rules judged (taken while the wheel was read)."""
    facts: str = ""
    """The digest of what the wheel was judged against (see `release.inspect.reuse`): with it,
    the JSON carries the `reuse` stamp a later verify of the same bytes may reuse it by."""
    reused: bool = False
    """Read back from an intact report of the same bytes, not judged again."""

    @property
    def ok(self) -> bool:
        """No rule failed (warnings allowed)."""
        return not any(r.status == "fail" for r in self.rules)

    @property
    def failed(self) -> tuple[str, ...]:
        """The ids of the rules that failed, in report order."""
        return tuple(r.id for r in self.rules if r.status == "fail")

    @property
    def releasable(self) -> bool:
        """No rule failed or warned: the wheel passes `--release` as well."""
        return not any(r.status in ("fail", "warn") for r in self.rules)

    @property
    def compilers(self) -> tuple[str, ...]:
        """The distinct compiler strings of its ELF files' `.comment` sections, sorted (e.g.
        'GCC: (GNU) 14.2.1 20240801 (Red Hat 14.2.1-1)'); linker lines are left out."""
        return tuple(sorted({c for e in self.elf_files for c in e.comment if not c.startswith("Linker:")}))

    @property
    def glibc_needed(self) -> str | None:
        """The newest glibc symbol version any of its ELF files needs ('2.39'), or None: the glibc
        a machine must have to load the wheel, whatever its tag claims."""
        return max_required((v for e in self.elf_files for v in e.version_requirements), "GLIBC")

    def rule(self, rule_id: str) -> RuleResult:
        return next(r for r in self.rules if r.id == rule_id)

    def to_json(self) -> dict[str, object]:
        document = self._document()
        if not self.facts:
            return document
        mark = {"toolkit": __version__, "rules": ruleset(), "facts": self.facts}
        return {**document, "reuse": {**mark, "digest": content_mac(document, mark)}}

    @classmethod
    def from_json(cls, document: Mapping[str, object], wheel: Path, *, reused: bool = False) -> VerifyReport:
        """The report a JSON document of this schema describes (`KeyError`, `TypeError` or
        `ValueError` when it is none); its ELF files carry what the JSON does."""
        data: dict[str, object] = dict(document)
        elf_files = tuple(_elf_from_json(e) for e in _list(data["elf_files"]))
        rules = tuple(_rule_from_json(r) for r in _list(data["rules"]))
        mark = data.get("reuse")
        return cls(
            wheel=wheel,
            size=_int(data["size"]),
            unpacked_size=_int(data["unpacked_size"]),
            distribution=str(data["distribution"]),
            version=str(data["version"]),
            tags=tuple(map(str, _list(data["tags"]))),
            platform_tags=tuple(map(str, _list(data["platform_tags"]))),
            variant=_optional(data["variant"]),
            matrix=_optional(data["matrix"]),
            release_mode=data["release_mode"] is True,
            runtime_bound=tuple(map(str, _list(data["runtime_bound"]))),
            elf_files=elf_files,
            rules=rules,
            sha256=str(data["sha256"]),
            facts=str(mark["facts"]) if isinstance(mark, dict) else "",
            reused=reused,
        )

    def _document(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "wheel": self.wheel.name,
            "sha256": self.sha256,
            "size": self.size,
            "unpacked_size": self.unpacked_size,
            "matrix": self.matrix,
            "variant": self.variant,
            "distribution": self.distribution,
            "version": self.version,
            "tags": list(self.tags),
            "platform_tags": list(self.platform_tags),
            "release_mode": self.release_mode,
            "ok": self.ok,
            "releasable": self.releasable,
            "runtime_bound": list(self.runtime_bound),
            "compilers": list(self.compilers),
            "glibc_needed": self.glibc_needed,
            "elf_files": [elf_json(e) for e in self.elf_files],
            "rules": [r.to_json() for r in self.rules],
        }


SOURCE_LIMIT = 4 << 20
"""Bytes of one toolkit source file read into the rule set's digest at most."""


@functools.cache
def ruleset() -> str:
    """The rule set's version: the sha256 of the source of every module that reads or judges a
    wheel (`release/inspect`, `release/wheel`), with the registry's rule ids: any change to a
    rule, the reader or the ELF parser is a new rule set, whatever the toolkit's version says."""
    digest = hashlib.sha256(",".join(RULE_IDS).encode())
    root = Path(__file__).resolve().parent.parent
    for package in ("inspect", "wheel"):
        for path in walk_files(root / package, ".py"):
            source = read_bounded(path, SOURCE_LIMIT)
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + source)
    return digest.hexdigest()


def content_mac(document: Mapping[str, object], mark: Mapping[str, object]) -> str:
    """The HMAC-SHA256, under this user's verify key (`release.inspect.stampkey`), of a report's
    JSON without its `reuse` stamp and of the stamp's other fields, keys sorted: a report edited
    and stamped again by anyone without the key is never reused."""
    body = {k: v for k, v in document.items() if k != "reuse"}
    signed = {"report": body, "stamp": {k: v for k, v in mark.items() if k != "digest"}}
    return stamp_mac(json.dumps(signed, sort_keys=True, separators=(",", ":")).encode())


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise TypeError(value)
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def _rule_from_json(value: object) -> RuleResult:
    if not isinstance(value, dict):
        raise TypeError(value)
    status = next(s for s in STATUSES if s == value["status"])  # StopIteration: not a status
    return RuleResult(str(value["id"]), status, str(value["message"]), tuple(map(str, _list(value["paths"]))))


def _elf_from_json(value: object) -> ElfInfo:
    """An ELF file's facts as a report writes them (its newest required versions stand for the
    requirements; no code fingerprint)."""
    if not isinstance(value, dict):
        raise TypeError(value)
    versions = (("GLIBC", "max_glibc"), ("GLIBCXX", "max_glibcxx"), ("CXXABI", "max_cxxabi"))
    return ElfInfo(
        path=str(value["path"]),
        size=_int(value["size"]),
        executable=value["executable"] is True,
        needed=tuple(map(str, _list(value["needed"]))),
        soname=_optional(value["soname"]),
        rpath=tuple(map(str, _list(value["rpath"]))),
        runpath=tuple(map(str, _list(value["runpath"]))),
        version_requirements=tuple(("", f"{p}_{value[k]}") for p, k in versions if value[k] is not None),
        debug_sections=tuple(map(str, _list(value["debug_sections"]))),
        device_sections=tuple(map(str, _list(value["device_code_sections"]))),
        architectures=tuple(map(str, _list(value["architectures"]))),
        code_sha256="",
        machine=str(value["machine"]),
        padding=_int(value["padding"]),
        comment=tuple(map(str, _list(value["comment"]))),
    )


def elf_json(info: ElfInfo) -> dict[str, object]:
    return {
        "path": info.path,
        "size": info.size,
        "machine": info.machine,
        "executable": info.executable,
        "needed": list(info.needed),
        "soname": info.soname,
        "rpath": list(info.rpath),
        "runpath": list(info.runpath),
        "max_glibc": info.max_version("GLIBC"),
        "max_glibcxx": info.max_version("GLIBCXX"),
        "max_cxxabi": info.max_version("CXXABI"),
        "debug_sections": list(info.debug_sections),
        "device_code_sections": list(info.device_sections),
        "architectures": list(info.architectures),
        "padding": info.padding,
        "comment": list(info.comment),
    }


# --- the JSON Schema of `to_json` ------------------------------------------------------------------


def _strings(description: str | None = None) -> dict[str, object]:
    return _described({"type": "array", "items": {"type": "string"}}, description)


def _nullable(kind: str, description: str) -> dict[str, object]:
    return {"type": [kind, "null"], "description": description}


def _described(schema: dict[str, object], description: str | None) -> dict[str, object]:
    return {**schema, "description": description} if description else schema


def _object(properties: dict[str, dict[str, object]]) -> dict[str, object]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def report_schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of `VerifyReport.to_json`, with the rule ids of the registry."""
    count = {"type": "integer", "minimum": 0}
    elf_file = _object(
        {
            "path": {"type": "string", "description": "Member path inside the wheel."},
            "size": count,
            "machine": {"type": "string", "description": "The architecture it is built for (x86_64...)."},
            "executable": {
                "type": "boolean",
                "description": "An executable (PT_INTERP or ET_EXEC), not only a shared object.",
            },
            "needed": _strings("DT_NEEDED entries, in order."),
            "soname": _nullable("string", "DT_SONAME."),
            "rpath": _strings("DT_RPATH entries."),
            "runpath": _strings("DT_RUNPATH entries."),
            "max_glibc": _nullable("string", "Newest GLIBC_x.y version required, e.g. '2.34'."),
            "max_glibcxx": _nullable("string", "Newest GLIBCXX_x.y.z version required."),
            "max_cxxabi": _nullable("string", "Newest CXXABI_x.y version required."),
            "debug_sections": _strings("Unstripped .debug_* sections."),
            "device_code_sections": _strings("Sections named in the backend's device_code_sections."),
            "architectures": _strings("GPU architectures (gfx942, sm_90) found in those sections."),
            "padding": {**count, "description": "Bytes in no section or header: alignment padding."},
            "comment": _strings("Strings of the .comment section: the compilers and linker that made it."),
        }
    )
    rule = _object(
        {
            "id": {"enum": list(RULE_IDS)},
            "status": {"enum": list(STATUSES)},
            "message": {"type": "string"},
            "paths": _strings("Wheel members the result is about."),
        }
    )
    report = _object(
        {
            "schema_version": {"const": SCHEMA_VERSION},
            "wheel": {"type": "string", "pattern": r"\.whl$", "description": "The wheel's file name."},
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "size": {**count, "description": "Bytes of the wheel file."},
            "unpacked_size": {**count, "description": "Bytes of all members, uncompressed."},
            "matrix": _nullable("string", "The matrix file used, or null."),
            "variant": _nullable("string", "The matrix variant the wheel was checked against, or null."),
            "distribution": {"type": "string"},
            "version": {"type": "string"},
            "tags": {**_strings("Full tags python-abi-platform from the file name."), "minItems": 1},
            "platform_tags": {**_strings(), "minItems": 1},
            "release_mode": {"type": "boolean", "description": "Checked with --release."},
            "ok": {"type": "boolean", "description": "No rule failed."},
            "releasable": {"type": "boolean", "description": "No rule failed or warned."},
            "runtime_bound": _strings("NEEDED libraries matching the runtime excludes: bound at load time."),
            "compilers": _strings(
                "Distinct compiler strings of the ELF files' .comment sections (linker lines left out), "
                "e.g. 'GCC: (Debian 14.2.0-19) 14.2.0'."
            ),
            "glibc_needed": _nullable(
                "string", "The newest GLIBC_ symbol version its ELF files need (e.g. '2.39'), or null."
            ),
            "elf_files": {"type": "array", "items": {"$ref": "#/$defs/elf_file"}},
            "rules": {
                "type": "array",
                "items": {"$ref": "#/$defs/rule"},
                "minItems": len(RULE_IDS),
                "maxItems": len(RULE_IDS),
            },
        }
    )
    stamp = _object(
        {
            "toolkit": {"type": "string", "description": "The toolkit version that verified."},
            "rules": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "The rule set's digest."},
            "facts": {
                "type": "string",
                "pattern": "^[0-9a-f]{64}$",
                "description": "What it was judged against.",
            },
            "digest": {
                "type": "string",
                "pattern": "^[0-9a-f]{64}$",
                "description": "HMAC-SHA256 of the rest under the verifying user's key (0600, in the cache).",
            },
        }
    )
    properties = report["properties"]
    assert isinstance(properties, dict)  # noqa: S101 (built just above)
    properties["reuse"] = {
        **stamp,
        "description": "What a later verify of the same bytes checks before it reuses this report.",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.invalid/gpu-wheel-release/inspect/verify.schema.json",
        "title": "Verification report of one wheel (python -m release verify --json)",
        **report,
        "$defs": {"elf_file": elf_file, "rule": rule},
    }


def schema_text() -> str:
    """The schema as committed in `SCHEMA_FILE`."""
    return json.dumps(report_schema(), indent=2) + "\n"


# --- the readable report ------------------------------------------------------------------------


def _size(n: int) -> str:
    value = n * 1.0
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


def render_report(report: VerifyReport) -> str:
    """The readable report: a header, then one line per rule."""
    variant = report.variant or "-"
    lines = [
        report.wheel.name,
        f"  variant {variant}  tags {', '.join(report.tags)}  size {_size(report.size)} "
        f"({_size(report.unpacked_size)} unpacked, {len(report.elf_files)} ELF files)",
        f"  runtime bound: {', '.join(report.runtime_bound) or 'none'}",
        f"  compilers: {'; '.join(report.compilers) or 'none recorded'}",
        f"  glibc needed: {report.glibc_needed or 'none'}",
    ]
    width = max(len(r) for r in RULE_IDS)
    lines.extend(f"  {_LABEL[r.status]:<4}  {r.id:<{width}}  {printable(r.message)}" for r in report.rules)
    if not report.ok:
        verdict = f"FAILED ({', '.join(report.failed)})"
    elif not report.releasable:
        verdict = "ok, not releasable (see WARN)"
    else:
        verdict = "ok, releasable"
    lines.append(f"  result: {verdict}")
    return "\n".join(lines)


def failure_summary(reports: Sequence[VerifyReport], what: str = "wheels") -> str | None:
    """The one line that says which of `reports` failed and by which rules
    (`1 of 3 wheels failed verification: a.whl: debug-info, padding`), or None when none did."""
    failed = [r for r in reports if not r.ok]
    if not failed:
        return None
    names = "; ".join(f"{r.wheel.name}: {', '.join(r.failed)}" for r in failed)
    return f"{len(failed)} of {len(reports)} {what} failed verification: {names}"
