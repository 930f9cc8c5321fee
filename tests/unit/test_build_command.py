"""`release build` without --variant, and what a local run and CI do with a missing interpreter or
toolkit (stages replaced by stand-ins: no compiler, no process)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from release.builder.host import WheelResult
from release.commands import build
from release.config.backends import Backend
from release.config.matrix import load
from release.errors import ToolchainError, UsageError
from release.machine import probes, toolchain
from release.machine.containers import ContainerEngine
from release.machine.interpreters import Interpreter
from release.machine.toolchain import Toolchain
from release.plan.steps import BuildStep

ROOT = Path(__file__).resolve().parents[2]


def args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {
        "variant": None, "python": None, "select": None, "wheelhouse": None, "tag": None, "jobs": 2,
        "container": False, "image": None, "release_image": False, "allow_toolkit_mismatch": False,
        "lock_wait": 5.0, "arch": "x86_64",
    }  # fmt: skip
    return argparse.Namespace(**{**defaults, **given})


def missing(*versions: str) -> object:
    def interpreter(version: str) -> Interpreter:
        if version in versions:
            fix = f"release toolchain install python {version}"
            return Interpreter(version, None, f"no Python {version} found", fix)
        return Interpreter(version, Path(f"/usr/bin/python{version}"), None, None)

    return interpreter


def test_no_variant_means_every_variant() -> None:
    loaded = load(ROOT / "matrix.yaml")
    chosen = build.chosen_steps(args(), loaded)
    assert list(chosen) == list(loaded.matrix.variants)
    assert all(len(steps) == len(loaded.matrix.python) for steps in chosen.values())
    one = build.chosen_steps(args(variant=["rocm"], python=["3.12"]), loaded)
    assert [s.identifier for s in one["rocm"]] == ["cp312-rocm-manylinux_x86_64"]
    selected = build.chosen_steps(args(select="cp313-{cpu,musa}-*"), loaded)
    assert {v: [s.python for s in steps] for v, steps in selected.items()} == {
        "cpu": ["3.13"],
        "musa": ["3.13"],
    }
    with pytest.raises(UsageError, match=r"Python 3\.9 is not in the matrix"):
        build.chosen_steps(args(python=["3.9"]), loaded)


def test_a_missing_interpreter_is_skipped_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "interpreter", missing("3.10"))
    monkeypatch.delenv("CI", raising=False)
    usable, skipped = build.usable_interpreters(["3.10", "3.11", "3.10"])
    assert usable == {"3.11"} and [i.version for i in skipped] == ["3.10"]
    monkeypatch.setenv("CI", "true")
    with pytest.raises(ToolchainError) as caught:
        build.usable_interpreters(["3.10", "3.11"])
    assert str(caught.value) == (
        "no Python 3.10 found: `release toolchain install python 3.10` (CI=true: nothing may be skipped)"
    )


def test_nothing_to_build_is_an_error_even_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "interpreter", missing("3.10", "3.11"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(ToolchainError, match=r"no Python 3\.10 found.*; no Python 3\.11 found"):
        build.usable_interpreters(["3.10", "3.11"])


def fake_results(
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    jobs: int,
    toolkit_override: str | None,
    lock_wait_s: float = 5.0,
) -> list[WheelResult]:
    """What build_variant returns, without building."""
    common = {"size": 1000, "platform": "manylinux_2_34_x86_64", "floor_met": False, "runtime_bound": ()}
    return [
        WheelResult(
            step=s,
            wheel=wheelhouse / f"{s.identifier}.whl",
            verify_ok=True,
            verify_summary="pass",
            seconds=1.0,
            **common,  # type: ignore[arg-type]
        )
        for s in steps
    ]


def test_every_variant_builds_what_it_can_and_ends_with_what_it_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    loaded = load(ROOT / "matrix.yaml")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(build, "interpreter", missing("3.10", "3.12", "3.13", "3.14", "3.15"))
    monkeypatch.setattr(probes, "find_interpreter", lambda _p: None)  # no free-threaded CPython here
    monkeypatch.setattr(build, "build_variant", fake_results)

    def find_toolchain(backend: Backend) -> Toolchain:
        if backend.name == "musa":
            raise ToolchainError("MUSA toolkit not found: install it with `release toolchain install musa`")
        if backend.name == "cuda":  # the declared 13.0
            return Toolchain(backend="cuda", prefix=Path("/usr/local/cuda"), version="13.0", found_by="test")
        if backend.name == "rocm":  # Debian 12's HIP, not the declared 7.2
            return Toolchain(backend="rocm", prefix=Path("/usr"), version="5.2.21153", found_by="test")
        return Toolchain(backend=backend.name, prefix=None, version=None, found_by="none needed")

    monkeypatch.setattr(toolchain, "find_toolchain", find_toolchain)  # host_toolkit asks it there
    # no podman or docker answers
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: None))
    assert build.run(args(wheelhouse=tmp_path), loaded) == 0
    out = capsys.readouterr().out
    assert "2 wheel(s) in" in out  # cpu and cuda for 3.11
    skipped = out.split("skipped Pythons (CI=true fails on them instead):")[1]
    assert out.count("GitHub-only:") == 1  # the free-threaded steps, in one line
    github = next(line for line in out.splitlines() if line.startswith("GitHub-only:"))
    assert "Python 3.14t, 3.15t" in github and "no free-threaded CPython on this machine" in github
    for version in ("3.10", "3.12", "3.13", "3.14", "3.15"):
        assert f"release toolchain install python {version}" in skipped
    assert "musa     MUSA toolkit not found: install it with `release toolchain install musa`" in out
    rocm = next(line for line in out.splitlines() if line.startswith("rocm "))
    assert "the matrix declares toolkit 7.2" in rocm and "`release toolchain install rocm 7.2`" in rocm
    assert "bash scripts/setup-podman.sh" in out.split("rocm ", 1)[1]  # how to get an engine
    # --allow-toolkit-mismatch builds it anyway (an experiment verify records)
    capsys.readouterr()
    assert build.run(args(wheelhouse=tmp_path, allow_toolkit_mismatch=True), loaded) == 0
    assert "3 wheel(s) in" in capsys.readouterr().out
    # one variant asked for by name: its missing toolkit is an error, not a skip
    with pytest.raises(ToolchainError, match="MUSA toolkit not found"):
        build.run(args(variant=["musa"], wheelhouse=tmp_path), loaded)
    # CI: the missing toolkit of any variant fails
    monkeypatch.setattr(build, "interpreter", missing())
    monkeypatch.setenv("CI", "true")
    with pytest.raises(ToolchainError, match=r"the matrix declares toolkit 7\.2"):
        build.run(args(wheelhouse=tmp_path), loaded)


def test_a_mismatched_toolkit_builds_in_the_local_image_where_an_engine_answers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The declared toolkit by default: rocm (host HIP 5.2, declared 7.2, a local recipe) goes to
    its local image; cuda (the declared 13.0 here) stays on the host; musa (no toolkit, no local
    recipe) is skipped as before. One table, with where each wheel was built."""
    loaded = load(ROOT / "matrix.yaml")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(build, "interpreter", missing())
    monkeypatch.setattr(build, "build_variant", fake_results)

    def find_toolchain(backend: Backend) -> Toolchain:
        if backend.name == "musa":
            raise ToolchainError("MUSA toolkit not found: install it with `release toolchain install musa`")
        version = {"cuda": "13.0", "rocm": "5.2.21153"}.get(backend.name)
        return Toolchain(backend=backend.name, prefix=Path("/usr"), version=version, found_by="test")

    in_image: list[tuple[str, ...]] = []

    def fake_container(
        _args: object, steps: tuple[BuildStep, ...], _root: Path, _version: str, engine: str, **_: object
    ) -> list[WheelResult]:
        in_image.append((engine, *(s.identifier for s in steps)))
        made = fake_results(steps, wheelhouse=tmp_path, version="0.1.0", jobs=1, toolkit_override=None)
        return [dataclasses.replace(r, built_in=r.step.variant.build_image.local) for r in made]

    monkeypatch.setattr(toolchain, "find_toolchain", find_toolchain)  # host_toolkit asks it there
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: ContainerEngine("podman")))
    monkeypatch.setattr(build, "_in_container", fake_container)
    monkeypatch.setattr(probes, "find_interpreter", lambda _p: None)
    assert build.run(args(wheelhouse=tmp_path), loaded) == 0
    out = capsys.readouterr().out
    assert [e[0] for e in in_image] == [ContainerEngine("podman")], in_image
    assert all("-rocm-" in i for i in in_image[0][1:])
    gil = [p for p in loaded.matrix.python if not p.endswith("t")]  # the t steps are GitHub-only here
    assert len(in_image[0]) == 1 + len(gil)
    assert "rocm: the matrix declares toolkit 7.2" in out
    assert "building in the declared toolkit's local image localhost/xfer-build-rocm through podman" in out
    header = next(line for line in out.splitlines() if line.startswith("wheel "))
    assert "built in" in header
    rows = [line for line in out.splitlines() if "-rocm-manylinux" in line]
    assert rows and all("localhost/xfer-build-rocm" in row for row in rows)
    cuda_rows = [line for line in out.splitlines() if "-cuda-manylinux" in line]
    assert cuda_rows and all(" host " in row for row in cuda_rows)
    # --allow-toolkit-mismatch is the explicit host experiment: nothing goes to a container
    in_image.clear()
    assert build.run(args(wheelhouse=tmp_path, allow_toolkit_mismatch=True), loaded) == 0
    assert in_image == []
