"""check-resolution as a release step: the cases it plans, the plan outputs its job reads, and
the job's shape in release.yml (which the rehearsal runs as it is)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from release.commands.plan import github_outputs
from release.config import pythons
from release.config.matrix import load
from release.plan.steps import make_plan
from release.rehearse import workflow
from release.variants.cases import plan_cases
from release.variants.make import variant_set

ROOT = Path(__file__).resolve().parents[2]
RELEASE_YML = ROOT / ".github" / "workflows" / "release.yml"
LOADED = load(ROOT / "matrix.yaml")
PLAN = make_plan(LOADED)
SETUPS = ("per-name", "partial-index", "held-name", "variants")
HELD = {"xfer-engine-rocm": ["xfer_engine_rocm-9.0-py3-none-any.whl"]}


def _cases(pythons: tuple[str, ...], **how: Any) -> list[tuple[str, str, str, str]]:
    shared = variant_set(LOADED, PLAN.variants)
    cases = plan_cases(PLAN.variants, pythons, ("pip", "uv"), how.pop("setups", SETUPS), shared,
                       nvidia_driver=False, **how)  # fmt: skip
    return [(c.setup, c.installer, c.python, c.requirement) for c in cases]


def test_a_held_name_is_its_own_setup_for_that_name_only() -> None:
    cases = plan_cases(PLAN.variants, ("3.12",), ("pip", "uv"), SETUPS, None, nvidia_driver=False, held=HELD)
    held = [c for c in cases if c.setup == "held-name"]
    assert [(c.installer, c.requirement) for c in held] == [
        ("pip", "xfer-engine-rocm"),
        ("uv", "xfer-engine-rocm"),
    ]
    for case in held:
        # The public index first (a user's PyPI), ours as the extra one, as a user types it.
        assert case.indexes == ("public", "release")
        assert case.expect is PLAN.variants["rocm"] and case.note == "xfer_engine_rocm-9.0-py3-none-any.whl"
    assert not [c for c in _cases(("3.12",)) if c[0] == "held-name"]  # no name held: no install
    assert not [c for c in _cases(("3.12",), held=HELD, setups=("per-name",)) if c[0] == "held-name"]


def test_one_python_per_job_still_checks_the_partial_index_against_the_newest() -> None:
    """The release runs one job per Python: the partial index holds the matrix's newest Python,
    not the one Python this job checks."""
    newest = pythons.newest(LOADED.matrix.python)
    assert newest == "3.15"  # the newest GIL build: a job's Python
    oldest = LOADED.matrix.python[0]
    partial = [c for c in _cases((oldest,), newest=newest) if c[0] == "partial-index"]
    assert {c[3] for c in partial} == {v.distribution for v in PLAN.variants.values()}
    assert {c[1] for c in partial} == {"pip", "uv"}
    assert not [c for c in _cases((newest,), newest=newest) if c[0] == "partial-index"]


def test_variant_cases_go_through_the_one_helper_with_the_filters() -> None:
    only_uv = plan_cases(PLAN.variants, ("3.12",), ("uv",), ("variants",), variant_set(LOADED, PLAN.variants),
                         nvidia_driver=False)  # fmt: skip
    assert [(c.installer, dict(c.env)) for c in only_uv] == [
        ("uv", {}),
        ("uv", {"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0"}),
    ]
    assert only_uv[0].expect is not None and only_uv[0].expect.name == "cpu"  # no NVIDIA driver: null


def test_the_plan_gives_the_resolution_job_its_pythons_and_whether_a_variant_set_is_made() -> None:
    outputs = github_outputs(PLAN, "release", tag="v0.1.0")
    ordered = sorted(LOADED.matrix.python, key=pythons.sort_key)  # 3.14t beside 3.14
    assert json.loads(outputs["pythons"]) == {"include": [{"python": p} for p in ordered]}
    assert outputs["variant-wheels"] == "true"
    # A backfill of one variant (the workflow's `variant` input) makes no variant set.
    backfill = github_outputs(make_plan(LOADED, variants=("cpu",)), "release", tag="v0.1.0")
    assert backfill["variant-wheels"] == "false"
    cpu = make_plan(LOADED, variants=("cpu",)).variants["cpu"]
    assert json.loads(backfill["pythons"]) == {
        "include": [{"python": p} for p in sorted(cpu.pythons, key=pythons.sort_key)]
    }


def test_release_yml_runs_check_resolution_per_python_before_publishing() -> None:
    doc = yaml.safe_load(RELEASE_YML.read_text(encoding="utf-8"))
    job = doc["jobs"]["check-resolution"]
    assert job["name"] == "resolution ${{ matrix.python }}"
    assert set(job["needs"]) >= {"plan", "build", "smoke"}
    assert job["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.pythons) }}"
    assert "check-resolution" in doc["jobs"]["publish-pypi"]["needs"]  # a wrong install stops publishing
    steps = job["steps"]
    pythons = [
        s["with"]["python-version"] for s in steps if s.get("uses", "").startswith("actions/setup-python@")
    ]
    assert pythons == ["${{ matrix.python }}", "${{ env.TOOLKIT_PYTHON }}"]  # the toolkit's first on PATH
    download = next(s for s in steps if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"] == {"path": ".", "merge-multiple": True}
    runs = {s.get("name"): s for s in steps if "run" in s}
    variants = next(s for s in runs.values() if "release variants" in s["run"])
    assert variants["if"] == "needs.plan.outputs.variant-wheels == 'true'"
    check = next(s["run"] for s in runs.values() if "release check-resolution" in s["run"])
    assert '--python "$PYTHON"' in check and "--wheelhouse wheelhouse" in check
    assert '${REPOSITORY_URL:+--repository "$REPOSITORY_URL"}' in check  # held-name asks the index
    assert '${VARIANT_INPUT:+--variant "$VARIANT_INPUT"}' in check  # a backfill checks its variant
    assert job["env"]["REPOSITORY_URL"] == "${{ needs.plan.outputs.repository-url }}"
    # No upload from this job: publish-pypi and github-release download every artifact.
    assert not [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    rehearsed = workflow.load(RELEASE_YML)  # every step is one the rehearsal can run
    kinds = [s.kind for s in rehearsed.jobs["check-resolution"].steps]
    assert kinds.count("toolkit") == 2 and kinds.count("setup-python") == 2
