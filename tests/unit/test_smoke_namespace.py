"""How a simulated image gets its mount namespace as root and as another user, and the host
runtime it lays out (found beside the distribution's, checked against the declared toolkit)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from release.config.matrix import Simulation, load
from release.errors import ToolchainError
from release.machine.containers import ContainerEngine
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from release.smoke import image, namespace
from release.smoke.hostruntime import find_host_runtime, needs_host_runtime, require_host_runtime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace.os, "geteuid", lambda: 1001)
    monkeypatch.setattr(namespace.os, "getuid", lambda: 1001)
    monkeypatch.setattr(namespace.os, "getgid", lambda: 1001)
    monkeypatch.delenv(namespace.NO_USERNS_ENV, raising=False)


def _probes(monkeypatch: pytest.MonkeyPatch, *, userns: str | None, sudo: str | None) -> None:
    monkeypatch.setattr(namespace, "_userns_probe", lambda: userns)
    monkeypatch.setattr(namespace, "_sudo_probe", lambda _sudo: sudo)
    real = shutil.which
    monkeypatch.setattr(namespace.shutil, "which", lambda n: "/usr/bin/sudo" if n == "sudo" else real(n))


def test_root_uses_a_plain_mount_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace.os, "geteuid", lambda: 0)
    runner = namespace.namespace_runner("x")
    assert runner.how == "root"
    assert runner.prefix[1:] == ("--mount", "--propagation", "private")
    assert runner.user is None


def test_a_user_gets_a_user_namespace_where_the_kernel_allows_it(
    monkeypatch: pytest.MonkeyPatch, as_user: None
) -> None:
    _probes(monkeypatch, userns=None, sudo="a password is required")
    runner = namespace.namespace_runner("x")
    assert runner.how == "user namespace"
    assert runner.prefix[1:3] == ("--user", "--map-root-user")
    argv = runner.argv(Path("/s.sh"), ["python", "-V"], {"A": "1"})
    assert argv[-4:] == ["/bin/sh", "/s.sh", "python", "-V"]


def test_sudo_when_user_namespaces_are_off_and_the_command_drops_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_user: None
) -> None:
    monkeypatch.setenv(namespace.NO_USERNS_ENV, "1")
    _probes(monkeypatch, userns=None, sudo=None)
    runner = namespace.namespace_runner("x")
    assert runner.how == "sudo"
    argv = runner.argv(Path("/s.sh"), ["python"], {"PATH": "/venv/bin:/usr/bin"})
    assert argv[:2] == ["/usr/bin/sudo", "-n"]
    assert "PATH=/venv/bin:/usr/bin" in argv, "sudo resets the environment: it travels through env"
    assert argv[argv.index("PATH=/venv/bin:/usr/bin") + 1].endswith("unshare")
    box = image.Sandbox("img", Simulation(runtime="absent"), workdir=tmp_path, runtime=("libx.so.1",))
    script = box.script(tmp_path / "stage", runner.user)
    assert script.rstrip().endswith('--reuid=1001 --regid=1001 --init-groups "$@"')


def test_neither_way_names_both_fixes(monkeypatch: pytest.MonkeyPatch, as_user: None) -> None:
    monkeypatch.setenv(namespace.NO_USERNS_ENV, "1")
    _probes(monkeypatch, userns=None, sudo="sudo: a password is required")
    with pytest.raises(ToolchainError) as info:
        namespace.namespace_runner("simulating image 'rocm-distro'")
    text = str(info.value)
    assert "\n" not in text
    assert "switched off by RELEASE_SMOKE_NO_USERNS=1" in text
    assert "sudo: a password is required" in text
    assert "kernel.unprivileged_userns_clone=1" in text
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in text
    assert "passwordless sudo" in text


def test_a_failing_user_namespace_probe_is_quoted(monkeypatch: pytest.MonkeyPatch, as_user: None) -> None:
    _probes(monkeypatch, userns="unshare: write failed /proc/self/uid_map: Operation not permitted", sudo="x")
    with pytest.raises(ToolchainError, match="uid_map: Operation not permitted"):
        namespace.namespace_runner("x")


def test_chroot_images_bind_proc_and_dev_recursively(tmp_path: Path) -> None:
    sim = Simulation(runtime="absent", rootfs="debootstrap-minbase")
    box = image.Sandbox("mb", sim, workdir=tmp_path, rootfs=tmp_path / "tree")
    script = box.script(tmp_path / "stage")
    assert "--rbind /proc" in script
    assert "--rbind /dev" in script
    assert "-t proc" not in script, "a user namespace cannot mount a new proc without a pid namespace"


def test_copies_never_keep_ownership(tmp_path: Path) -> None:
    sim = Simulation(runtime="prefix", prefix="/opt/rocm-6.4.3/lib", via="ld.so.conf.d")
    box = image.Sandbox("p", sim, workdir=tmp_path, runtime=("libamdhip64.so.6",), libdir=tmp_path)
    copies = [line for line in box.script(tmp_path / "stage").splitlines() if "/cp " in line]
    assert copies
    assert all("--no-preserve=ownership" in line for line in copies)


def test_the_runtime_is_saved_before_its_own_prefix_is_covered(tmp_path: Path) -> None:
    """AMD's packages put the runtime under /opt/rocm-6.4.x/lib: the prefix an image may simulate."""
    lib = tmp_path / "opt" / "rocm-6.4.3" / "lib"
    lib.mkdir(parents=True)
    sim = Simulation(runtime="prefix", prefix=str(lib), via="ld.so.conf.d")
    box = image.Sandbox("p", sim, workdir=tmp_path, runtime=("libamdhip64.so.6",), libdir=lib)
    lines = box.script(tmp_path / "stage").splitlines()
    saved = next(i for i, line in enumerate(lines) if "/cp " in line and "libamdhip64.so.6" in line)
    covered = next(i for i, line in enumerate(lines) if str(lib) in line and "tmpfs" in line)
    assert saved < covered


