"""The committed JSON Schema is the one the model generates, and it agrees with the loader."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from release import cli
from release.config import matrix
from release.config.dataschema import spec

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "release" / "config" / "matrix.schema.json"


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return result


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    result: dict[str, Any] = yaml.safe_load((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    return result


def test_committed_schema_is_the_generated_one(committed: dict[str, Any]) -> None:
    assert matrix.SCHEMA_FILE == SCHEMA_FILE
    assert committed == matrix.schema()
    assert SCHEMA_FILE.read_text(encoding="utf-8") == json.dumps(matrix.schema(), indent=2) + "\n"


def test_schema_check_command_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema", "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_a_model_change_is_caught_as_drift(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], committed: dict[str, Any]
) -> None:
    @dataclass(frozen=True, kw_only=True)
    class Matrix(matrix.Matrix):
        comment: str = spec("A key the committed schema does not know.", default="")

    Matrix.__module__ = matrix.__name__
    monkeypatch.setattr(matrix, "Matrix", Matrix)
    drifted = matrix.schema()
    assert drifted != committed
    assert "comment" in drifted["properties"]
    assert cli.main(["schema", "--check"]) == 1
    assert "out of date" in capsys.readouterr().err


def test_schema_is_valid_draft_2020_12(committed: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(committed)
    assert committed["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_real_matrix_validates_against_the_committed_schema(
    committed: dict[str, Any], real: dict[str, Any]
) -> None:
    errors = list(jsonschema.Draft202012Validator(committed).iter_errors(real))
    assert errors == []


def _set(doc: dict[str, Any], dotted: str, value: object) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    target = doc
    for part in parents:
        target = target[part]
    target[last] = value
    return doc


def _drop(doc: dict[str, Any], dotted: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    target = doc
    for part in parents:
        target = target[part]
    del target[last]
    return doc


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("variant", {}),
        ("variants.rocm.exlude", ["libamdhip64.so*"]),
        ("variants.rocm.exclude", "libamdhip64.so*"),
        ("python", [3.1]),
        ("schema_version", 2),
        ("images.rocm-distro.simulate.runtime", "sytem"),
        ("publish.prerelease", "sometimes"),
        ("hardware.mi300x.nodes", "2"),
        ("variants.rocm.device_code", "no"),
    ],
)
def test_schema_rejects_what_the_loader_rejects(
    committed: dict[str, Any], real: dict[str, Any], dotted: str, value: object
) -> None:
    bad = _set(real, dotted, value)
    assert not jsonschema.Draft202012Validator(committed).is_valid(bad)
    with pytest.raises(matrix.MatrixError):
        matrix.loads(yaml.safe_dump(bad), path=ROOT / "matrix.yaml")


@pytest.mark.parametrize("dotted", ["variants", "engine.import_name", "variants.cpu.distribution",
                                    "hardware.mi300x.runner"])
def test_schema_requires_what_the_model_requires(
    committed: dict[str, Any], real: dict[str, Any], dotted: str
) -> None:
    assert not jsonschema.Draft202012Validator(committed).is_valid(_drop(real, dotted))


def test_x_keys_are_allowed_by_schema_and_loader(committed: dict[str, Any], real: dict[str, Any]) -> None:
    doc = _set(real, "x-defaults", {"anything": [1, 2]})
    doc = _set(doc, "variants.rocm.x-note", "free text")
    jsonschema.Draft202012Validator(committed).validate(doc)
    loaded = matrix.loads(yaml.safe_dump(doc, sort_keys=False), path=ROOT / "matrix.yaml")
    assert set(loaded.matrix.variants) == {"cpu", "cuda", "rocm", "musa"}
