"""sbom-lists-grafted on synthetic wheel facts, the SBOM reader, and a variant wheel's rename that
carries auditwheel's SBOM along (a real zip, read back by verify)."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from release.inspect.rules.sbom import grafted, path_hashes, unlisted
from release.inspect.verify import verify_wheel
from release.plan.steps import make_plan
from release.variants.make import make_wheel, variant_set
from release.wheel.archive import parse_record
from release.wheel.sbom import Sbom, SbomError, is_sbom, parse_purl, parse_sbom, renamed
from tests.unit.test_rules_good import CORE, LIBS, Case, Change, Facts, check_case, cyclonedx, elf
from tests.unit.test_variants import _loaded

RULE = "sbom-lists-grafted"
NUMA = f"{LIBS}/libnuma-0a1b2c3d.so.1.0.0"
TAG = "cp312-cp312-manylinux_2_28_x86_64"
GOOD_NAME = f"xfer_engine_rocm-0.1.0-{TAG}.whl"
CORE_AT = "/lib64/libxfercore.so.0"
"""Where the good wheel's grafted library came from."""


def _graft(member: str) -> Change:
    def change(f: Facts) -> None:
        f.add_elf(elf(member, soname=member.rsplit("/", 1)[1]))

    return change


def _sbom(
    *origins: str, name: str = "xfer_engine_rocm", version: str = "0.1.0", file: str = GOOD_NAME
) -> Change:
    def change(f: Facts) -> None:
        f.sbom = cyclonedx(name, version, file, origins)

    return change


def _then(*changes: Change) -> Change:
    def change(f: Facts) -> None:
        for c in changes:
            c(f)

    return change


def _no_sbom(f: Facts) -> None:
    f.sbom = None


def _plain(f: Facts) -> None:
    f.modes.pop(CORE)
    f.elves.pop(CORE)


def _unrecorded(f: Facts) -> None:
    f.record_rows = lambda rows: [r for r in rows if "sboms/" not in r[0]]


