"""Another machine's wheels on this one (issue 48): `release smoke` runs them under emulation
where binfmt_misc has qemu-user's entry and Debian has the wheel's Python, else says why each is
left to its machine; check-resolution installs the set once per machine."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from release.commands import smoke as smoke_command
from release.config.matrix import load
from release.errors import SmokeError
from release.machine.emulation import DIST_PYTHON, emulation_missing
from release.plan.steps import make_plan
from release.smoke import emulated, machines, selection
from release.smoke.emulated import foreign_wheels, left_line
from release.smoke.machines import machine_runs
from release.variants.cases import plan_cases

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: {flags}\noffset 0\n"


@pytest.fixture(autouse=True)
def _x86_64_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names below are another machine's on x86_64 (CI's machine): said so on any host."""
    for module in (emulated, machines):
        monkeypatch.setattr(module, "host_machine", lambda: "x86_64")


def _binfmt(tmp_path: Path, text: str | None) -> Path:
    root = tmp_path / "binfmt_misc"
    root.mkdir(parents=True)
    (root / "status").write_text("enabled\n", encoding="utf-8")
    if text is not None:
        (root / "qemu-aarch64").write_text(text, encoding="utf-8")
    return root


def test_emulation_needs_an_enabled_entry_with_the_f_flag(tmp_path: Path) -> None:
    assert emulation_missing("aarch64", _binfmt(tmp_path / "a", ENTRY.format(flags="POCF"))) == ""
    missing = emulation_missing("aarch64", _binfmt(tmp_path / "b", None))
    assert missing.startswith("no binfmt_misc entry for aarch64")
    assert "update-binfmts --enable qemu-aarch64" in missing
    disabled = emulation_missing(
        "aarch64", _binfmt(tmp_path / "c", ENTRY.format(flags="F").replace("enabled", "disabled"))
    )
    assert disabled.startswith("the binfmt_misc entry qemu-aarch64 is disabled")
    no_f = emulation_missing("aarch64", _binfmt(tmp_path / "d", ENTRY.format(flags="PO")))
    assert "lacks the F flag (flags: PO)" in no_f


def _wheels(tmp_path: Path, *names: str) -> list[Path]:
    paths = [tmp_path / n for n in names]
    for path in paths:
        path.write_bytes(b"")
    return paths


def test_only_debians_python_runs_under_emulation_and_the_rest_is_said(tmp_path: Path) -> None:
    tag = DIST_PYTHON.replace(".", "")
    cp313, cp312, here, abi3 = _wheels(
        tmp_path,
        f"xfer_engine_cpu-0.1.0-cp{tag}-cp{tag}-manylinux_2_39_aarch64.whl",
        "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_39_aarch64.whl",
        "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_39_x86_64.whl",
        "xfer_engine_cpu-0.1.0-cp310-abi3-manylinux_2_39_aarch64.whl",
    )
    found = {f.wheel: f for f in foreign_wheels([cp313, cp312, here, abi3], None, missing=lambda _m: "")}
    assert set(found) == {cp313, cp312, abi3}  # this machine's wheel is the host legs'
    assert found[cp313].left == found[abi3].left == ""  # abi3 from 3.10 serves Debian's 3.13
    assert (
        found[cp312].left
        == f"a Python 3.12 wheel; emulation here has Debian's Python {DIST_PYTHON} of aarch64 only"
    )
    assert left_line(found[cp312]).endswith(
        "an aarch64 machine runs it (GitHub: the ubuntu-24.04-arm runner)"
    )
    asked = foreign_wheels([abi3], "3.12", missing=lambda _m: "")
    assert asked[0].left.startswith("Python 3.12: emulation here has")
    unset = foreign_wheels([cp313], None, missing=lambda m: f"no binfmt_misc entry for {m}")
    assert unset[0].left == "no binfmt_misc entry for aarch64"


def test_check_resolution_installs_each_machines_wheels_for_that_machine(tmp_path: Path) -> None:
    """Both machines' cpu wheels and x86_64's rocm one: the x86_64 cases resolve as this host
    (a newer glibc tag: as that tag), aarch64's as an aarch64 machine; rocm has no aarch64 case."""
    loaded = load(ROOT / "matrix.yaml")
    variants = {n: v for n, v in make_plan(loaded).variants.items() if n in ("cpu", "rocm")}
    cpu_x86, cpu_arm, rocm = _wheels(
        tmp_path,
        "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_39_aarch64.whl",
        "xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    )
    cases = plan_cases(variants, ["3.12"], ["pip"], ["per-name"], None, nvidia_driver=False, newest="3.12")
    runs = machine_runs(cases, [cpu_x86, cpu_arm, rocm], variants)
    got = sorted((c.requirement, c.machine, platform) for c, platform in runs.cases)
    assert got == [
        ("xfer-engine-cpu", "aarch64", "manylinux_2_39_aarch64"),
        ("xfer-engine-cpu", "x86_64", None),
        ("xfer-engine-rocm", "x86_64", None),
    ]
    assert runs.said == [
        "aarch64 wheels: pip and uv resolve as a manylinux_2_39_aarch64 machine would (--platform, "
        "--python-platform), and each install must give the aarch64 wheel"
    ]
    one = machine_runs(cases, [cpu_x86, rocm], variants)
    assert [(c.machine, p) for c, p in one.cases] == [("", None), ("", None)] and one.said == []


def test_smoke_of_wheels_left_to_their_machine_fails_and_names_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`release smoke --python 3.12` with only aarch64 wheels on an x86_64 host: nothing is counted
    as passing; the error names the wheel, why it cannot run here, and where it does."""
    monkeypatch.setattr(emulated, "emulation_missing", lambda _m: "")
    monkeypatch.setattr(selection, "host_machine", lambda: "x86_64")
    (tmp_path / "cpu").mkdir()
    (wheel,) = _wheels(tmp_path / "cpu", "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_39_aarch64.whl")
    args = argparse.Namespace(
        variant=["cpu"], python="3.12", wheelhouse=tmp_path, image=None, json=False, in_image=None,
        verbose=False, pull=False,
    )  # fmt: skip
    with pytest.raises(SmokeError) as raised:
        smoke_command.run(args, load(ROOT / "matrix.yaml"))
    assert str(raised.value).splitlines() == [
        f"no wheels to smoke-test in {tmp_path}",
        f"{wheel.name}: not run on this x86_64 machine (Python 3.12: emulation here has Debian's "
        f"Python {DIST_PYTHON} of aarch64 only); an aarch64 machine runs it "
        "(GitHub: the ubuntu-24.04-arm runner)",
    ]