# -- the host runtime ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rocm() -> ResolvedVariant:
    return make_plan(load(ROOT / "matrix.yaml")).variant("rocm")


def _libdir(path: Path, *names: str) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_bytes(b"not an ELF file")
    return path


def test_the_declared_major_wins_over_the_distributions_older_runtime(
    rocm: ResolvedVariant, tmp_path: Path
) -> None:
    distro = _libdir(tmp_path / "usr-lib", "libamdhip64.so.6")
    amd = _libdir(tmp_path / "opt-rocm-7.2.4-lib", "libamdhip64.so.7", "libhsa-runtime64.so.1")
    found = find_host_runtime(rocm, [distro, amd])
    assert found.libdir == amd
    assert found.usable
    assert found.files == ("libamdhip64.so.7", "libhsa-runtime64.so.1")


def test_another_major_only_is_an_error_naming_the_install_command(
    rocm: ResolvedVariant, tmp_path: Path
) -> None:
    distro = _libdir(tmp_path / "usr-lib", "libamdhip64.so.5", "libamdhip64.so.5.2.21153")
    found = find_host_runtime(rocm, [distro])
    assert found.files
    assert not found.usable
    with pytest.raises(ToolchainError) as info:
        require_host_runtime(rocm, found, "rocm-opt-prefix")
    text = str(info.value)
    assert "libamdhip64.so.5" in text
    assert "declares toolkit 7.2 (matrix.yaml:" in text
    assert "binds libamdhip64.so.7" in text
    assert "`release toolchain install rocm 7.2 --runtime-only`" in text


def test_no_runtime_at_all_names_where_it_looked(rocm: ResolvedVariant, tmp_path: Path) -> None:
    found = find_host_runtime(rocm, [_libdir(tmp_path / "empty")])
    assert not found.usable
    with pytest.raises(ToolchainError, match=r"this machine has none \(libamdhip64.so.7 not in"):
        require_host_runtime(rocm, found, "rocm-distro")


def test_which_images_lay_out_the_host_runtime(rocm: ResolvedVariant) -> None:
    by_name = {i.name: i.image for i in rocm.images}
    assert needs_host_runtime(by_name["rocm-distro"])
    assert needs_host_runtime(by_name["vllm-rocm"])
    assert not needs_host_runtime(by_name["rocm-absent"])


