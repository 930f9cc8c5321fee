"""The real-world corpus tier: published CUDA and ROCm wheels (tests/corpus/wheels.toml), downloaded
once into ~/.cache/release-corpus ($RELEASE_CORPUS_CACHE), verified without a matrix.

Each wheel must give the findings recorded in tests/corpus/expected.toml, rule by rule; verify must
read every ELF member (the count is checked against the zip, independently), may fail a wheel but
never fail to read one, and stays under 256 MB of peak RSS in a child with an address-space limit.
A wheel that cannot be downloaded skips its test, which the suite turns into a failure under CI.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.fetch import CorpusWheel, cache_dir, download, load_manifest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "tests" / "corpus" / "expected.toml"
ADDRESS_SPACE = 1 << 30
RSS_MB = 256
WHEELS = load_manifest()


@dataclass(frozen=True)
class Verified:
    code: int
    report: dict[str, Any] | None
    stderr: str
    rss_mb: float
    cpu: float


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _verify(wheel: Path) -> Verified:
    command = [sys.executable, "-m", "release", "verify", "--json", str(wheel)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=wheel.parent,
            preexec_fn=_limit,  # noqa: PLW1509 (the limit must be set in the child)
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        printed, stderr = out.read(), err.read().decode("utf-8", "replace")
    report = json.loads(printed) if printed.strip() else None
    return Verified(proc.returncode, report, stderr, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def _elf_members(wheel: Path) -> int:
    """ELF members counted with zipfile: the first four bytes of each member."""
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or info.file_size < 64:
                continue
            with archive.open(info) as member:
                count += member.read(4) == b"\x7fELF"
    return count


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    with EXPECTED.open("rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="module")
def fetched() -> dict[str, Path]:
    cache = cache_dir()
    paths: dict[str, Path] = {}
    for item in WHEELS:
        try:
            paths[item.name] = download(item, cache, quiet=True)
        except (OSError, RuntimeError) as exc:
            pytest.skip(f"cannot download the corpus into {cache}: {item.filename}: {exc}")
    return paths


@pytest.fixture(scope="module")
def verified(fetched: dict[str, Path]) -> Iterator[dict[str, Verified]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(fetched, pool.map(_verify, fetched.values()), strict=True))
    print("\nwheel                               MB zipped  ELF files  peak RSS MB  CPU s  failed")
    for item in WHEELS:
        r = results[item.name]
        failed = [x["id"] for x in (r.report or {}).get("rules", []) if x["status"] == "fail"]
        files = len(r.report["elf_files"]) if r.report else "-"
        print(f"{item.name:<35} {item.size / 1e6:9.1f} {files:>10} {r.rss_mb:12.0f} {r.cpu:6.2f}  "
              f"{', '.join(failed)}")
    yield results


def test_the_corpus_is_large_enough() -> None:
    assert len(WHEELS) >= 8
    assert sum("cuda" in w.project or "cu12" in w.project for w in WHEELS) >= 3
    assert sum("rocm" in w.project for w in WHEELS) >= 3
    assert any(w.size > 300_000_000 for w in WHEELS)


def test_every_wheel_has_recorded_findings(expected: dict[str, Any]) -> None:
    assert sorted(expected) == sorted(w.name for w in WHEELS)


@pytest.mark.parametrize("item", WHEELS, ids=[w.name for w in WHEELS])
def test_corpus_wheel(
    item: CorpusWheel, fetched: dict[str, Path], verified: dict[str, Verified], expected: dict[str, Any]
) -> None:
    run = verified[item.name]
    assert run.code in (0, 6), f"verify could not read the wheel: {run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    assert run.report is not None
    want = expected[item.name]
    statuses = {r["id"]: r["status"] for r in run.report["rules"]}
    assert statuses == want["rules"], {k: (v, want["rules"].get(k)) for k, v in statuses.items()
                                       if v != want["rules"].get(k)}
    assert len(run.report["elf_files"]) == want["elf_files"] == _elf_members(fetched[item.name])
    architectures = sorted({a for e in run.report["elf_files"] for a in e["architectures"]})
    assert architectures == want["architectures"]
    assert run.report["runtime_bound"] == want["runtime_bound"]
    assert run.rss_mb <= RSS_MB, f"{run.rss_mb:.0f} MB peak RSS"


# --- hand-tampered copies of the free-threaded and 3.15 wheels (issue 56) ------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _tampered(
    source: Path, target_dir: Path, tag: str, renames: dict[str, str], copies: dict[str, str] | None = None
) -> Path:
    """A copy of the wheel `source` tagged `tag` (`cp314-abi3-manylinux_2_28_x86_64`), with members
    renamed, and `copies` (new name: member) added (RECORD and WHEEL rewritten to match, so that only
    the names lie)."""
    with zipfile.ZipFile(source) as zf:
        members = {renames.get(i.filename, i.filename): zf.read(i) for i in zf.infolist() if not i.is_dir()}
    members.update({new: members[old] for new, old in (copies or {}).items()})
    info = next(n.split("/")[0] for n in members if n.endswith(".dist-info/WHEEL"))
    wheel_text = members[f"{info}/WHEEL"].decode()
    wheel_lines = [x for x in wheel_text.splitlines() if x.strip() and not x.startswith("Tag:")]
    members[f"{info}/WHEEL"] = ("\n".join([*wheel_lines, f"Tag: {tag}"]) + "\n").encode()
    record = f"{info}/RECORD"
    rows = [f"{n},{_record_hash(d)},{len(d)}" for n, d in members.items() if n != record]
    members[record] = ("\n".join([*rows, f"{record},,"]) + "\n").encode()
    distribution, version = source.name.split("-")[:2]
    target = target_dir / f"{distribution}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data, zipfile.ZIP_DEFLATED)
    return target


TAMPERED = [
    pytest.param("cuda-bindings-cp315", "cp315-cp315-manylinux_2_28_x86_64",
                 {"cuda/bindings/driver.cpython-315-x86_64-linux-gnu.so":
                  "cuda/bindings/driver.cpython-314-x86_64-linux-gnu.so"},
                 "cpython-314 module in a cp315-cp315 wheel", id="a suffix that does not fit its tag"),
    pytest.param("cryptography-cp314t", "cp314-abi3-manylinux_2_28_x86_64", {},
                 "a t build never claims abi3", id="abi3 claimed on a t build"),
    pytest.param("cryptography-abi3t", "cp312-abi3-manylinux_2_28_x86_64",
                 {"cryptography/hazmat/bindings/_rust.abi3t.so":
                  "cryptography/hazmat/bindings/_rust.abi3-x86_64-linux-gnu.so"},
                 "3.14 and older do not import it", id="a 3.15-style abi3 name in a wheel for 3.12+"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "tag", "renames", "says"), TAMPERED)
def test_a_tampered_copy_of_a_corpus_wheel_fails_naming_the_file(  # noqa: PLR0917 (parameters)
    fetched: dict[str, Path], tmp_path: Path, name: str, tag: str, renames: dict[str, str], says: str
) -> None:
    copy = _tampered(fetched[name], tmp_path, tag, renames)
    run = _verify(copy)
    assert run.code == 6, run.stderr
    assert run.report is not None
    found = next(r for r in run.report["rules"] if r["id"] == "module-suffix")
    assert found["status"] == "fail" and says in found["message"], found
    named = list(renames.values()) or [e["path"] for e in run.report["elf_files"]]
    assert found["paths"] == named and all(p in found["message"] for p in named)
    assert next(r for r in run.report["rules"] if r["id"] == "wheel-integrity")["status"] == "pass"


def test_a_libpython_grafted_into_a_corpus_wheel_fails_naming_it(
    fetched: dict[str, Path], tmp_path: Path
) -> None:
    """auditwheel once grafted libpython into a cp314t wheel: here a copy of one of cuda-bindings'
    modules, named as auditwheel names a grafted libpython3.14t."""
    source = fetched["cuda-bindings-cp314t"]
    grafted = "cuda_bindings.libs/libpython3.14t-1a2b3c4d.so.1.0"
    module = "cuda/bindings/_internal/utils.cpython-314t-x86_64-linux-gnu.so"
    copy = _tampered(source, tmp_path, "cp314-cp314t-manylinux_2_28_x86_64", {}, {grafted: module})
    run = _verify(copy)
    assert run.code == 6 and run.report is not None, run.stderr
    found = next(r for r in run.report["rules"] if r["id"] == "libpython")
    assert found["status"] == "fail" and f"{grafted} is a libpython" in found["message"], found
    assert found["paths"] == [grafted]
