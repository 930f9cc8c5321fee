"""A host build checks the matrix's system build dependencies before it compiles anything."""

from __future__ import annotations

from pathlib import Path

import yaml

from .conftest import toolkit, write_host_matrix


def test_a_missing_system_package_is_named_before_compiling(tmp_path: Path) -> None:
    matrix = write_host_matrix(tmp_path, variants=["cpu"])
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    data["engine"]["system_packages"] = {
        # Present on the development machines (zlib1g-dev): not named.
        "zlib": {"dnf": ["zlib-devel"], "apt": ["zlib1g-dev"], "pkg_config": ["zlib"], "headers": ["zlib.h"]},
        "nothere": {
            "dnf": ["nothere-devel"],
            "apt": ["libnothere-dev"],
            "pkg_config": ["xfer-test-nothere"],
            "libraries": ["xfer_test_nothere"],
        },
    }
    matrix.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    proc = toolkit("--matrix", str(matrix), "build", "--variant", "cpu", check=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if "system build dependencies" in line]
    assert len(lines) == 1, proc.stderr
    assert "nothere (pkg-config xfer-test-nothere; library xfer_test_nothere)" in lines[0]
    assert "`apt-get install libnothere-dev`" in lines[0]
    assert "zlib" not in lines[0]
    assert "Traceback" not in proc.stderr
    # Refused before staging, let alone compiling.
    assert "staged" not in proc.stdout + proc.stderr
    assert not (tmp_path / "build" / "cpu" / "src").exists()
    assert not list(tmp_path.glob("wheelhouse/**/*.whl"))
