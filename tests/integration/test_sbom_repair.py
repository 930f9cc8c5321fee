"""A real `auditwheel repair` on this host grafts a Debian-packaged library (libnuma, from
libnuma-dev), writes the PEP 770 SBOM naming its package, and verify's `sbom-lists-grafted` passes
on the repaired wheel and on the variant wheel made from it (whose SBOM names the new file).

No other test grafts a library a distribution package owns: test_second_engine keeps libnuma out
(`platform.system_libraries`), test_build grafts a stand-in runtime no package owns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from release.builder.repair import repair_wheel
from release.inspect.rules.sbom import path_hashes
from release.inspect.verify import verify_wheel
from release.plan.steps import make_plan
from release.variants.make import make_wheel, variant_set
from tests.integration.test_verify_rules import GUARDED_INIT, WheelSpec
from tests.unit.test_variants import _loaded

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path("/usr/include/numa.h").exists() or shutil.which("dpkg") is None,
        reason="needs libnuma-dev from a Debian package (apt install libnuma-dev)",
    ),
]

EXT = "xfer/_xfer.cpython-312-x86_64-linux-gnu.so"
BOUND = "int xfer_test_bound(void) { return 3; }\n"
SOURCE = (
    "#include <numa.h>\nint xfer_test_bound(void);\n"
    "int PyInit__xfer(void) { return numa_available() + xfer_test_bound(); }\n"
)
RULE = "sbom-lists-grafted"


def _sbom(wheel: Path) -> tuple[list[str], dict[str, object]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (member,) = [n for n in names if n.endswith(".dist-info/sboms/auditwheel.cdx.json")]
        return names, json.loads(archive.read(member))


def _gcc(tmp_path: Path, name: str, source: str, *extra: str) -> Path:
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / name
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(tmp_path / f"{name}.c"), *extra], check=True
    )
    return out


def test_repair_names_the_grafted_library_in_the_sbom_and_verify_passes(tmp_path: Path) -> None:
    # the extension NEEDs libnuma (grafted) and a stand-in runtime (excluded, so repair rewrites the
    # wheel once more to declare it: the SBOM must come through that rewrite too)
    _gcc(tmp_path, "libbound_standin.so.1", BOUND, "-Wl,-soname,libbound_standin.so.1")
    link = ["-Wl,--no-as-needed", f"-L{tmp_path}", "-l:libbound_standin.so.1", "-lnuma"]
    ext = _gcc(tmp_path, "_xfer.so", SOURCE, *link)
    built = WheelSpec(
        distribution="xfer_engine_rocm",
        tag="cp312-cp312-linux_x86_64",
        files={"xfer/__init__.py": (GUARDED_INIT, 0o644), EXT: (ext.read_bytes(), 0o755)},
    ).build(tmp_path)
    repaired = repair_wheel(
        built, floor="manylinux_2_28_x86_64", excludes=("libbound_standin.so*",), dest_dir=tmp_path / "out"
    )
    assert repaired.bound == ("libbound_standin.so.1",), "repair rewrote METADATA after auditwheel"
    repaired = repaired.wheel

    names, sbom = _sbom(repaired)
    grafted = [n for n in names if n.startswith("xfer_engine_rocm.libs/libnuma-")]
    assert len(grafted) == 1, names
    components = sbom["components"]
    assert isinstance(components, list)
    assert components[0]["purl"].endswith(f"?file_name={repaired.name}")
    assert [c["name"] for c in components[1:]] == ["libnuma1"], "dpkg names the package that owns libnuma"
    fragment = components[1]["bom-ref"].rpartition("#")[2]
    assert fragment in path_hashes(grafted[0]), "verify finds the library by its original path's hash"
    result = next(r for r in verify_wheel(repaired, release=True).rules if r.id == RULE)
    assert (result.status, result.message) == (
        "pass",
        "the SBOM names the package of each grafted library (1)",
    )

    loaded = _loaded()
    plan = make_plan(loaded).variants
    shared = variant_set(loaded, plan)
    rocm = next(d for d in shared.descriptions if d.variant == "rocm")
    (tmp_path / "variants").mkdir()
    made = make_wheel(repaired, tmp_path / "variants", shared, rocm)
    names, renamed = _sbom(made)
    assert renamed["metadata"]["component"]["purl"].endswith(f"?file_name={made.name}")  # type: ignore[index]
    assert renamed["components"][1:] == components[1:]
    result = next(r for r in verify_wheel(made, release=True).rules if r.id == RULE)
    assert result.status == "pass", result
