"""Each named check of the matrix (release.config.checks MATRIX_CHECKS, variantchecks
VARIANT_CHECKS) on its own: the real matrix passes it, and one change to the model makes it
report the expected key and message. A check added to a registry without a row here fails the
coverage test. (tests/unit/test_bad_matrices.py drives the same checks through the CLI.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from release.config import checks, variantchecks
from release.config.checkbase import Context
from release.config.matrix import load
from release.errors import Problem

LOADED = load(Path(__file__).resolve().parents[2] / "matrix.yaml")
REAL = LOADED.matrix
Edit = Callable[[Any], Any]


def _variant(name: str, **changes: object) -> Edit:
    def edit(m: Any) -> Any:
        variants = dict(m.variants)
        variants[name] = dataclasses.replace(variants[name], **changes)
        return dataclasses.replace(m, variants=variants)

    return edit


def _part(part: str, **changes: object) -> Edit:
    return lambda m: dataclasses.replace(m, **{part: dataclasses.replace(getattr(m, part), **changes)})


def _first(mapping_name: str, **changes: object) -> Edit:
    def edit(m: Any) -> Any:
        mapping = dict(getattr(m, mapping_name))
        first = next(iter(mapping))
        mapping[first] = dataclasses.replace(mapping[first], **changes)
        return dataclasses.replace(m, **{mapping_name: mapping})

    return edit


# check name -> (an edit of the real matrix, the key reported, a fragment of its message)
TABLE: dict[str, tuple[Edit, str, str]] = {
    "python_list": (lambda m: dataclasses.replace(m, python=("3.12", "3.12")), "python[1]", "listed twice"),
    "platform_floor": (_part("platform", floor="linux"), "platform.floor", "is not a platform tag"),
    "variant_machines": (
        _part("platform", floor="manylinux_2_28", architectures=("aarch64",)),
        "variants.rocm.backend",
        "the rocm backend has no machine of platform.architectures (aarch64; it has x86_64)",
    ),
    "engine_identity": (_part("engine", version="one"), "engine.version", "not a PEP 440 version"),
    "size_limits": (_part("publish", size_limit=0), "publish.size_limit", "is not a size"),
    "stable_abi": (_part("engine", stable_abi="off"), "engine.stable_abi", "leave it out"),
    "prebuild": (None, "", ""),  # replaced below: needs a prebuild step to exist
    "engine_lists": (_part("engine", scripts=("-bad",)), "engine.scripts[0]", "not a console script name"),
    "publish_targets": (
        _part("publish", tag_pattern=" "),
        "publish.tag_pattern",
        "no tag could ever publish",
    ),
    "variants": (lambda m: dataclasses.replace(m, variants={}), "variants", "define at least one variant"),
    "images": (
        _first("images", container=None, simulate=None),
        "images.",
        "a container reference, a simulation",
    ),
    "hardware": (_first("hardware", nodes=3), "hardware.", "1 (one runner) or 2"),
    "prerelease": (
        _part("publish", prerelease="separate-index", prerelease_repository=None),
        "publish.prerelease_repository",
        "needs a repository URL",
    ),
    "variant_name": (
        lambda m: dataclasses.replace(m, variants={"Bad_Name": m.variants["cpu"]}),
        "variants.Bad_Name",
        "lowercase letters and digits",
    ),
    "variant_backend": (_variant("cpu", backend="tpu"), "variants.cpu.backend", "unknown backend 'tpu'"),
    "variant_distribution": (
        _variant("cuda", distribution=REAL.variants["cpu"].distribution),
        "variants.cuda.distribution",
        "is already the distribution of variant 'cpu'",
    ),
    "variant_toolkit_version": (
        _variant("rocm", toolkit="seven"),
        "variants.rocm.toolkit",
        "not a toolkit version",
    ),
    "variant_build_settings": (_variant("cpu", env={"A": "x\ny"}), "variants.cpu.env.A", "line break or NUL"),
    "variant_excludes": (
        _variant("rocm", exclude=("libpython3*",)),
        "variants.rocm.exclude[0]",
        "exclude libpython",
    ),
    "variant_runtime": (
        _variant("rocm", toolkit="99.0"),
        "variants.rocm.toolkit",
        "knows the runtime of majors",
    ),
    "variant_device_code": (
        _variant("rocm", device_code=True, architectures=()),
        "variants.rocm.architectures",
        "list the architectures",
    ),
    "variant_images": (
        _variant("cpu", images=("nowhere",)),
        "variants.cpu.images[0]",
        "'nowhere' is not defined",
    ),
    "variant_build_image": (None, "", ""),  # replaced below: edits the nested recipe
    "variant_hardware": (
        _variant("rocm", hardware=("tpu-pod",)),
        "variants.rocm.hardware[0]",
        "is not defined",
    ),
}


def _prebuild(m: Any) -> Any:
    step = type("Prebuild", (), {"cmake_source": "../outside", "prefix_define": "OK_NAME"})()
    return dataclasses.replace(m, engine=dataclasses.replace(m.engine, prebuild=step))


def _gcc(m: Any) -> Any:
    v = m.variants["cpu"]
    image = dataclasses.replace(v.build_image, debian=dataclasses.replace(v.build_image.debian, gcc="gcc14"))
    return _variant("cpu", build_image=image)(m)


TABLE["prebuild"] = (_prebuild, "engine.prebuild.cmake_source", "must be a directory inside engine.source")
TABLE["variant_build_image"] = (_gcc, "variants.cpu.build_image.debian.gcc", "is not a GCC major")


def _run(name: str, m: Any) -> list[Problem]:
    problems: list[Problem] = []
    context = Context(m, LOADED.backends, checks.collector(problems, LOADED.lines, "matrix.yaml"))
    if hasattr(checks, name) and getattr(checks, name) in checks.MATRIX_CHECKS:
        getattr(checks, name)(context)
    else:
        one = getattr(variantchecks, name)
        for variant, v in m.variants.items():
            one(context, variant, f"variants.{variant}", v)
    return problems


def test_every_registered_check_has_a_row() -> None:
    registered = {f.__name__ for f in (*checks.MATRIX_CHECKS, *variantchecks.VARIANT_CHECKS)}
    assert registered == set(TABLE)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_the_real_matrix_passes_the_check(name: str) -> None:
    assert _run(name, REAL) == []


@pytest.mark.parametrize("name", sorted(TABLE))
def test_one_edit_makes_the_check_report_its_key(name: str) -> None:
    edit, key, fragment = TABLE[name]
    problems = _run(name, edit(REAL))
    assert problems, f"{name}: the edit went unreported"
    assert problems[0].key.startswith(key) and fragment in problems[0].message, problems
    assert problems[0].line is None or problems[0].line > 0
