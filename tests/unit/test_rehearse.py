"""The rehearsal reads release.yml as its job list: parsing, expressions, lowest pins.

Running jobs starts processes: tests/integration/test_rehearse.py does that for real.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from release.errors import UsageError
from release.init import workflows as templates
from release.rehearse import expressions, runner, workflow
from release.rehearse.pins import lowest_pins, wheel_lowest_pins
from release.rehearse.steps import StepFailed, _check_pin

ROOT = Path(__file__).resolve().parents[2]
RELEASE_YML = ROOT / ".github" / "workflows" / "release.yml"
TEMPLATE = ROOT / "release" / "init" / "templates" / "release.yml"


def _load(text: str | None = None) -> workflow.Workflow:
    return workflow.parse(text if text is not None else RELEASE_YML.read_text(encoding="utf-8"), RELEASE_YML)


def _toolkit_commands(flow: workflow.Workflow) -> dict[str, list[str]]:
    return {job.id: [s.words[0] for s in job.steps if s.kind == "toolkit"] for job in flow.jobs.values()}


def test_every_step_of_release_yml_maps_to_something_the_rehearsal_runs() -> None:
    flow = _load()
    assert [j.id for j in flow.order()] == [
        "plan", "build", "second-build", "smoke", "smoke-image", "check-resolution", "publish-pypi",
        "github-release", "hardware",
    ]  # fmt: skip
    assert _toolkit_commands(flow) == {
        "plan": ["plan"],
        "build": ["toolchain", "build", "verify"],
        "second-build": ["release-checks", "cibuildwheel-config", "toolchain", "reproduce"],
        "smoke": ["toolchain", "smoke"],
        "smoke-image": ["toolchain", "smoke"],
        "check-resolution": ["variants", "check-resolution"],
        "publish-pypi": ["release-checks", "publish", "verify-release", "verify-release"],
        "github-release": ["verify-release", "github-release"],
        "hardware": [],
    }
    kinds = {s.kind for j in flow.jobs.values() for s in j.steps}
    assert kinds <= {"toolkit", "install", "gh", "sudo", *(k for k, _ in workflow.LOCAL_ACTIONS.values())}
    plan_step = flow.jobs["plan"].steps[-1]
    assert plan_step.capture == "GITHUB_OUTPUT"
    assert flow.jobs["second-build"].steps[5].capture == "GITHUB_ENV"


def test_editing_a_run_line_changes_what_the_rehearsal_runs() -> None:
    text = RELEASE_YML.read_text(encoding="utf-8")
    old = "python -m release verify --release"
    assert old in text
    edited = _load(text.replace(old, "python -m release verify"))
    step = next(s for s in edited.jobs["build"].steps if s.words[:1] == ("verify",))
    assert "--release" not in step.words
    assert "--release" not in step.run  # the script the rehearsal hands to bash is the edited line
    original = next(s for s in _load().jobs["build"].steps if s.words[:1] == ("verify",))
    assert "--release" in original.words


@pytest.mark.parametrize(
    ("replacement", "why"),
    [
        ("echo building && python -m release build --container", "shell pipeline or list"),
        ("make wheels", "is not a toolkit command"),
        ("python -m release build\n          ls -l wheelhouse", "not 2 commands"),
        ("python -m release build; ls", "shell pipeline or list"),
    ],
)
def test_a_step_that_is_not_one_toolkit_command_is_an_error_naming_job_and_step(
    replacement: str, why: str
) -> None:
    text = RELEASE_YML.read_text(encoding="utf-8")
    line = re.search(r"run: (python -m release build [^\n]+)", text)
    assert line is not None
    edited = text.replace(line.group(0), "run: |\n          " + replacement)
    with pytest.raises(workflow.WorkflowError) as caught:
        _load(edited)
    message = str(caught.value)
    assert "job 'build'" in message
    assert "Build in the manylinux image" in message
    if why.startswith("not "):
        assert "2 commands" in message
    else:
        assert why in message


def test_an_action_without_a_local_equivalent_is_an_error() -> None:
    text = RELEASE_YML.read_text(encoding="utf-8")
    edited = text.replace("uses: pypa/gh-action-pypi-publish@", "uses: someone/upload-anything@", 1)
    with pytest.raises(
        workflow.WorkflowError, match=r"job 'publish-pypi', step \d+ .*someone/upload-anything"
    ):
        _load(edited)


def test_a_job_without_steps_is_an_error() -> None:
    text = (
        RELEASE_YML.read_text(encoding="utf-8")
        + "\n  reuse:\n    uses: org/repo/.github/workflows/x.yml@main\n"
    )
    with pytest.raises(workflow.WorkflowError, match="job 'reuse'"):
        _load(text)


def test_the_template_is_the_same_job_list() -> None:
    """`release init` writes the template for other projects: the same jobs, steps and toolkit
    commands as this repository's release.yml (it installs the pinned toolkit instead of `.`)."""
    ours = _load()
    theirs = workflow.parse(templates.render("release.yml", templates.adopter("x==1")), TEMPLATE)
    assert list(theirs.jobs) == list(ours.jobs)
    for job_id, job in ours.jobs.items():
        other = theirs.jobs[job_id]
        assert [(s.kind, s.words) for s in other.steps] == [(s.kind, s.words) for s in job.steps], job_id
        assert other.needs == job.needs
        assert other.raw.get("if") == job.raw.get("if")