CASES = [
    Case("every grafted library named", lambda f: None, "pass", says="each grafted library (1)"),
    Case("two grafted, both named", _graft(NUMA), "pass"),
    Case("named under a path verify does not guess: still counted", _sbom("/opt/vendor/lib/libxfercore.so.0"),
         "pass"),
    Case("a wheel that grafts nothing needs no SBOM", _then(_plain, _no_sbom), "not-applicable"),
    Case("an SBOM without grafted libraries is still checked",
         _then(_plain, _sbom(file="old.whl")), "fail", says="names the file old.whl"),
    Case("grafted, no SBOM: a warning for a local build", _no_sbom, "warn", (CORE,), says="carries no"),
    Case("grafted, no SBOM, --release", _no_sbom, "fail", (CORE,), release=True, says=CORE),
    Case("the SBOM misses one library", _then(_graft(NUMA), _sbom(CORE_AT)), "fail",
         (NUMA,), release=True, says=f"1 of the 2 libraries it grafts: {NUMA} (auditwheel names"),
    Case("the SBOM misses one, another is under an unguessed path",
         _then(_graft(NUMA), _sbom(CORE_AT, "/opt/x/libnuma.so.1.0.0")), "pass"),
    Case("a stale file_name fails, release or not", _sbom(CORE_AT, file="old-0.1.0-x.whl"),
         "fail", says="names the file old-0.1.0-x.whl, not " + GOOD_NAME),
    Case("another distribution", _sbom(CORE_AT, name="xfer_engine_cuda"), "fail",
         says="not xfer_engine_rocm"),
    Case("another version", _sbom(CORE_AT, version="0.2.0"), "fail", says="not version 0.1.0"),
    Case("a name spelled another way is the same name", _sbom(CORE_AT, name="Xfer-Engine.Rocm"),
         "pass"),
    Case("not JSON", lambda f: setattr(f, "sbom", b"{not json"), "fail", says="not JSON"),
    Case("nested too deep for the JSON reader", lambda f: setattr(f, "sbom", b"[" * 200_000), "fail",
         says="nested too deep"),
    # PEP 770 takes any SBOM: CycloneDX makes metadata.component optional (cryptography 50.0.2's
    # cargo-cyclonedx and hand-written SBOMs have none). Only a grafted library it does not name fails.
    Case("CycloneDX without its component names no library",
         lambda f: setattr(f, "sbom", b'{"bomFormat": "CycloneDX"}'), "fail", (CORE,), release=True,
         says=CORE),
    Case("CycloneDX without its component, naming the library", lambda f: setattr(f, "sbom", json.dumps(
         {"bomFormat": "CycloneDX", "specVersion": "1.5", "metadata": {"timestamp": "2026-09-29T23:04:34Z"},
          "components": [{"type": "library", "name": "xfercore", "version": "1.0"}]}).encode()), "pass",
         release=True, says="each grafted library (1)"),
    Case("SPDX naming the library's file", lambda f: setattr(f, "sbom", json.dumps(
         {"spdxVersion": "SPDX-2.3", "packages": [{"name": "core", "packageFileName": "libxfercore.so.0"}]}
    ).encode()), "pass", release=True),
    Case("a library of another name is not this one", lambda f: setattr(f, "sbom", json.dumps(
         {"bomFormat": "CycloneDX", "components": [{"type": "library", "name": "openssl"}]}).encode()),
         "fail", (CORE,), release=True, says=CORE),
    Case("an SPDX document names no library", lambda f: setattr(f, "sbom", b'{"spdxVersion": "SPDX-2.3"}'),
         "warn", (CORE,)),
    Case("the SBOM is not in RECORD", _unrecorded, "fail", says="is not in RECORD"),
    Case("no matrix needed", _no_sbom, "warn", (CORE,), matrix=False),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sbom_lists_grafted(case: Case) -> None:
    check_case(RULE, case)


def test_only_auditwheels_renamed_files_directly_in_a_libs_directory_are_grafted() -> None:
    facts = Facts()
    for member in (
        CORE,
        f"{LIBS}/libplain.so",
        f"{LIBS}/sub/libx-1a2b3c4d.so",
        "xfer/liby-1a2b3c4d.so",
        ".pkg.mesonpy.libs/libz.so.1",
        "xfer_engine_rocm-0.1.0.data/platlib/p.libs/libw-0a0b0c0d.so",
    ):
        facts.add_elf(elf(member))
    found = grafted(facts.contents())
    assert found == [CORE, "xfer_engine_rocm-0.1.0.data/platlib/p.libs/libw-0a0b0c0d.so"]


def test_a_library_is_found_by_the_hash_of_its_original_path() -> None:
    debian = hashlib.sha256(b"/usr/lib/x86_64-linux-gnu/libnuma.so.1.0.0").hexdigest()
    assert debian in path_hashes(NUMA)
    listed = Sbom(None, (f"pkg:deb/debian/libnuma1@2.0.18-1?arch=amd64#{debian}",))
    assert unlisted([NUMA, CORE], [listed]) == ([CORE], 1)
    assert unlisted([NUMA], [listed]) == ([], 0)


def test_a_purl_is_read_as_auditwheel_writes_it() -> None:
    purl = parse_purl("pkg:pypi/xfer_engine@1.0%2Blocal?file_name=xfer_engine-1.0%2Blocal-py3-none-any.whl")
    assert purl is not None
    assert (purl.type, purl.name, purl.version) == ("pypi", "xfer_engine", "1.0+local")
    assert purl.qualifiers == {"file_name": "xfer_engine-1.0+local-py3-none-any.whl"}
    assert parse_purl("https://example.org") is None


def test_the_sbom_reader_lists_what_the_wheel_depends_on() -> None:
    sbom = parse_sbom(
        cyclonedx("pkg", "1.0", "pkg-1.0-py3-none-any.whl", ["/lib64/liba.so.1", "/lib64/libb.so"])
    )
    assert sbom.own is not None and sbom.own.name == "pkg"
    assert len(sbom.listed) == 2
    with pytest.raises(SbomError, match="not JSON"):
        parse_sbom(b"\xff")
    assert is_sbom("pkg-1.0.dist-info/sboms/auditwheel.cdx.json")
    assert not is_sbom("pkg/sboms/auditwheel.cdx.json")
    assert not is_sbom("pkg-1.0.dist-info/sboms/readme.txt")


def test_renamed_names_the_new_wheel_everywhere_its_ref_is_used() -> None:
    old = cyclonedx("pkg_rocm", "1.0", "pkg_rocm-1.0-py3-none-any.whl", ["/lib64/liba.so.1"])
    new = json.loads(renamed("pkg", "1.0", "pkg-1.0-py3-none-any-rocm62.whl")(old))
    purl = "pkg:pypi/pkg@1.0?file_name=pkg-1.0-py3-none-any-rocm62.whl"
    assert new["metadata"]["component"]["bom-ref"] == new["components"][0]["bom-ref"] == purl
    assert new["components"][0]["name"] == "pkg"
    assert new["dependencies"][0]["ref"] == purl
    assert new["components"][1] == json.loads(old)["components"][1], "the libraries stay as they were"
    assert renamed("a", "1", "a.whl")(b'{"spdxVersion": "SPDX-2.3"}') == b'{"spdxVersion": "SPDX-2.3"}'


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _repaired_wheel(directory: Path, distribution: str) -> Path:
    """A wheel as auditwheel leaves it: one grafted library and the SBOM naming its package."""
    stem = distribution.replace("-", "_")
    name = f"{stem}-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    info = f"{stem}-0.1.0.dist-info"
    files = {
        "xfer/__init__.py": b"x = 1\n",
        f"{stem}.libs/libnuma-0a1b2c3d.so.1.0.0": b"\x7fELF not really",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: " + TAG.encode() + b"\n",
        f"{info}/sboms/auditwheel.cdx.json": cyclonedx(stem, "0.1.0", name, ["/lib64/libnuma.so.1.0.0"]),
    }
    record = "".join(f"{n},sha256={_digest(d)},{len(d)}\n" for n, d in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / name, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in [*files.items(), (f"{info}/RECORD", record.encode())]:
            archive.writestr(member, data)
    return directory / name


def test_a_variant_wheel_keeps_the_sbom_and_names_itself(tmp_path: Path) -> None:
    loaded = _loaded()
    plan = make_plan(loaded).variants
    shared = variant_set(loaded, plan)
    desc = next(d for d in shared.descriptions if d.variant == "rocm")
    source = _repaired_wheel(tmp_path, plan["rocm"].distribution)
    (tmp_path / "out").mkdir()
    made = make_wheel(source, tmp_path / "out", shared, desc)
    sbom_member = "xfer_engine-0.1.0.dist-info/sboms/auditwheel.cdx.json"
    with zipfile.ZipFile(made) as archive:
        assert [n for n in archive.namelist() if "sboms/" in n] == [sbom_member]
        data = archive.read(sbom_member)
        record = archive.read("xfer_engine-0.1.0.dist-info/RECORD").decode()
    row = next(r for r in parse_record(record) if r.path == sbom_member)
    assert (row.digest, row.size) == (_digest(data), len(data))
    own = parse_sbom(data).own
    assert own is not None
    assert (own.name, own.version, own.qualifiers["file_name"]) == ("xfer_engine", "0.1.0", made.name)
    assert made.name.endswith(f"-{desc.label}.whl")
    for wheel in (source, made):
        result = next(r for r in verify_wheel(wheel, release=True).rules if r.id == RULE)
        assert result.status == "pass", result
