"""A re-verify costs a hash: an intact report of the same bytes, judged against the same facts by
this toolkit and rule set, is reused; anything else is verified again (release.inspect.reuse)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from release.inspect import report as report_module
from release.inspect import reuse, verify
from release.inspect.verify import verify_wheel, write_report
from release.wheel.names import report_path
from tests.integration.publish_support import make_wheel


@pytest.fixture
def verified(tmp_path: Path) -> Path:
    """A wheel with the report a full verify wrote beside it."""
    wheel = make_wheel(tmp_path, "xfer-engine-cpu", "0.1.0", "3.12")
    write_report(verify_wheel(wheel))
    return wheel


def _full_verify_runs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every wheel read in full (inspect_wheel) from now on."""
    calls: list[Path] = []
    original = verify.inspect_wheel

    def counted(wheel: Path, **kwargs: Any) -> Any:
        calls.append(wheel)
        return original(wheel, **kwargs)

    monkeypatch.setattr(verify, "inspect_wheel", counted)
    return calls


def test_an_intact_report_of_the_same_bytes_is_reused(
    verified: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = json.loads(report_path(verified).read_text())
    calls = _full_verify_runs(monkeypatch)
    again = verify_wheel(verified, reuse=True)
    assert again.reused and not calls
    assert again.to_json() == written  # read back into exactly the report that was written
    assert written["reuse"]["toolkit"] and written["reuse"]["rules"] == report_module.ruleset()


def test_a_wheel_without_a_report_is_not_hashed_before_its_verify(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "xfer-engine-cpu", "0.1.0", "3.12")

    def hashed() -> str:
        raise AssertionError("hashed, with no report that could vouch")

    assert reuse.reusable(wheel, "f" * 64, hashed) == (None, "no report beside it")


def test_full_checks_again(verified: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _full_verify_runs(monkeypatch)
    assert not verify_wheel(verified).reused  # reuse is asked for, never assumed
    assert calls == [verified]


def test_a_changed_byte_is_verified_again(verified: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytearray(verified.read_bytes())
    data[-1] ^= 0xFF  # the zip comment's length: the same size, other bytes
    verified.write_bytes(bytes(data))
    calls = _full_verify_runs(monkeypatch)
    with pytest.raises(Exception):  # noqa: B017 (a damaged wheel: verify says why)
        verify_wheel(verified, reuse=True)
    assert calls == [verified]
    facts = json.loads(report_path(verified).read_text())["reuse"]["facts"]
    assert reuse.reusable(verified, facts, lambda: "0" * 64)[1] == "its bytes are not the reported ones"


def _edit(wheel: Path, change: Any) -> None:
    target = report_path(wheel)
    document = json.loads(target.read_text())
    change(document)
    target.write_text(json.dumps(document, indent=2))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d.update(ok=not d["ok"]), "ok is not what its rules say"),
        (lambda d: d["rules"][0].update(message="edited"), "content is not what its stamp records"),
        (lambda d: d["reuse"].update(toolkit="0.0.1"), "made by toolkit 0.0.1"),
        (lambda d: d["reuse"].update(rules="0" * 64), "another rule set"),
        (lambda d: d["reuse"].update(facts="0" * 64), "judged against other facts"),
        (lambda d: d.pop("reuse"), "carries no reuse stamp"),
        (lambda d: d.update(schema_version=2), "another schema version"),
    ],
)
def test_a_report_that_is_not_intact_is_verified_again(
    verified: Path, monkeypatch: pytest.MonkeyPatch, change: Any, why: str
) -> None:
    original = json.loads(report_path(verified).read_text())
    _edit(verified, change)
    assert why in reuse.reusable(verified, original["reuse"]["facts"], lambda: original["sha256"])[1]
    calls = _full_verify_runs(monkeypatch)
    assert not verify_wheel(verified, reuse=True).reused
    assert calls == [verified]