_PIPED = """
name: piped
on: push
{defaults}
jobs:
  plan:
    runs-on: ubuntu-latest
{job_defaults}
    steps:
      - run: python -m release plan --github release | tee -a "$GITHUB_OUTPUT"
{step_shell}
"""


def _piped(defaults: str = "", job_defaults: str = "", step_shell: str = "") -> workflow.Step:
    text = _PIPED.format(defaults=defaults, job_defaults=job_defaults, step_shell=step_shell)
    return workflow.parse(text, Path("piped.yml")).jobs["plan"].steps[0]


_BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "S"]
_DEFAULTS = "defaults: {run: {shell: %s}}"


@pytest.mark.parametrize(
    ("defaults", "job_defaults", "step_shell", "argv"),
    [
        ("", "", "", ["bash", "-e", "S"]),  # GitHub's default: no pipefail
        (_DEFAULTS % "bash", "", "", _BASH),
        ("", "    " + _DEFAULTS % "bash", "", _BASH),
        (_DEFAULTS % "bash", "    " + _DEFAULTS % "sh", "", ["sh", "-e", "S"]),
        (_DEFAULTS % "sh", "", "        shell: bash", _BASH),
        ("", "", "        shell: bash -x {0}", ["bash", "-x", "S"]),
    ],
)
def test_a_step_runs_with_the_shell_github_would_use(
    defaults: str, job_defaults: str, step_shell: str, argv: list[str]
) -> None:
    """The step's shell:, else the job's, else the workflow's defaults.run.shell, else `bash -e`."""
    assert _piped(defaults, job_defaults, step_shell).shell_argv("S") == argv


def test_a_shell_github_would_not_run_is_an_error_naming_the_step() -> None:
    with pytest.raises(workflow.WorkflowError, match=r"job 'plan', step 1 .*'fish'"):
        _piped(step_shell="        shell: fish")


def test_our_release_yml_runs_every_step_with_pipefail() -> None:
    for job in _load().jobs.values():
        for step in job.steps:
            if "run" in step.raw:
                assert "pipefail" in step.shell_argv("S"), (job.id, step.label)


def _context(**values: object) -> expressions.Context:
    base: dict[str, object] = {
        "github": {"ref_name": "v0.2.0", "ref": "refs/tags/v0.2.0"},
        "inputs": {},
        "env": {},
        "matrix": {"variant": "cpu", "identifier": "cp312-cpu"},
        "needs": {
            "plan": {"result": "success", "outputs": {"build": '{"include": [{"a": 1}]}', "x": "true"}}
        },
    }
    base.update(values)
    return expressions.Context(base)


def test_expressions_release_yml_uses() -> None:
    ctx = _context()
    assert expressions.substitute("${{ inputs.tag || github.ref_name }}", ctx) == "v0.2.0"
    assert (
        expressions.substitute("${{ inputs.tag && format('refs/tags/{0}', inputs.tag) || github.ref }}", ctx)
        == "refs/tags/v0.2.0"
    )
    assert expressions.substitute("${{ fromJSON(needs.plan.outputs.build) }}", ctx) == {"include": [{"a": 1}]}
    assert expressions.substitute("build ${{ matrix.identifier }}", ctx) == "build cp312-cpu"
    assert expressions.condition("needs.plan.outputs.x == 'true'", ctx)
    assert not expressions.condition("needs.plan.outputs.missing != ''", ctx)


