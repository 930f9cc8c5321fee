"""The committed verify report schema is the one `report_schema()` generates from the registry,
and every registered rule is documented in docs/verify.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from release.inspect import report
from release.inspect.rules import RULE_IDS, registry
from release.inspect.rules.registry import Finding, RuleContext

ROOT = Path(__file__).resolve().parents[2]


def test_committed_schema_is_the_generated_one() -> None:
    assert report.SCHEMA_FILE == ROOT / "release" / "inspect" / "verify.schema.json"
    assert report.SCHEMA_FILE.read_text(encoding="utf-8") == report.schema_text(), (
        "release/inspect/verify.schema.json is out of date: regenerate it with `release schema --write`"
    )


def test_schema_is_valid_and_takes_rule_ids_from_the_registry() -> None:
    schema = report.report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    rule = schema["$defs"]["rule"]  # type: ignore[index]
    assert rule["properties"]["id"]["enum"] == list(RULE_IDS)
    rules = schema["properties"]["rules"]  # type: ignore[index]
    assert rules["minItems"] == rules["maxItems"] == len(RULE_IDS)


def test_a_new_rule_is_caught_as_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "RULE_IDS", (*RULE_IDS, "brand-new-rule"))
    assert report.schema_text() != report.SCHEMA_FILE.read_text(encoding="utf-8")


def test_schema_command_checks_and_rewrites_the_report_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from release.cli import main

    stale = tmp_path / "verify.schema.json"
    stale.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(report, "SCHEMA_FILE", stale)
    assert main(["schema", "--check"]) == 1
    assert "verify.schema.json is out of date" in capsys.readouterr().err
    assert main(["schema", "--write"]) == 0
    assert stale.read_text(encoding="utf-8") == report.schema_text()
    assert main(["schema", "--check"]) == 0
    assert main(["schema", "--verify-report"]) == 0
    printed = capsys.readouterr().out.split("up to date\n", 1)[1]
    assert json.loads(printed)["$id"].endswith("verify.schema.json")


def test_rule_ids_are_kebab_case_and_unique() -> None:
    assert len(set(RULE_IDS)) == len(RULE_IDS)
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", r) for r in RULE_IDS)


def test_registering_an_id_twice_is_refused() -> None:
    def check(ctx: RuleContext) -> Finding:
        return Finding("pass", "")

    with pytest.raises(ValueError, match="registered twice"):
        registry.rule(RULE_IDS[0])(check)
    assert tuple(r.id for r in registry.registered()) == RULE_IDS


def test_the_verify_guide_lists_every_rule() -> None:
    text = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
    assert [r for r in RULE_IDS if f"`{r}`" not in text] == []
