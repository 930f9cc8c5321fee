"""`release images probe` against real local images whose facts differ from what a matrix
declares: Python 3.10 only, the runtime under another prefix, no runtime at all. Each gives its
one-line disagreement with the matrix line and the edit; `--write` records what was read.

The images are the rocm variant's local build image (made once per session; the set-up phase of
.ci/run has made it already) with one layer committed on top by `podman commit`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from release.machine.containers import ContainerEngine

from .conftest import ROOT, LocalImages, toolkit

HIP = "libamdhip64.so.7"
CHANGES = {
    "py310-only": "rm -rf /opt/python/cp311-cp311 /opt/python/cp312-cp312 /opt/python/cp313-cp313",
    "other-prefix": (
        "mkdir -p /opt/rocm-7.2.4/lib && mv /usr/lib/x86_64-linux-gnu/libamdhip64.so* /opt/rocm-7.2.4/lib/ "
        "&& echo /opt/rocm-7.2.4/lib > /etc/ld.so.conf.d/rocm.conf && ldconfig"
    ),
    "no-runtime": "rm -f /usr/lib/x86_64-linux-gnu/libamdhip64.so* && ldconfig",
}


def _podman(engine: ContainerEngine, *args: str) -> None:
    subprocess.run([engine.command, *args], check=True, capture_output=True, timeout=600)


@pytest.fixture(scope="module")
def changed_images(local_images: LocalImages) -> Iterator[dict[str, str]]:
    """Local tags of the build image with each change committed on top."""
    base = local_images.make(local_images.build_recipe("rocm"))
    engine = local_images.engine
    made = {}
    for name, change in CHANGES.items():
        tag = f"localhost/xfer-probe-test-{name}"
        container = f"xfer-probe-test-{name}"
        subprocess.run([engine.command, "rm", "-f", container], capture_output=True, check=False, timeout=120)
        _podman(engine, "run", "--name", container, "--entrypoint", "/bin/sh", base, "-c", change)
        _podman(engine, "commit", "--quiet", container, tag)
        _podman(engine, "rm", "-f", container)
        made[name] = tag
    yield made
    for tag in made.values():
        subprocess.run([engine.command, "rmi", "-f", tag], capture_output=True, check=False, timeout=300)


def _matrix(directory: Path, images: dict[str, dict[str, object]]) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    data["engine"]["source"] = str(ROOT / data["engine"]["source"])
    data["images"] = images
    data.pop("hardware")
    data.pop("variant_wheels", None)
    for variant in data["variants"].values():
        variant.pop("images", None)
        variant.pop("hardware", None)
    data["variants"]["rocm"]["images"] = list(images)
    (directory / "packaging").symlink_to(ROOT / "packaging")
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_each_declaration_an_image_contradicts_is_one_line(
    changed_images: dict[str, str], tmp_path: Path
) -> None:
    system = {"runtime": "system"}
    matrix = _matrix(
        tmp_path,
        {
            "py310-only": {"container": changed_images["py310-only"], "python": ["3.12"], "simulate": system},
            "other-prefix": {
                "container": changed_images["other-prefix"],
                "python": ["3.12"],
                "simulate": system,
            },
            "no-runtime": {"container": changed_images["no-runtime"], "python": ["3.12"], "simulate": system},
        },
    )
    proc = toolkit("--matrix", str(matrix), "images", "probe", check=False, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line.strip() for line in proc.stderr.splitlines() if line.startswith("  ")]
    assert len(lines) == 3, proc.stderr
    assert any(
        "images.py310-only.python: declares Python 3.12, "
        "but the image has Python 3.9, 3.10, 3.14, 3.15 only: "
        'set python: ["3.10", "3.14", "3.15"]' in line
        for line in lines
    ), lines
    assert any(
        "images.other-prefix.simulate: declares {runtime: system}, but the image has "
        "{runtime: prefix, prefix: /opt/rocm-7.2.4/lib, via: ld.so.conf.d} "
        f"({HIP} -> /opt/rocm-7.2.4/lib/{HIP}): "
        "set simulate: {runtime: prefix, prefix: /opt/rocm-7.2.4/lib, via: ld.so.conf.d}" in line
        for line in lines
    ), lines
    assert any(
        "images.no-runtime.simulate: declares {runtime: system}, "
        "but the image has {runtime: absent} (no runtime): "
        "set simulate: {runtime: absent}" in line
        for line in lines
    ), lines
    for line in lines:
        assert line.startswith("matrix.yaml:"), line  # each names its line
    assert "glibc" in proc.stdout and "2.41" in proc.stdout  # the table shows every fact read
    assert "Traceback" not in proc.stderr


def test_write_records_the_facts_and_agreeing_declarations_pass(
    changed_images: dict[str, str], tmp_path: Path
) -> None:
    image = {
        "container": changed_images["other-prefix"],
        "python": ["3.10", "3.12"],
        "simulate": {"runtime": "prefix", "prefix": "/opt/rocm-7.2.4/lib", "via": "ld.so.conf.d"},
    }
    matrix = _matrix(tmp_path, {"vendor-layout": image})
    proc = toolkit("--matrix", str(matrix), "images", "probe", "--write", timeout=900)
    assert "every fact the matrix declares agrees with its image" in proc.stdout
    recorded = json.loads((tmp_path / "images.facts.json").read_text(encoding="utf-8"))
    facts = recorded["images"]["vendor-layout"]
    assert facts["source"] == "probe"
    assert facts["digest"].startswith("sha256:")
    assert set(facts["pythons"]) == {"3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"}
    assert facts["glibc"] == "2.41"
    assert facts["layout"] == {"runtime": "prefix", "prefix": "/opt/rocm-7.2.4/lib", "via": "ld.so.conf.d"}
    assert facts["runtime"] == {HIP: f"/opt/rocm-7.2.4/lib/{HIP}"}
    # The recorded facts now stand for the image: a declaration they contradict fails without a probe.
    stale = matrix.read_text(encoding="utf-8").replace(
        changed_images["other-prefix"], changed_images["py310-only"]
    )
    matrix.write_text(stale, encoding="utf-8")
    again = toolkit("--matrix", str(matrix), "images", "probe", "--require", check=False, timeout=900)
    assert again.returncode == 1
    assert (
        "images.vendor-layout.python: declares Python 3.10, 3.12, but the image has Python 3.9, 3.10, "
        "3.14, 3.15 only" in (again.stderr)
    )


def test_smoke_refuses_a_python_the_recorded_facts_lack_before_installing(tmp_path: Path) -> None:
    (tmp_path / "images.facts.json").symlink_to(ROOT / "images.facts.json")
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    line = next(row for row in text.splitlines() if "its ROCm 7.2.0 flavours" in row)
    text = text.replace(line, '    python: ["3.12"]').replace("source: engine", f"source: {ROOT / 'engine'}")
    (tmp_path / "matrix.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "packaging").symlink_to(ROOT / "packaging")
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "rocm").mkdir(parents=True)
    proc = toolkit("--matrix", str(tmp_path / "matrix.yaml"), "smoke", "--variant", "rocm", "--wheelhouse",
                   str(wheelhouse), check=False)  # fmt: skip
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert (
        "images.sglang-rocm.python: declares Python 3.12, but the image has Python 3.10 only" in proc.stderr
    )
    assert "installing" not in proc.stdout.lower() and "Traceback" not in proc.stderr
    release = ["plan", "--github", "release", "--tag", "v0.1.0"]
    plan = toolkit("--matrix", str(tmp_path / "matrix.yaml"), *release, check=False)
    assert plan.returncode == 7 and 'set python: ["3.10"]' in plan.stderr
