"""A variant held back in matrix.yaml: left out of every release step, and said so, never silently."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from release import cli
from release.config.matrix import LoadedMatrix, loads
from release.errors import MatrixError, UsageError
from release.plan.steps import make_plan
from release.publish import manifest
from release.publish.github_release import held_back_notes
from release.publish.preflight import collect

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
REASON = "no MUSA Toolkit installer is available to this repository's CI (MUSA_INSTALLER is not set)"


def _text(*, pin: bool = True) -> str:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    if not pin:  # the repository pins its serving images; a tag-only copy of them
        text = re.sub(r"(/(?:vllm-openai-rocm|sglang):[^@\"]+)@sha256:[0-9a-f]{64}", r"\1", text)
    return text


def _loaded(tmp_path: Path, text: str) -> LoadedMatrix:
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return loads(text, path=path, backends_dir=BACKENDS)


def test_the_repository_holds_musa_back_with_its_reason(tmp_path: Path) -> None:
    plan = make_plan(_loaded(tmp_path, _text()))
    assert plan.held_back == {"musa": REASON}
    assert "musa" not in plan.variants
    assert not [s for s in plan.builds if s.variant.name == "musa"]


def test_naming_a_held_back_variant_in_a_release_step_gives_the_reason(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, _text())
    pattern = r"matrix\.yaml:\d+: variant 'musa' \(xfer-engine-musa\) is held back: no MUSA"
    with pytest.raises(UsageError, match=pattern):
        make_plan(loaded, variants=("musa",))
    with pytest.raises(UsageError, match=r"remove variants\.musa\.held_back to release it"):
        make_plan(loaded).variant("musa")
    assert "musa" in make_plan(loaded, variants=("musa",), include_held_back=True).variants


def test_the_release_plan_says_what_it_holds_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(_text(), encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan", "--github", "release", "--tag", "v0.2.0"]) == 0
    out, err = capsys.readouterr()
    assert "musa" not in out  # no job of it reaches $GITHUB_OUTPUT
    assert f"held back (not released): musa (xfer-engine-musa): {REASON}" in err
    release_plan = ["--matrix", str(path), "plan", "--github", "release", "--tag", "v0.2.0"]
    assert cli.main([*release_plan, "--variant", "musa"]) == 2
    assert "is held back" in capsys.readouterr().err


def test_a_held_back_variant_with_wheels_fails_preflight(tmp_path: Path) -> None:
    plan = make_plan(_loaded(tmp_path, _text()))
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "musa").mkdir(parents=True)
    (wheelhouse / "musa" / "xfer_engine_musa-0.2.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"x")
    _found, problems = collect(plan, wheelhouse, "0.2.0")
    assert any(p.startswith("musa/: holds wheels, but the variant is held back") for p in problems)


def test_notes_and_manifest_name_what_is_held_back(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, _text())
    notes = held_back_notes(loaded)
    assert notes.splitlines()[0] == "**Not in this release** (held back in matrix.yaml):"
    assert f"- `xfer-engine-musa` (musa): {REASON}" in notes
    held = {"musa": {"distribution": "xfer-engine-musa", "reason": REASON}}
    document = manifest.assemble([], {}, tag="v0.2.0", version="0.2.0", held_back=held)
    assert document["held_back"] == held
    lifted = _loaded(tmp_path, _text().replace(f'    held_back: "{REASON}"\n', ""))
    assert held_back_notes(lifted) == ""
    assert make_plan(lifted).held_back == {}


@pytest.mark.parametrize(
    ("replacement", "fragment"),
    [
        ('    held_back: ""\n', "variants.musa.held_back: give the reason on one line"),
        (
            '    held_back: "x"\n',
            None,
        ),
    ],
)
def test_a_hold_gives_its_reason(tmp_path: Path, replacement: str, fragment: str | None) -> None:
    text = _text().replace(f'    held_back: "{REASON}"\n', replacement)
    if fragment is None:
        assert make_plan(_loaded(tmp_path, text)).held_back == {"musa": "x"}
        return
    with pytest.raises(MatrixError, match=fragment):
        _loaded(tmp_path, text)


def test_holding_back_every_variant_is_an_error(tmp_path: Path) -> None:
    text = _text()
    for dist in ("xfer-engine-cpu", "xfer-engine", "xfer-engine-rocm"):
        line = f"    distribution: {dist}\n"
        text = text.replace(line, line + '    held_back: "not this time"\n', 1)
    loaded = _loaded(tmp_path, text)  # local builds of one still work
    assert "musa" in make_plan(loaded, variants=("musa",), include_held_back=True).variants
    with pytest.raises(UsageError, match=r"every variant is held back .*: a release would publish nothing"):
        make_plan(loaded)


def test_the_release_plan_puts_the_held_back_table_in_the_job_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    path = tmp_path / "matrix.yaml"
    path.write_text(_text(), encoding="utf-8")
    assert cli.main(["--matrix", str(path), "plan", "--github", "release", "--tag", "v0.2.0"]) == 0
    capsys.readouterr()
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("#### Held back: not released\n")
    assert f"| musa | xfer-engine-musa | {REASON} |" in text