def test_a_variant_without_a_runtime_needs_none(tmp_path: Path) -> None:
    cpu = make_plan(load(ROOT / "matrix.yaml")).variant("cpu")
    found = find_host_runtime(cpu, [_libdir(tmp_path / "empty")])
    require_host_runtime(cpu, found, "host")  # no error: nothing to lay out


def test_a_user_namespace_binds_the_tree_in_instead_of_an_overlay(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for directory in ("usr/bin", "etc", "tmp", "proc", "dev", "root", "opt/other"):
        (tree / directory).mkdir(parents=True)
    (tree / "bin").symlink_to("usr/bin")
    work = tmp_path / "work"
    work.mkdir()
    binds = [image.Bind(path=Path("/opt/python/3.12")), image.Bind(path=work, read_only=False)]
    sim = Simulation(runtime="absent", rootfs="debootstrap-minbase")
    box = image.Sandbox("mb", sim, workdir=work, rootfs=tree, binds=binds)
    root = tmp_path / "stage" / "root"
    text = box.script(tmp_path / "stage", userns=True)
    assert "-t overlay" not in text, "an overlay would copy up root-owned directories"
    assert f"--rbind {tree / 'usr'} {root / 'usr'}" in text
    assert f"--rbind {tree / 'etc'} {root / 'etc'}" in text
    assert f"-s usr/bin {root / 'bin'}" in text
    assert f"--rbind {tree / 'opt' / 'other'} {root / 'opt' / 'other'}" in text
    for made in ("opt", "tmp", "proc", "dev"):
        assert f"-p {root / made}\n" in text, f"{made} leads to a mount point: made in the tmpfs"
        assert f"--rbind {tree / made} " not in text
    assert f"--bind /opt/python/3.12 {root / 'opt/python/3.12'}" in text
    assert text.rstrip().endswith('"$@"')
    overlay = box.script(tmp_path / "stage2")
    assert "-t overlay" in overlay, "as root the tree is an overlay (writable, privately)"


def test_as_a_user_an_absent_local_image_is_simulated_not_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make-image.sh needs root; a CI runner's user with podman simulates the image instead."""
    from release.smoke import runner
    from release.smoke.hostruntime import HostRuntime
    from release.smoke.outcome import Outcome

    rocm = make_plan(load(ROOT / "matrix.yaml")).variant("rocm")
    wheels = tmp_path / "rocm"
    wheels.mkdir()
    (wheels / "xfer_engine_rocm-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    made: list[str] = []
    ran: list[tuple[str, object]] = []
    from release.machine import images

    monkeypatch.setattr(images.os, "geteuid", lambda: 1001)
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: ContainerEngine("podman")))
    monkeypatch.setattr(images, "exists", lambda _engine, tag: tag.endswith("-smoke-rocm-absent"))
    monkeypatch.setattr(runner, "ensure_image", lambda _e, recipe, log: made.append(recipe.tag))
    monkeypatch.setattr(runner, "require_interpreter", lambda _v: Path("/usr/bin/python3"))
    found = HostRuntime(tmp_path, ("libamdhip64.so.6",), matches=True)
    monkeypatch.setattr(runner, "find_host_runtime", lambda _v: found)

    def fake_run(self: runner.Smoke, interpreter: Path, host_runtime: object) -> Outcome:
        ran.append((self.image_name, self.container))
        return self.outcome

    monkeypatch.setattr(runner.Smoke, "run", fake_run)
    monkeypatch.setattr(runner, "file_sha256", lambda _p: "0" * 64)
    images = ["rocm-distro", "rocm-absent"]
    lines: list[str] = []
    runner.smoke_variant(rocm, wheelhouse=tmp_path, python="3.12", images=images, log=lines.append)
    by_image = dict(ran)
    assert by_image["rocm-distro"] is None, "absent, and a user cannot make it: simulated"
    assert by_image["rocm-absent"] is not None, "already made: its real container runs"
    assert [t for t in made if "rocm-distro" in t] == []
    assert any("only root makes it: simulated" in line for line in lines)
