"""`release toolchain`: shipped install scripts, interpreter checks and the one-line hints (no process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release import cli
from release.config.backends import load_backends
from release.config.resources import toolkit_backends
from release.machine import install, interpreters
from release.machine import toolchain as toolchain_mod
from release.machine.containers import ContainerEngine
from release.smoke import hostruntime


def fake_python(root: Path, version: str, *, headers: bool) -> Path:
    exe = root / "bin" / f"python{version}"
    exe.parent.mkdir(parents=True)
    exe.write_text("", encoding="utf-8")
    if headers:
        include = root / "include" / f"python{version}"
        include.mkdir(parents=True)
        (include / "Python.h").write_text("", encoding="utf-8")
    return exe


def test_every_backend_with_a_toolkit_has_a_shipped_install_script() -> None:
    for name, backend in load_backends(toolkit_backends()).items():
        if backend.toolkit is None:
            continue
        assert install.script_for(name).is_file(), name
        assert toolchain_mod.install_hint(backend) == f"release toolchain install {name}"


def test_a_backend_the_toolkit_ships_no_script_for_keeps_its_own_command(tmp_path: Path) -> None:
    backend = load_backends(toolkit_backends())["rocm"]
    taught = type(backend)(**{**vars(backend), "name": "xpu"})
    assert toolchain_mod.install_hint(taught) == backend.toolkit.install  # type: ignore[union-attr]


def test_missing_toolkit_names_the_toolkit_command(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = load_backends(toolkit_backends())["musa"]
    for var in ("MUSA_HOME", "MUSA_PATH"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(toolchain_mod.ToolchainError) as caught:
        toolchain_mod.find_toolchain(backend)
    assert str(caught.value).endswith("install it with `release toolchain install musa`")
    assert "\n" not in str(caught.value)


def test_unknown_script_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["toolchain", "path", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no install script for 'nope'" in err and "rocm" in err


def test_interpreter_without_headers_is_named_with_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = fake_python(tmp_path / "py", "3.11", headers=False)
    monkeypatch.setattr(interpreters, "find_interpreter", lambda version: exe)
    found = interpreters.interpreter("3.11")
    assert not found.usable
    headers = tmp_path / "py" / "include" / "python3.11" / "Python.h"
    assert found.problem == f"Python 3.11 at {exe} has no headers ({headers} missing)"
    assert found.fix == f"reinstall {tmp_path / 'py'}"


def test_distribution_python_without_headers_points_at_the_dev_package() -> None:
    assert interpreters.python_headers(Path("/usr/bin/python3.11"), "3.11").parents[2] == Path("/usr")


def test_interpreter_with_headers_is_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = fake_python(tmp_path / "py", "3.12", headers=True)
    monkeypatch.setattr(interpreters, "find_interpreter", lambda version: exe)
    assert interpreters.interpreter("3.12").usable


def test_absent_interpreter_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interpreters, "find_interpreter", lambda version: None)
    found = interpreters.interpreter("3.10")
    assert found.path is None and found.fix == "release toolchain install python 3.10"
    table = interpreters.missing_table([found])
    assert "3.10" in table and "release toolchain install python 3.10" in table


def test_python_install_without_any_installer_names_every_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "find_interpreter", lambda version: None)
    monkeypatch.setattr(install, "_uv", lambda: None)
    monkeypatch.setattr(install, "_pyenv", lambda: None)
    monkeypatch.setattr(install, "_apt_has", lambda package: False)
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/bash" if name == "bash" else None)
    with pytest.raises(install.ToolchainError) as caught:
        install.install_python("3.10")
    assert str(caught.value) == (
        "no Python 3.10 could be installed: uv: not installed (`pip install uv`); pyenv: not installed; "
        "apt: no python3.10 package in this distribution's archive; "
        "debian-sid: needs bash, dpkg-deb, apt-get, patchelf (dpkg-deb apt-get patchelf not found)"
    )


def test_python_install_falls_back_to_debian_sids_build_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(install, "_apt_has", lambda package: False)
    ways = install._installers("3.14")
    assert ways[-1][0] == "debian-sid"
    argv = ways[-1][1]
    assert isinstance(argv, list) and argv[1].endswith("python-debian.sh") and argv[2] == "3.14"


def test_python_version_must_be_major_minor() -> None:
    with pytest.raises(install.UsageError):
        install.install_python("3")


MATRIX_FILE = str(Path(__file__).resolve().parents[2] / "matrix.yaml")


@pytest.fixture
def installs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None, bool]]:
    calls: list[tuple[str, str | None, bool]] = []

    def record(backend: str, version: str | None, *, runtime_only: bool = False) -> int:
        calls.append((backend, version, runtime_only))
        return 0

    monkeypatch.setattr(hostruntime, "install_backend", record)
    # no engine: every image simulated
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: None))
    return calls


def test_smoke_runtime_installs_the_declared_major_where_the_simulations_need_it(
    monkeypatch: pytest.MonkeyPatch, installs: list[tuple[str, str | None, bool]], tmp_path: Path
) -> None:
    from release.smoke.hostruntime import HostRuntime

    older = HostRuntime(tmp_path, ("libamdhip64.so.5",), matches=False)
    monkeypatch.setattr(hostruntime, "find_host_runtime", lambda _v: older)
    argv = ["--matrix", MATRIX_FILE, "toolchain", "install", "--variant", "rocm", "--smoke-runtime"]
    assert cli.main(argv) == 0
    assert installs == [("rocm", "7.2", True)]


def test_smoke_runtime_is_a_no_op_when_present_or_not_needed(
    monkeypatch: pytest.MonkeyPatch,
    installs: list[tuple[str, str | None, bool]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from release.smoke.hostruntime import HostRuntime

    present = HostRuntime(tmp_path, ("libamdhip64.so.7",), matches=True)
    monkeypatch.setattr(hostruntime, "find_host_runtime", lambda _v: present)
    for variant in ("rocm", "cuda", "cpu"):
        argv = ["--matrix", MATRIX_FILE, "toolchain", "install", "--variant", variant, "--smoke-runtime"]
        assert cli.main(argv) == 0
    assert installs == []
    out = capsys.readouterr().out
    assert "libamdhip64.so.7 already in" in out
    assert "cuda: no simulated image lays out the runtime from this machine: nothing to do" in out
    assert "cpu: the cpu backend needs no toolkit" in out


def test_smoke_runtime_skips_images_that_run_in_containers(
    monkeypatch: pytest.MonkeyPatch,
    installs: list[tuple[str, str | None, bool]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With podman and the local images, the layout images bring their own runtime, and so do the
    serving images' stand-ins: nothing is installed; where the images cannot run, every one
    simulated from this machine needs it."""
    from release.smoke.hostruntime import HostRuntime

    older = HostRuntime(tmp_path, ("libamdhip64.so.5",), matches=False)
    monkeypatch.setattr(hostruntime, "find_host_runtime", lambda _v: older)
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: ContainerEngine("podman")))
    monkeypatch.setattr(hostruntime, "local_image_usable", lambda _engine, _local: True)
    argv = ["toolchain", "install", "--variant", "rocm", "--smoke-runtime"]
    assert cli.main(["--matrix", MATRIX_FILE, *argv]) == 0
    assert installs == []
    out = capsys.readouterr().out
    boxed = (
        "rocm-distro, rocm-opt-prefix, rocm-ld-library-path, rocm-absent, rocm6-only, vllm-rocm, "
        "sglang-rocm, therock-pip, therock-os"
    )
    assert f"{boxed} run in podman containers" in out
    monkeypatch.setattr(hostruntime, "local_image_usable", lambda _engine, _local: False)
    assert cli.main(["--matrix", MATRIX_FILE, *argv]) == 0
    assert installs == [("rocm", "7.2", True)]
    # rocm6-only is simulated without a runtime (the declared one is absent there): none laid out
    laid_out = (
        "rocm-distro, rocm-opt-prefix, rocm-ld-library-path, vllm-rocm, sglang-rocm, therock-pip, therock-os"
    )
    assert f"{laid_out} lay out" in capsys.readouterr().out
