"""A stand-in accelerator added as data alone (`packaging/backends/npu.json` beside its matrix),
whose GPU container needs a device node and a group, is planned, and its smoke container really
starts with them: the node is there inside, and the container's user is in the group."""

from __future__ import annotations

import json
from pathlib import Path

from release.config.matrix import loads
from release.plan.steps import make_plan
from release.smoke.container import ContainerSandbox

from .conftest import LocalImages

STANDIN = {
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
"""/dev/zero stands in for an NPU's device node (every Linux host has it); `video` is the group
that owns GPU nodes on Debian."""


def test_a_backend_added_as_data_starts_its_smoke_container_with_its_device_and_group(
    local_images: LocalImages, tmp_path: Path
) -> None:
    backends = tmp_path / "packaging" / "backends"
    backends.mkdir(parents=True)
    (backends / "npu.json").write_text(json.dumps(STANDIN), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "npux"\nversion = "1.0"\n',
        encoding="utf-8",
    )
    matrix = (
        "schema_version: 1\nengine: {source: ., import_name: npux, version: '1.0'}\npython: ['3.12']\n"
        "platform: {floor: manylinux_2_28_x86_64}\nvariants:\n  npu: {distribution: npux, backend: npu}\n"
    )
    variant = make_plan(loads(matrix, path=tmp_path / "matrix.yaml")).variants["npu"]
    image = local_images.make(local_images.smoke_recipe("clean-minbase"))
    work = tmp_path / "work"
    work.mkdir()
    box = ContainerSandbox(
        local_images.engine, image, None, workdir=work, wheels=tmp_path, devices=variant.backend.container
    )
    try:
        assert box.flags[-5:] == ["--device=/dev/zero", "--group-add", "video", "-e", "NPU_VISIBLE=all"]
        shown = box.run(["sh", "-c", 'test -c /dev/zero && id -Gn && echo "npu=$NPU_VISIBLE"'], timeout=120)
    finally:
        box.close()
    assert shown.returncode == 0, shown.output
    groups, declared = shown.stdout.strip().splitlines()[-2:]
    assert "video" in groups.split(), groups
    assert declared == "npu=all"
