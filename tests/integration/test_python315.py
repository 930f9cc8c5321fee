"""Python 3.15 works here as 3.14 does (issue 56): its interpreter comes from Debian sid's binaries
(`release toolchain install python 3.15`, scripts/python-debian.sh), and the reference engine's cp315
cpu wheel builds on the host from this checkout, verifies and smokes in a fresh venv; the matrix's
free-threaded steps are named GitHub-only in one line and not attempted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from release.machine.interpreters import find_interpreter, interpreter
from tests.integration.conftest import HOST_FLOOR, ROOT, one_machine, toolkit

pytestmark = pytest.mark.integration


def test_a_cp315_cpu_wheel_builds_verifies_and_smokes_here(tmp_path: Path) -> None:
    if find_interpreter("3.15") is None:  # what bootstrap.sh does for the matrix's Pythons
        toolkit("toolchain", "install", "python", "3.15", timeout=1200)
    assert interpreter("3.15").usable, interpreter("3.15").problem
    data = one_machine(yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8")))
    assert {"3.15", "3.14t", "3.15t"} <= set(data["python"])
    data["engine"]["source"] = str(ROOT / "engine")
    data["platform"]["floor"] = HOST_FLOOR
    data["python"] = ["3.15", "3.15t"]
    data["variants"] = {"cpu": {**data["variants"]["cpu"], "images": []}}
    data.pop("variant_wheels", None)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    built = toolkit("--matrix", str(matrix), "build", "--variant", "cpu", timeout=1800)
    github = [line for line in built.stdout.splitlines() if line.startswith("GitHub-only:")]
    assert len(github) == 1 and "Python 3.15t" in github[0], built.stdout  # not attempted here
    (wheel,) = sorted((tmp_path / "wheelhouse" / "cpu").glob("*.whl"))
    assert wheel.name == f"xfer_engine_cpu-0.1.0-cp315-cp315-{HOST_FLOOR}.whl"
    report = json.loads(wheel.with_name(wheel.name + ".verify.json").read_text(encoding="utf-8"))
    assert report["ok"] is True, [r for r in report["rules"] if r["status"] == "fail"]
    assert {r["status"] for r in report["rules"]} <= {"pass", "warn", "not-applicable"}

    smoked = toolkit("--matrix", str(matrix), "smoke", "--variant", "cpu", "--python", "3.15", timeout=1200)
    out = smoked.stdout + smoked.stderr
    assert "[3.15 host] import xfer ... ok" in out, out
    assert "selftest --json ... ok" in out, out