def test_conditions_follow_needs_results() -> None:
    failed = expressions.Context(_context().values, expressions.Status(("success", "failure")))
    skipped = expressions.Context(_context().values, expressions.Status(("success", "skipped")))
    assert not expressions.condition(None, failed)
    assert not expressions.condition(None, skipped)  # a skipped need skips the job, as in Actions
    assert not expressions.condition("${{ !cancelled() && !failure() }}", failed)
    assert expressions.condition("${{ !cancelled() && !failure() }}", skipped)


def test_an_unknown_function_names_the_expression() -> None:
    with pytest.raises(UsageError, match=r"hashFiles\(\)"):
        expressions.substitute("${{ hashFiles('x') }}", _context())


def test_lowest_pins_come_from_the_lower_bounds(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["auditwheel>=6.1.0", "PyYAML>=6.0.1,<7", "twine==6.1.0"]\n',
        encoding="utf-8",
    )
    assert lowest_pins(pyproject) == ["auditwheel==6.1.0", "PyYAML==6.0.1", "twine==6.1.0"]
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["cibuildwheel==2.23.3; python_version < \'3.11\'"]\n',
        encoding="utf-8",
    )
    assert lowest_pins(pyproject) == ['cibuildwheel==2.23.3; python_version < "3.11"']
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["auditwheel"]\n', encoding="utf-8")
    with pytest.raises(UsageError, match="'auditwheel' has no lower bound"):
        lowest_pins(pyproject)


