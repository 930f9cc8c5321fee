"""PEP 825 variant wheels: names, the metadata derived from a variant, and the variant-metadata rule."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from release.config import matrix as matrix_mod
from release.errors import MatrixError
from release.inspect.rules.registry import RuleContext
from release.inspect.verify import manylinux_policies
from release.plan.steps import make_plan
from release.variants.make import variant_set
from release.variants.metadata import (
    dist_info_document,
    document,
    provider_data,
    read_document,
    render,
)
from release.wheel.names import InvalidWheelName, parse_variant_wheel_name, split_variant_label
from tests.unit.test_rules_good import apply, elf, good_rocm

ROOT = Path(__file__).resolve().parents[2]
UV_SCHEMA = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
"""The schema uv 0.13.8 reads (tests/integration/test_variants.py installs with it)."""


def _loaded(variant_wheels: object = "default", *, hold_musa: bool = True) -> matrix_mod.LoadedMatrix:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    if not hold_musa:
        data["variants"]["musa"].pop("held_back", None)
    data["variant_wheels"] = (
        {"distribution": "xfer-engine", "variants": ["cpu", "cuda", "rocm"]}
        if variant_wheels == "default"
        else variant_wheels
    )
    return matrix_mod.loads(yaml.safe_dump(data), path=ROOT / "matrix.yaml")


@pytest.mark.parametrize(
    ("name", "base", "label"),
    [
        ("x-1.0-cp312-cp312-linux_x86_64.whl", "x-1.0-cp312-cp312-linux_x86_64.whl", None),
        ("x-1.0-cp312-cp312-linux_x86_64-cu130.whl", "x-1.0-cp312-cp312-linux_x86_64.whl", "cu130"),
        ("x-1.0-1-cp312-cp312-linux_x86_64.whl", "x-1.0-1-cp312-cp312-linux_x86_64.whl", None),
        ("x-1.0-1-cp312-cp312-linux_x86_64-null.whl", "x-1.0-1-cp312-cp312-linux_x86_64.whl", "null"),
    ],
)
def test_a_variant_label_is_split_from_the_file_name(name: str, base: str, label: str | None) -> None:
    assert split_variant_label(name) == (base, label)


@pytest.mark.parametrize("label", ["CU130", "cu+130", "a" * 17])
def test_a_bad_label_is_refused(label: str) -> None:
    with pytest.raises(InvalidWheelName, match="PEP 825"):
        parse_variant_wheel_name(f"x-1.0-cp312-cp312-linux_x86_64-{label}.whl")


def test_the_schema_is_the_one_uv_reads() -> None:
    assert provider_data().schema_url == UV_SCHEMA


def test_labels_and_properties_come_from_backend_toolkit_and_architectures() -> None:
    shared = variant_set(_loaded(), make_plan(_loaded()).variants)
    found = {d.variant: (d.label, d.property_lines()) for d in shared.descriptions}
    assert found == {
        "cpu": ("null", []),
        "cuda": (
            "cu130",
            ["nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: cuda_version_upper_bound :: 14"],
        ),
        "rocm": (
            "rocm72",
            ["amd :: gfx_arch :: gfx942", "amd :: gfx_arch :: gfx950", "amd :: rocm_version :: 7.2"],
        ),
    }
    # The variant wheels are verified as the shared distribution.
    assert {v.distribution for v in shared.variants.values()} == {"xfer-engine"}


def test_a_backend_without_variant_properties_is_a_matrix_error_naming_the_key() -> None:
    loaded = _loaded({"distribution": "xfer-engine", "variants": ["cpu", "musa"]}, hold_musa=False)
    with pytest.raises(MatrixError, match=r"variant_wheels\.variants.*'musa'.*no variant properties"):
        variant_set(loaded, make_plan(loaded).variants)


def test_a_held_back_variant_in_the_set_is_named_with_its_reason() -> None:
    loaded = _loaded({"distribution": "xfer-engine", "variants": ["cpu", "musa"]})
    with pytest.raises(MatrixError, match=r"variant_wheels\.variants.*'musa' is held back \(no MUSA"):
        variant_set(loaded, make_plan(loaded).variants)


def test_an_unknown_variant_is_named() -> None:
    loaded = _loaded({"distribution": "xfer-engine", "variants": ["cpu", "rokm"]})
    with pytest.raises(MatrixError, match="no variant 'rokm'"):
        variant_set(loaded, make_plan(loaded).variants)


def _documents() -> tuple[dict[str, object], dict[str, object]]:
    loaded = _loaded()
    shared = variant_set(loaded, make_plan(loaded).variants)
    cuda = next(d for d in shared.descriptions if d.label == "cu130")
    return document(shared.descriptions), dist_info_document(cuda, shared.descriptions)


def test_the_documents_pass_our_checks_and_variantlib() -> None:
    index, wheel = _documents()
    assert read_document(render(index), label=None) == []
    assert read_document(render(wheel), label="cu130") == []
    assert list(wheel["variants"]) == ["cu130"]  # type: ignore[call-overload]
    assert wheel["providers"] == index["providers"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update({"$schema": "https://variants-schema.wheelnext.dev/v0.2.0.json"}), "not https"),
        (lambda d: d["providers"]["nvidia"].pop("plugin-api"), "no `plugin-api`"),
        (lambda d: d["default-priorities"].update({"namespace": ["amd"]}), "default-priorities"),
        (lambda d: d["variants"]["cu130"]["nvidia"].update({"Bad": ["1"]}), "'Bad'"),
        (lambda d: d["variants"].update({"null": {}}), "not exactly the file name's label"),
    ],
)
def test_what_uv_would_skip_or_refuse_is_named(change: object, says: str) -> None:
    _index, wheel = _documents()
    broken = json.loads(json.dumps(wheel))
    change(broken)  # type: ignore[operator]
    problems = read_document(render(broken), label="cu130")
    assert any(says in p for p in problems), problems


def _variant_ctx(label: str, doc: dict[str, object], variant: str | None, **elf_facts: object) -> RuleContext:
    facts = good_rocm()
    facts.distribution = "xfer_engine"
    facts.elves.clear()
    facts.add_elf(elf("xfer/_xfer.cpython-312-x86_64-linux-gnu.so", **elf_facts))
    facts.add_text(f"{facts.info_dir}/variant.json", render(doc))
    contents = facts.contents()
    contents.path = contents.path.with_name(contents.path.name[: -len(".whl")] + f"-{label}.whl")
    loaded = _loaded()
    shared = variant_set(loaded, make_plan(loaded).variants)
    return RuleContext(
        wheel=contents, matrix="/project/matrix.yaml",
        variant=shared.variants[variant] if variant else None,
        excludes=(), release=False, expected_version=None, policies=manylinux_policies(),
    )  # fmt: skip


def _doc_for(label: str) -> dict[str, object]:
    loaded = _loaded()
    shared = variant_set(loaded, make_plan(loaded).variants)
    desc = next(d for d in shared.descriptions if d.label == label)
    return dist_info_document(desc, shared.descriptions)


def test_rule_passes_a_variant_wheel_that_matches_its_variant() -> None:
    ctx = _variant_ctx("rocm72", _doc_for("rocm72"), "rocm", needed=("libamdhip64.so.7",))
    result = apply("variant-metadata", ctx)
    assert result.status == "pass", result
    assert "amd :: rocm_version :: 7.2" in result.message


def test_rule_fails_properties_that_are_not_the_variants() -> None:
    result = apply("variant-metadata", _variant_ctx("cu130", _doc_for("cu130"), "rocm"))
    assert result.status == "fail", result
    assert "variant rocm" in result.message and "'rocm72'" in result.message


def test_rule_fails_a_null_variant_that_binds_a_gpu_runtime() -> None:
    ctx = _variant_ctx("null", _doc_for("null"), None, needed=("libcudart.so.13",))
    result = apply("variant-metadata", ctx)
    assert result.status == "fail", result
    assert "libcudart.so.13" in result.message


def test_rule_passes_a_null_variant_without_gpu_runtime() -> None:
    result = apply("variant-metadata", _variant_ctx("null", _doc_for("null"), "cpu", needed=("libc.so.6",)))
    assert result.status == "pass", result


def test_rule_fails_variant_json_without_a_label() -> None:
    ctx = _variant_ctx("null", _doc_for("null"), None)
    ctx.wheel.path = Path("/wheels/xfer_engine-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    result = apply("variant-metadata", dataclasses.replace(ctx))
    assert result.status == "fail" and "no variant label" in result.message, result