def test_a_tampered_report_whose_stamp_was_recomputed_still_reads_back(
    verified: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report edited so that it no longer follows from its rules (ok true over a failed rule) is
    refused even when its content digest was written to match."""

    def lie(document: dict[str, Any]) -> None:
        document["rules"][0].update(status="fail")
        mark = {k: v for k, v in document["reuse"].items() if k != "digest"}
        document["reuse"]["digest"] = report_module.content_mac(document, mark)

    _edit(verified, lie)
    calls = _full_verify_runs(monkeypatch)
    assert not verify_wheel(verified, reuse=True).reused
    assert calls == [verified]


def test_another_variant_or_mode_is_verified_again(verified: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _full_verify_runs(monkeypatch)
    assert not verify_wheel(verified, reuse=True, release=True).reused
    assert not verify_wheel(verified, reuse=True, expected_version="0.2.0").reused
    assert len(calls) == 2


def test_facts_are_the_same_in_every_process() -> None:
    """Sets are written sorted: the digest does not depend on the interpreter's hash seed."""
    one = reuse.facts_digest((frozenset({"b", "a"}), {"y": 1, "x": (Path("/p"),)}))
    assert one == reuse.facts_digest((frozenset({"a", "b"}), {"x": (Path("/p"),), "y": 1}))
    assert one != reuse.facts_digest((frozenset({"a"}), {"x": (Path("/p"),), "y": 1}))


def test_the_members_rules_read_whole_are_held_from_the_one_pass(tmp_path: Path) -> None:
    """The variant guard's `__init__.py` and the dist-info's files are held as they stream by: a
    rule reading them does not open the wheel again (issue 49)."""
    from release.inspect.reader import read_wheel

    wheel = make_wheel(tmp_path, "xfer-engine-cpu", "0.1.0", "3.12", extra={"xfer/__init__.py": b"# guard\n"})
    contents = read_wheel(wheel, ())
    wheel.unlink()  # a second reading would fail now
    assert contents.read("xfer/__init__.py") == b"# guard\n"
    for member in contents.members:
        if ".dist-info/" in member.name:
            assert len(contents.read(member.name)) == member.size


@pytest.mark.parametrize("settled", [True, False])
def test_a_wheel_written_to_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled: bool
) -> None:
    """The wheel is hashed once before its reading; after it, an unchanged inode, size, mtime and
    ctime stand for a second hash, unless the file changed within the last seconds (the kernel's
    coarse clock may then leave its ctime as it was, so it is hashed again): a write in between is
    found either way (issue 49)."""
    from release.errors import VerifyError
    from release.inspect import reader

    wheel = make_wheel(tmp_path, "xfer-engine-cpu", "0.1.0", "3.12")
    hashed: list[int] = []
    real_hash, real_read = reader.wheelfile.fd_sha256, reader._read_all
    monkeypatch.setattr(reader.wheelfile, "fd_sha256", lambda fd: hashed.append(fd) or real_hash(fd))
    if settled:
        monkeypatch.setattr(reader.wheelfile, "settled", lambda identity: True)
    reader.read_wheel(wheel, ())
    assert len(hashed) == (1 if settled else 2)  # the file was written just now: hashed again

    def read_and_write(*args: Any, **kw: Any) -> Any:
        result = real_read(*args, **kw)
        with wheel.open("r+b") as fh:
            if settled:  # the identity changes (its size here; any write sets the ctime)
                fh.seek(0, 2)
                fh.write(b"\0")
            else:  # the same size, maybe the same ctime tick: the second hash finds it
                fh.seek(-1, 2)
                last = fh.read(1)
                fh.seek(-1, 2)
                fh.write(bytes([last[0] ^ 1]))
        return result

    monkeypatch.setattr(reader, "_read_all", read_and_write)
    with pytest.raises(VerifyError, match="changed while it was verified"):
        reader.read_wheel(wheel, ())
