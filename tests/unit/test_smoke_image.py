"""Image simulation and smoke helpers that need no process: scripts, parsers, wheel selection."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from release.config.matrix import Simulation, load
from release.errors import SmokeError, ToolchainError, UsageError
from release.plan.steps import make_plan
from release.smoke.image import Bind, Sandbox, minbase_dir, missing_libraries
from release.smoke.outcome import Outcome, Step, report, summary
from release.smoke.runner import interpreter_home
from release.smoke.selection import images_for, wheel_python, wheels_for
from release.smoke.verdict import json_ok

ROOT = Path(__file__).resolve().parents[2]
LIB = Path("/usr/lib/x86_64-linux-gnu")
RUNTIME = ("libamdhip64.so.5", "libamdhip64.so.5.2.21153", "libhsakmt.so.1")


def _script(tmp_path: Path, sim: Simulation, **kwargs: object) -> str:
    box = Sandbox("img", sim, workdir=tmp_path, runtime=RUNTIME, libdir=LIB, **kwargs)  # type: ignore[arg-type]
    return box.script(tmp_path / "stage")


def test_system_layout_mounts_nothing_but_its_stage(tmp_path: Path) -> None:
    text = _script(tmp_path, Simulation(runtime="system"))
    assert "overlay" not in text
    assert "ldconfig" not in text
    assert text.rstrip().endswith('exec "$@"')


def test_prefix_layout_via_ld_so_conf_d(tmp_path: Path) -> None:
    text = _script(tmp_path, Simulation(runtime="prefix", prefix="/opt/rocm-6.4.1/lib", via="ld.so.conf.d"))
    lines = text.splitlines()
    copy = next(i for i, line in enumerate(lines) if "/cp -a" in line and "libamdhip64.so.5 " in line)
    hide = next(i for i, line in enumerate(lines) if "/rm -f" in line)
    assert copy < hide, "the runtime must be copied to the prefix before it is hidden"
    assert f"lowerdir=/opt,upperdir={tmp_path}/stage/prefix-up" in text
    assert f"lowerdir={LIB},upperdir={tmp_path}/stage/libdir-up" in text
    assert "echo /opt/rocm-6.4.1/lib > " in text
    assert "ldconfig -X -C " in text
    assert "--bind " in text and " /etc/ld.so.cache" in text and " /etc/ld.so.conf.d" in text
    assert "LD_LIBRARY_PATH" not in text


def test_prefix_layout_via_ld_library_path_writes_no_conf(tmp_path: Path) -> None:
    text = _script(tmp_path, Simulation(runtime="prefix", prefix="/opt/rocm/lib", via="LD_LIBRARY_PATH"))
    assert "zz-release-simulated-runtime.conf" not in text
    assert "export LD_LIBRARY_PATH=/opt/rocm/lib" in text


def test_absent_layout_hides_and_recaches(tmp_path: Path) -> None:
    text = _script(tmp_path, Simulation(runtime="absent"))
    assert f"{LIB}/libhsakmt.so.1" in text
    assert "ldconfig -X -C" in text
    assert "/opt" not in text


def test_rootfs_layout_chroots_with_read_only_binds(tmp_path: Path) -> None:
    sim = Simulation(runtime="absent", rootfs="debootstrap-minbase")
    binds = [Bind(path=Path("/root/.pyenv/versions/3.12.1")), Bind(path=tmp_path, read_only=False)]
    box = Sandbox("mb", sim, workdir=tmp_path, rootfs=Path("/cache/minbase"), binds=binds)
    text = box.script(tmp_path / "stage")
    assert f"lowerdir=/cache/minbase,upperdir={tmp_path}/stage/rootfs-up" in text
    assert f"remount,bind,ro {tmp_path}/stage/root/root/.pyenv/versions/3.12.1" in text
    assert f"remount,bind,ro {tmp_path}/stage/root{tmp_path}" not in text
    assert f'chroot {tmp_path}/stage/root "$@"' in text


def test_runtime_layouts_need_the_runtime_on_the_host(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="none of its libraries"):
        Sandbox("x", Simulation(runtime="system"), workdir=tmp_path, runtime=(), libdir=LIB)
    with pytest.raises(SmokeError, match="minbase root file system"):
        Sandbox("x", Simulation(runtime="absent", rootfs="debootstrap-minbase"), workdir=tmp_path)


def test_missing_libraries_from_ldd_and_loader_errors() -> None:
    ldd = (
        "/v/lib/xfer/_xfer.so:\n\tlinux-vdso.so.1 (0x0)\n\tlibstdc++.so.6 => not found\n"
        "\tlibamdhip64.so.5 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x0)\n"
        "/v/bin/xfer-master:\n\tlibstdc++.so.6 => not found\n"
    )
    assert missing_libraries(ldd) == ("libstdc++.so.6", "libamdhip64.so.5")
    loader = "xfer-master: error while loading shared libraries: libnuma.so.1: cannot open shared object file"
    assert missing_libraries(loader) == ("libnuma.so.1",)


def test_minbase_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RELEASE_MINBASE_DIR", str(tmp_path / "mb"))
    assert minbase_dir() == tmp_path / "mb"
    monkeypatch.delenv("RELEASE_MINBASE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert minbase_dir() == tmp_path / "gpu-wheel-release" / "minbase-bookworm"


def _wheel(directory: Path, name: str, members: tuple[str, ...] = ()) -> Path:
    path = directory / name
    with zipfile.ZipFile(path, "w") as archive:
        for member in members:
            archive.writestr(member, "")
    return path


def test_wheel_selection_by_distribution_and_python(tmp_path: Path) -> None:
    variant = load(ROOT / "matrix.yaml").variant("rocm")
    a = _wheel(tmp_path, "xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    b = _wheel(tmp_path, "xfer_engine_rocm-0.1.0-cp313-cp313-manylinux_2_28_x86_64.whl")
    _wheel(tmp_path, "xfer_engine_cpu-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    (tmp_path / "notes.whl").write_text("")
    assert wheels_for(tmp_path, variant, "3.12") == [a]
    assert wheels_for(tmp_path, variant, None) == [a, b]
    assert wheel_python(b) == "3.13"
    with pytest.raises(SmokeError, match="not a CPython wheel"):
        wheel_python(_wheel(tmp_path, "x-1.0-py3-none-any.whl"))


def testjson_ok() -> None:
    assert json_ok('{"ok": true, "write": {"bytes": 4}}') is True
    assert json_ok('{"ok": false}') is False
    assert json_ok('{"ok": 1}') is False
    assert json_ok("xfer-master 0.1.0") is None
    assert json_ok('{"status": "fine"}') is None


def test_images_for_adds_host_and_filters() -> None:
    rocm = make_plan(load(ROOT / "matrix.yaml")).variant("rocm")
    names = [n for n, _ in images_for(rocm, None, host_has_runtime=True)]
    assert names[0] == "host"
    assert "rocm-opt-prefix" in names and "vllm-rocm" in names
    ((_, host),) = images_for(rocm, ["host"], host_has_runtime=False)
    assert host.expect == "runtime-missing"
    with pytest.raises(UsageError, match="--image 'rocm-optprefix' is not an image of this variant"):
        images_for(rocm, ["rocm-optprefix"], host_has_runtime=True)


def test_interpreter_home_refuses_the_system_python() -> None:
    assert interpreter_home(Path("/opt/py/3.12.1/bin/python3.12")) == Path("/opt/py/3.12.1")
    with pytest.raises(SmokeError, match="self-contained interpreter"):
        interpreter_home(Path("/usr/bin/python3.11"))


def test_summary_and_report() -> None:
    good = Outcome(wheel="a.whl", sha256="0" * 64, variant="cpu", python="3.12", image="host", expect="pass",
                   steps=[Step("import xfer", True, 0.25)])
    bad = Outcome(wheel="a.whl", sha256="0" * 64, variant="cpu", python="3.12", image="clean-minbase",
                  expect="pass", steps=[Step("shared libraries", False, 1.0, "missing system library x")],
                  error="shared libraries: missing system library x")
    text = summary([good, bad])
    assert text.splitlines()[0].split() == ["wheel", "image", "ran", "in", "expect", "result", "seconds"]
    assert "FAIL (shared libraries: missing system library x)" in text
    data = report([good, bad])
    assert data["ok"] is False
    assert data["schema_version"] == 1
    results = data["results"]
    assert isinstance(results, list)
    assert results[0]["ok"] is True and results[0]["seconds"] == 0.25
