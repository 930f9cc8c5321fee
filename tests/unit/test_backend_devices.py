"""A backend's GPU container is data: a stand-in accelerator whose containers need a device node
and a group is added as `packaging/backends/<name>.json` alone, planned like any variant, and its
smoke and hardware containers start with those flags (`release.machine.devices`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from release.config.matrix import loads
from release.hardware.container import Container
from release.machine import containers
from release.machine.containers import ContainerEngine
from release.plan.steps import make_plan
from release.smoke import container as smoke_container
from release.smoke.container import ContainerSandbox

# A made-up accelerator whose device node is /dev/zero (every Linux host has it, as an NPU host has
# /dev/davinci0) and whose node's group is `video`.
STANDIN: dict[str, Any] = {
    "schema_version": 1,
    "name": "npu",
    "title": "Stand-in NPU",
    "container": {"devices": ["/dev/zero"], "groups": ["video"], "env": {"NPU_VISIBLE": "all"}},
    "runtime_libraries": ["libnpurt.so*"],
    "exclude": ["libnpurt.so*"],
    "requires_runtime_needed": ["libnpurt.so"],
    "device_code_sections": [],
    "toolkit": None,
    "runtime_hint": "install the NPU runtime that provides {soname}",
}
WANTED = ["--device=/dev/zero", "--group-add", "video", "-e", "NPU_VISIBLE=all"]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The engine's command lines, recorded (a unit test starts no process)."""
    ran: list[list[str]] = []

    def engine(argv: list[str], **_options: object) -> containers.process.Result:
        ran.append(list(argv))
        return containers.process.Result(tuple(argv), 0, "", "")

    monkeypatch.setattr(containers.process, "run", engine)
    return ran


def _planned(tmp_path: Path) -> Any:
    backends = tmp_path / "packaging" / "backends"
    backends.mkdir(parents=True)
    (backends / "npu.json").write_text(json.dumps(STANDIN), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "npux"\nversion = "1.0"\n',
        encoding="utf-8",
    )
    text = (
        "schema_version: 1\n"
        "engine: {source: ., import_name: npux, version: '1.0'}\n"
        "python: ['3.12']\n"
        "platform: {floor: manylinux_2_28_x86_64}\n"
        "variants:\n"
        "  npu: {distribution: npux, backend: npu}\n"
    )
    plan = make_plan(loads(text, path=tmp_path / "matrix.yaml"))
    return plan.variants["npu"]


def test_a_standin_backends_smoke_container_gets_its_device_node_and_group(
    tmp_path: Path, started: list[list[str]]
) -> None:
    variant = _planned(tmp_path)
    assert variant.backend.container.devices == ("/dev/zero",)
    box = ContainerSandbox(
        ContainerEngine("podman"), "localhost/npu-smoke", None, workdir=tmp_path, wheels=tmp_path,
        devices=variant.backend.container,
    )  # fmt: skip
    (run,) = started
    assert run[:2] == ["podman", "run"]
    flags = run[run.index(box.container.name) + 1 : run.index("-v")]
    assert flags == [*smoke_container.SMOKE_FLAGS, *WANTED]


def test_a_standin_backends_hardware_container_gets_them_too(
    tmp_path: Path, started: list[list[str]]
) -> None:
    needs = _planned(tmp_path).backend.container
    Container(ContainerEngine("docker"), "localhost/npu-serving", mounts=[], devices=needs)
    (run,) = started
    assert run[:2] == ["docker", "run"]
    assert run[run.index("HOME=/tmp") + 1 : run.index("--entrypoint")] == WANTED


def test_every_smoke_container_gets_the_one_list_of_flags(
    tmp_path: Path, started: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flag for every smoke container is one line in one file: SMOKE_FLAGS."""
    monkeypatch.setattr(smoke_container, "SMOKE_FLAGS", ("--shm-size=1g",))
    variant = _planned(tmp_path)
    ContainerSandbox(
        ContainerEngine("podman"), "localhost/npu-smoke", None, workdir=tmp_path, wheels=tmp_path,
        devices=variant.backend.container,
    )  # fmt: skip
    (run,) = started
    assert "--shm-size=1g" in run and run.index("--shm-size=1g") < run.index("--device=/dev/zero")