def test_a_toolkit_wheel_gives_its_lowest_pins_from_its_metadata(tmp_path: Path) -> None:
    """An adopter's checkout holds its own project: the pinned toolkit's dependencies come from
    the toolkit wheel's Requires-Dist, extras left out."""
    wheel = tmp_path / "gpu_wheel_release-1.2.0-py3-none-any.whl"
    metadata = (
        "Metadata-Version: 2.4\nName: gpu-wheel-release\nVersion: 1.2.0\n"
        "Requires-Dist: auditwheel>=6.5.0\nRequires-Dist: cibuildwheel==2.23.3; python_version < '3.11'\n"
        'Requires-Dist: pytest>=8; extra == "test"\n'
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("gpu_wheel_release-1.2.0.dist-info/METADATA", metadata)
    assert wheel_lowest_pins(wheel) == ["auditwheel==6.5.0", 'cibuildwheel==2.23.3; python_version < "3.11"']
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("gpu_wheel_release-1.2.0.dist-info/METADATA", metadata + "Requires-Dist: twine\n")
    with pytest.raises(UsageError, match="Requires-Dist: 'twine' has no lower bound"):
        wheel_lowest_pins(wheel)


def test_a_toolkit_wheel_stands_in_only_for_the_pin_it_meets() -> None:
    wheel = Path("/dist/gpu_wheel_release-1.2.0-py3-none-any.whl")
    _check_pin(wheel, "gpu-wheel-release==1.2.0")
    _check_pin(wheel, "gpu_wheel_release>=1.0")
    refused = re.escape("1.2.0, which the workflow's TOOLKIT=gpu-wheel-release==1.1.0 does not admit")
    with pytest.raises(StepFailed, match=refused):
        _check_pin(wheel, "gpu-wheel-release==1.1.0")
    with pytest.raises(StepFailed, match="does not admit"):
        _check_pin(wheel, "other-toolkit==1.2.0")


def test_the_toolkit_pins_every_dependency_from_below() -> None:
    pins = lowest_pins(ROOT / "pyproject.toml")
    assert any(p.startswith("auditwheel==") for p in pins)
    assert all("==" in p for p in pins)


def test_a_job_whose_matrix_does_not_evaluate_fails_in_one_line(tmp_path: Path) -> None:
    """A `strategy.matrix` of `fromJSON('')` (an output its plan job never set) used to end the
    job's thread with a traceback, leaving no result: the rehearsal then said it passed. Now the
    job fails, says why in one line, and the jobs that need it see a failure."""
    from release.rehearse.runner import Options, Rehearsal

    text = (
        "name: r\non: {push: {tags: ['v*']}}\njobs:\n"
        "  plan:\n    runs-on: ubuntu-latest\n    steps: [{run: 'python -m release plan'}]\n"
        "  build:\n    needs: plan\n    runs-on: ubuntu-latest\n"
        "    strategy: {matrix: '${{ fromJSON(needs.plan.outputs.missing) }}'}\n"
        "    steps: [{run: 'python -m release plan'}]\n"
    )
    flow = workflow.parse(text, tmp_path / "r.yml")
    said: list[str] = []
    rehearsal = Rehearsal(
        Options(repo=tmp_path, workflow=flow, tag="v1.0.0", work=tmp_path / "w", log=said.append)
    )
    rehearsal.jobs["plan"] = {"result": "success", "outputs": {}}
    build = next(job for job in flow.order() if job.id == "build")
    rehearsal._job_or_failure(build, 2, 2, None, rehearsal.contexts())  # type: ignore[arg-type]
    assert [(r.job, r.status) for r in rehearsal.results] == [("build", "failure")]
    assert rehearsal.jobs["build"]["result"] == "failure"
    assert len(said) == 1 and said[0].startswith("[2/2] build: failed before its steps ("), said


def test_a_job_left_out_by_job_is_skipped_and_the_jobs_that_need_it_follow_their_if(tmp_path: Path) -> None:
    """`release rehearse --job`: a job it does not name is skipped, said in one line, as a job whose
    `if:` is false (no step runs: no process is started here); a job needing it with the default
    `if:` is skipped with it, and one with `!failure()` (release.yml's publish-pypi) still runs."""
    from release.rehearse.runner import Options, Rehearsal

    steps = "    runs-on: ubuntu-latest\n    steps: [{run: 'python -m release plan'}]\n"
    text = (
        f"name: r\non: {{push: {{tags: ['v*']}}}}\njobs:\n  plan:\n{steps}"
        f"  second:\n    needs: plan\n{steps}  after:\n    needs: second\n{steps}"
        f"  publish:\n    needs: second\n    if: ${{{{ !cancelled() && !failure() }}}}\n{steps}"
    )
    flow = workflow.parse(text, tmp_path / "r.yml")
    said: list[str] = []
    options = Options(
        repo=tmp_path, workflow=flow, tag="v1.0.0", work=tmp_path / "w", log=said.append,
        only=("plan", "after", "publish"),
    )  # fmt: skip
    rehearsal = Rehearsal(options)
    rehearsal.jobs["plan"] = {"result": "success", "outputs": {}}
    jobs = {job.id: job for job in flow.order()}
    ran: list[str] = []

    def steps_run(job: workflow.Job, *_: object) -> runner.Result:  # in place of its steps' processes
        ran.append(job.id)
        return runner.Result(job.id, job.id, "success")

    rehearsal._instance = steps_run  # type: ignore[method-assign,assignment]
    for number, name in enumerate(("second", "after", "publish"), 2):
        rehearsal._job(jobs[name], number, 4, None, rehearsal.contexts())  # type: ignore[arg-type]
    assert [(r.job, r.status) for r in rehearsal.results] == [("second", "skipped"), ("after", "skipped")]
    assert ran == ["publish"]
    assert said == ["[2/4] second: skipped (not among --job)", "[3/4] after: skipped (needs second: skipped)"]


def test_a_job_that_is_not_the_workflows_is_a_usage_error_naming_its_jobs() -> None:
    from release.rehearse.session import check_jobs

    flow = _load()
    check_jobs(flow, ("plan", "build", "second-build"))
    check_jobs(flow, ())
    said = r"^--job publish: not a job of release\.yml \(its jobs: plan, build, "
    with pytest.raises(UsageError, match=said):
        check_jobs(flow, ("plan", "publish"))


def test_the_commands_a_workflow_runs_decide_which_local_images_it_gets() -> None:
    """release.yml builds and smoke-tests (build and serving images); hardware.yml only runs
    `release hardware` (serving images' stand-ins, no build image); the toolkit's own options
    before the command are not the command."""
    hardware = workflow.load(ROOT / ".github" / "workflows" / "hardware.yml")
    assert {"build", "reproduce", "smoke", "publish"} <= _load().toolkit_commands()
    assert "hardware" in hardware.toolkit_commands()
    assert not hardware.toolkit_commands() & runner.BUILD_IMAGE_COMMANDS
    assert hardware.toolkit_commands() & runner.SERVING_IMAGE_COMMANDS
    text = """
on: push
jobs:
  one:
    runs-on: ubuntu-latest
    steps:
      - run: python -m release --matrix build/matrix.yaml --debug hardware --role single
      - run: release --matrix=m.yaml plan
"""
    flow = workflow.parse(text, Path("one.yml"))
    assert [s.command for s in flow.jobs["one"].steps] == ["hardware", "plan"]
    assert flow.toolkit_commands() == {"hardware", "plan"}
