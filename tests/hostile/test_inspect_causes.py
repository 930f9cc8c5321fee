"""Issue 57's causes that live in `release/inspect`, reproduced in-process (no process starts):

- cause 2: `GLIBC_2.٣٤` (Arabic-Indic digits) read as 2.34, so a wheel needing a version no glibc
  defines passed its manylinux_2_34 tag;
- cause 12: a `.dynsym` whose `sh_link` is 0 or out of range made the sparse symbol copy say "no
  Python symbols", and stable-abi skipped the file, though the loader binds through `DT_SYMTAB`;
- cause 13: a failing wheel's report, edited to pass and re-digested with sha256, was reused
  ("the report's verdict stands") and `release verify` exited 0;
- cause 14: `elf-machine` passed a wheel tagged for x86_64 and aarch64 holding x86_64 code only.

Run against 77f3c49's `release/`, 11 of these 13 tests fail; the two that hold there guard the fix
(a report stamped under another key is not reused; an intact report still is).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from release import cli
from release.inspect.rules import abi as abi_rule
from release.inspect.stableabi import LimitedApiAudit
from release.inspect.verify import inspect_wheel, verify_wheel, write_report
from release.inspect.versions import parse_version, split_versioned
from release.wheel.names import report_path
from tests.hostile.builders import ElfImage, elf_bytes
from tests.hostile.builders import small_wheel as wheel

ARABIC_34 = "\u0663\u0664"  # ٣٤


def result(path: Path, rule_id: str) -> tuple[str, str, tuple[str, ...]]:
    found = next(r for r in verify_wheel(path).rules if r.id == rule_id)
    return found.status, found.message, found.paths


# --- cause 2 -----------------------------------------------------------------------------------


def test_non_ascii_digits_are_no_version() -> None:
    assert split_versioned(f"GLIBC_2.{ARABIC_34}") is None
    assert parse_version(f"2.{ARABIC_34}") == (2,)
    assert split_versioned("GLIBC_2.34") == ("GLIBC", "2.34")


def test_a_glibc_version_of_arabic_digits_fails_the_floor(tmp_path: Path) -> None:
    needs = elf_bytes(verneed=(("libc.so.6", ("GLIBC_2.2.5", f"GLIBC_2.{ARABIC_34}")),), soname="_m.so")
    path = wheel(tmp_path, "cp312-cp312-manylinux_2_34_x86_64", {"tiny/_m.so": needs})
    status, message, paths = result(path, "platform-floor")
    assert status == "fail", message
    assert "tiny/_m.so" in message and paths == ("tiny/_m.so",)
    assert ARABIC_34 not in message  # printed escaped, not as the digits that fooled the reader


# --- cause 12 ----------------------------------------------------------------------------------

PY_SYMBOLS = (("PyInit__m", True), ("_PyObject_GetDictPtr", False), ("PyLong_FromLong", False))


def _unlinked(link: int) -> bytes:
    return _patched("sh_link", lambda image: link)


def _patched(field: str, value: Any) -> bytes:
    """An extension with Python symbols whose `.dynsym` section header has `field` set to
    `value(image)`: the dynamic table (`DT_SYMTAB`, `DT_STRTAB`) still names the real tables."""
    image = ElfImage(symbols=PY_SYMBOLS, soname="_m.abi3.so")
    image.build()
    image.set_shdr(".dynsym", field, value(image))
    return bytes(image.image)


DISAGREEING = [
    pytest.param("sh_link", lambda image: 0, "sh_link (0) names no string table", id="sh_link 0"),
    pytest.param("sh_link", lambda image: 99, "sh_link (99)", id="sh_link out of range"),
    pytest.param("sh_link", lambda image: image.section_index[".shstrtab"], "DT_STRTAB points elsewhere",
                 id="sh_link names another string table"),
    pytest.param("sh_offset", lambda image: image.section_offset[".text"], "DT_SYMTAB points elsewhere",
                 id="sh_offset not DT_SYMTAB"),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value", "says"), DISAGREEING)
def test_a_dynsym_the_loader_does_not_bind_through_is_audited_whole(
    tmp_path: Path, field: str, value: Any, says: str
) -> None:
    member = "tiny/_m.abi3.so"
    data = _patched(field, value)
    path = wheel(tmp_path, "cp312-abi3-manylinux_2_28_x86_64", {member: data})
    contents = inspect_wheel(path).wheel
    copy = tmp_path / "copy.so"
    assert contents.symbol_copy(member, copy), "the file was skipped as holding no Python symbols"
    assert copy.read_bytes() == data  # the whole file, as the loader sees it
    assert says in contents.symbol_doubts[member]


def test_the_section_headers_disagreeing_with_the_dynamic_table_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    member = "tiny/_m.abi3.so"
    path = wheel(tmp_path, "cp312-abi3-manylinux_2_28_x86_64", {member: _unlinked(0)})
    asked: list[tuple[str, ...]] = []

    def auditor(contents: Any, paths: Any, floor: str) -> list[LimitedApiAudit]:
        asked.append(tuple(paths))  # abi3audit's place: unit tests start no process
        return [LimitedApiAudit(p, (), ()) for p in paths]

    monkeypatch.setattr(abi_rule, "audit_limited_api", auditor)
    ctx = inspect_wheel(path)
    found = abi_rule.stable_abi(ctx)
    assert asked == [(member,)]
    assert found.status == "warn" and member in found.message and "audited whole" in found.message
    assert found.paths == (member,)


def test_agreeing_tables_are_copied_sparse_without_a_doubt(tmp_path: Path) -> None:
    member = "tiny/_m.abi3.so"
    data = elf_bytes(symbols=PY_SYMBOLS, soname="_m.abi3.so")
    contents = inspect_wheel(wheel(tmp_path, "cp312-abi3-manylinux_2_28_x86_64", {member: data})).wheel
    assert contents.symbol_doubts == {}
    assert contents.symbol_copy(member, tmp_path / "copy.so")


# --- cause 13 ----------------------------------------------------------------------------------


def _failing(tmp_path: Path) -> Path:
    """A wheel tagged aarch64 that holds x86_64 code: elf-machine fails it."""
    path = wheel(tmp_path, "cp312-cp312-manylinux_2_28_aarch64", {"tiny/_m.so": elf_bytes(soname="_m.so")})
    report = verify_wheel(path)
    assert not report.ok
    write_report(report)
    return path


def _forge(path: Path, stamp: Any) -> None:
    """Edit the report to pass, and stamp it again as `stamp(document)` says."""
    target = report_path(path)
    document = json.loads(target.read_text())
    for entry in document["rules"]:
        if entry["status"] == "fail":
            entry.update(status="pass", message="forged", paths=[])
    document["ok"] = True
    document["releasable"] = all(r["status"] != "warn" for r in document["rules"])
    document["reuse"]["digest"] = stamp(document)
    target.write_text(json.dumps(document, indent=2) + "\n")


def _sha256(document: dict[str, Any]) -> str:
    body = {k: v for k, v in document.items() if k != "reuse"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _other_key(document: dict[str, Any]) -> str:
    body = {k: v for k, v in document.items() if k != "reuse"}
    mark = {k: v for k, v in document["reuse"].items() if k != "digest"}
    signed = json.dumps({"report": body, "stamp": mark}, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(b"\0" * 32, signed, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("stamp", [_sha256, _other_key], ids=["sha256 re-digested", "another key"])
def test_a_forged_report_costs_a_full_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stamp: Any
) -> None:
    path = _failing(tmp_path)
    _forge(path, stamp)
    again = verify_wheel(path, reuse=True)
    assert not again.reused and not again.ok
    assert cli.main(["verify", str(path)]) == 6
    assert "verdict stands" not in capsys.readouterr().out


def test_an_intact_report_is_still_reused(tmp_path: Path) -> None:
    path = _failing(tmp_path)
    again = verify_wheel(path, reuse=True)
    assert again.reused and not again.ok


def test_the_key_is_this_users_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from release.inspect import stampkey

    key = tmp_path / "cache" / "verify-key"
    monkeypatch.setattr(stampkey, "key_path", lambda: key)
    stampkey.verify_key.cache_clear()
    try:
        made = stampkey.verify_key()
        assert key.stat().st_mode & 0o777 == 0o600 and key.read_bytes() == made
        stampkey.verify_key.cache_clear()
        key.chmod(0o644)  # readable by others: not trusted, a key of this process instead
        assert stampkey.verify_key() != made
    finally:
        stampkey.verify_key.cache_clear()


# --- cause 14 ----------------------------------------------------------------------------------


def test_a_wheel_tagged_for_two_machines_needs_code_for_both(tmp_path: Path) -> None:
    tag = "cp312-cp312-manylinux_2_28_x86_64.manylinux_2_28_aarch64"
    path = wheel(tmp_path, tag, {"tiny/_m.so": elf_bytes(soname="_m.so")})
    status, message, paths = result(path, "elf-machine")
    assert status == "fail", message
    assert "no code for aarch64" in message and "tiny/_m.so" in message
    assert paths == ("tiny/_m.so",)
