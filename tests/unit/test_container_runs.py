"""How many cibuildwheel runs a container build makes (`release.builder.container._run_groups`):
a variant's per-Python steps and its abi3 step share one container, the abi3 identifier's config
settings coming from an override that cibuildwheel's own option reader resolves."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from release.builder import cibw, compiler_cache, container
from release.config.matrix import loads
from release.machine.containers import ContainerEngine
from release.plan.machine import machine_of
from release.plan.steps import BuildStep, make_plan

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"


def _steps(tmp_path: Path, stable_abi: bool) -> tuple[BuildStep, ...]:
    """The real matrix's x86_64 cpu steps (cp310, cp311 and one cp312-abi3 with `stable_abi: "3.12"`)."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    abi = '\n  stable_abi: "3.12"' if stable_abi else ""
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}{abi}", 1)
    steps = make_plan(loads(text, path=tmp_path / "matrix.yaml", backends_dir=BACKENDS)).builds_of("cpu")
    return tuple(s for s in steps if machine_of(s.variant) == "x86_64")  # one machine per run


def _runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: tuple[BuildStep, ...]
) -> list[tuple[list[str], dict[str, str]]]:
    """The cibuildwheel command lines and environments `_run_groups` starts (none really runs)."""
    calls: list[tuple[list[str], dict[str, str]]] = []

    def stream(argv: list[str], *, env: dict[str, str], **_: object) -> SimpleNamespace:
        calls.append((list(argv), dict(env)))
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(container.process, "stream", stream)
    project = tmp_path / "build" / "cpu" / "container"
    project.mkdir(parents=True)
    cache = compiler_cache.ContainerCache(tmp_path / "ccache", tmp_path / "logs", shared=True)
    container._run_groups(
        steps, project, tmp_path / "out", engine=ContainerEngine("podman"), image="localhost/x",
        toolkit="true", epoch="315532800", cache=cache, wheelhouse=tmp_path / "wheelhouse",
    )  # fmt: skip
    return calls


def test_abi3_and_per_python_steps_share_one_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47: the abi3 step was a second cibuildwheel run (a second container start, before-all
    and toolkit install, about 5 s of CPU); the per-identifier config settings now come from an
    override, resolved here by cibuildwheel's own reader as the run will resolve them."""
    options = pytest.importorskip("cibuildwheel.options")
    steps = _steps(tmp_path, stable_abi=True)
    # cp310, cp311, cp312-abi3 (3.12-3.15), cp314t, cp315t: a free-threaded build never loads abi3
    assert [(s.python, s.abi3) for s in steps] == [
        ("3.10", False),
        ("3.11", False),
        ("3.12", True),
        ("3.14t", False),
        ("3.15t", False),
    ]
    calls = _runs(tmp_path, monkeypatch, steps)
    assert len(calls) == 1
    argv, env = calls[0]
    assert argv[-1] == "src"
    config = Path(argv[argv.index("--config-file") + 1])
    assert "CIBW_CONFIG_SETTINGS" not in env  # a variable would win over the override
    per_python = (
        "cp310-manylinux_x86_64 cp311-manylinux_x86_64 cp314t-manylinux_x86_64 cp315t-manylinux_x86_64"
    )
    assert env["CIBW_BUILD"] == f"{per_python} cp312-manylinux_x86_64"
    assert env["CIBW_AUDIT_COMMAND"] == ""  # verify's stable-abi rule audits the abi3 wheel
    reader = options.OptionsReader(config, platform="linux", env=env)
    table = options.ShlexTableFormat(sep=" ", pair_sep="=")
    settings = {}
    for identifier in env["CIBW_BUILD"].split():
        with reader.identifier(identifier):
            settings[identifier] = reader.get("config-settings", option_format=table)
    build_dir = f"build-dir={compiler_cache.BUILD_DIR}"
    assert settings["cp310-manylinux_x86_64"] == f"cmake.define.XFER_BACKEND=cpu {build_dir}"
    assert settings["cp311-manylinux_x86_64"] == settings["cp310-manylinux_x86_64"]
    # The t builds take the per-Python settings: no wheel.py-api, so no abi3 tag on a free-threaded wheel.
    assert settings["cp314t-manylinux_x86_64"] == settings["cp310-manylinux_x86_64"]
    assert settings["cp315t-manylinux_x86_64"] == settings["cp310-manylinux_x86_64"]
    assert (
        settings["cp312-manylinux_x86_64"] == f"cmake.define.XFER_BACKEND=cpu wheel.py-api=cp312 {build_dir}"
    )
    assert "run-0.log" in env["CIBW_ENVIRONMENT"]  # one statistics log: the hits read per Python


def test_one_group_is_one_plain_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _runs(tmp_path, monkeypatch, _steps(tmp_path, stable_abi=False))
    assert len(calls) == 1
    argv, env = calls[0]
    assert "--config-file" not in argv
    assert "wheel.py-api" not in env["CIBW_CONFIG_SETTINGS"]


def test_runs_that_differ_in_more_than_their_settings_stay_two() -> None:
    per_python = {"CIBW_BUILD": "cp310-x", "CIBW_CONFIG_SETTINGS": "a=1", "CIBW_ENVIRONMENT": "L=run-0"}
    abi3 = {
        "CIBW_BUILD": "cp312-x",
        "CIBW_CONFIG_SETTINGS": "a=1 wheel.py-api=cp312",
        "CIBW_ENVIRONMENT": "L=1",
    }
    assert cibw.one_run(per_python, abi3) is None
    merged = cibw.one_run(per_python, {**abi3, "CIBW_ENVIRONMENT": "L=run-0"})
    assert merged is not None
    env, text = merged
    assert env == {"CIBW_BUILD": "cp310-x cp312-x", "CIBW_ENVIRONMENT": "L=run-0"}
    assert 'select = "cp312-x"' in text
