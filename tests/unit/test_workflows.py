"""The GitHub workflows take every name from matrix.yaml and follow the hardening rules.

Parsing only: schema validation and zizmor run as processes in tests/integration/test_workflows.py.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from release.commands import plan
from release.config.backends import load_backends
from release.config.matrix import LoadedMatrix, Matrix, load, loads
from release.config.resources import toolkit_backends
from release.init import workflows as templates
from release.plan.inputs import VARIABLE_JOBS, declared_variables, presence_value, workflow_value
from release.plan.machine import machine_of
from release.plan.steps import make_plan
from release.rehearse import workflow

ROOT = Path(__file__).resolve().parents[2]
VLLM_PINNED = (
    "docker.io/vllm/vllm-openai-rocm:v0.21.0"
    "@sha256:98a77b20df03adeb1cfc0ced009b4df6dd52b0a994ab99a32421f30876a9ae0c"
)
WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = ("release.yml", "ci.yml", "hardware.yml")
# The brief's variants, whatever matrix.yaml holds today, and any CPython minor of this era.
BACKEND_WORDS = ("cpu", "cuda", "rocm", "musa")
PYTHON_LITERAL = re.compile(r"(?<![\w.])(?:3\.1[0-9]|cp31[0-9])(?![\w])")
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}$")
HOSTED_RUNNERS = {"ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04"}


def read(name: str) -> dict[Any, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def triggers(doc: dict[Any, Any]) -> dict[str, Any]:
    """`on:` (YAML 1.1 reads the bare key as True)."""
    on = doc.get("on", doc.get(True))
    assert isinstance(on, dict)
    return on


def steps(doc: dict[Any, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_name, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


def strings(node: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Every key and string value with its dotted path (comments are not part of the data)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str):
                yield f"{path}.{key}#key", key
            yield from strings(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from strings(item, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


def forbidden_words(matrix: Matrix) -> set[str]:
    """Names that must flow from the plan JSON, never be written in a workflow."""
    words: set[str] = set(BACKEND_WORDS)
    for name, variant in matrix.variants.items():
        words |= {name, variant.distribution, variant.backend}
    for name, image in matrix.images.items():
        words.add(name)
        if image.container:
            words.add(image.container)
    for name, tier in matrix.hardware.items():
        words |= {name, tier.gpu, tier.architecture, *tier.runner}
    for machine in matrix.platform.machines:  # each machine's tag and its policy (manylinux_2_28)
        floor = matrix.platform.floor_of(machine)
        family, major, minor, _arch = floor.split("_", 3)
        words |= {floor, f"{family}_{major}_{minor}"}
    return words


def literal_names(doc: dict[Any, Any], matrix: Matrix) -> list[str]:
    """Where a workflow names a variant, a Python, an image or a runner label literally."""
    found = []
    patterns = {
        w: re.compile(rf"(?<![\w-]){re.escape(w)}(?![\w-])", re.IGNORECASE) for w in forbidden_words(matrix)
    }
    for where, text in strings(doc):
        if where == ".env.TOOLKIT_PYTHON":
            continue  # the one Python allowed: the toolkit's own interpreter on the runner
        found += [f"{where}: {text!r} names {w!r}" for w, p in patterns.items() if p.search(text)]
        if PYTHON_LITERAL.search(text):
            found.append(f"{where}: {text!r} names a Python version")
    return found


def matrix_keys(name: str) -> set[str]:
    """The `matrix.<key>` names a workflow's expressions read."""
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    return {
        key for expr in re.findall(r"\$\{\{(.*?)\}\}", text) for key in re.findall(r"\bmatrix\.(\w+)", expr)
    }


@pytest.fixture(scope="module")
def loaded() -> LoadedMatrix:
    return load(ROOT / "matrix.yaml")


@pytest.mark.parametrize("name", NAMES)
def test_no_workflow_names_what_matrix_yaml_holds(name: str, loaded: LoadedMatrix) -> None:
    assert literal_names(read(name), loaded.matrix) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("jobs", "build", "runs-on"), ["self-hosted", "mi300x"]),
        (("jobs", "build", "env", "VARIANT"), "rocm"),
        (("jobs", "build", "env", "PYTHON"), "3.12"),
        (("jobs", "smoke-image", "env", "CONTAINER"), VLLM_PINNED),
        (("jobs", "build", "steps", 0, "name"), "build the CPU wheel"),
    ],
)
def test_the_literal_check_bites(path: tuple[Any, ...], value: object, loaded: LoadedMatrix) -> None:
    doc = read("release.yml")
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert literal_names(doc, loaded.matrix)


def test_toolkit_python_is_the_only_exception(loaded: LoadedMatrix) -> None:
    for name in NAMES:
        doc = read(name)
        assert doc["env"]["TOOLKIT_PYTHON"] in loaded.matrix.python
        doc["env"]["OTHER_PYTHON"] = doc["env"]["TOOLKIT_PYTHON"]
        assert literal_names(doc, loaded.matrix) == [
            f".env.OTHER_PYTHON: {doc['env']['OTHER_PYTHON']!r} names a Python version"
        ]


def test_tag_filter_is_the_matrix_tag_pattern(loaded: LoadedMatrix) -> None:
    on = triggers(read("release.yml"))
    assert on["push"]["tags"] == [loaded.matrix.publish.tag_pattern]
    assert set(on) == {"push", "workflow_dispatch"}
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["tag"]["required"] is True
    assert inputs["variant"]["required"] is False


def test_hardware_triggers() -> None:
    on = triggers(read("hardware.yml"))
    assert set(on) == {"schedule", "release", "workflow_dispatch"}
    assert on["release"]["types"] == ["published"]
    # release.yml starts hardware.yml once its GitHub Release exists (GITHUB_TOKEN events do not).
    runs = [s["run"] for _, s in steps(read("release.yml")) if "run" in s]
    assert any("gh workflow run hardware.yml" in r for r in runs)


@pytest.mark.parametrize("name", NAMES)
def test_actions_are_pinned_by_commit_with_a_version_comment(name: str) -> None:
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    uses = [step["uses"] for _, step in steps(read(name)) if "uses" in step]
    assert uses
    for ref in uses:
        assert SHA_PIN.match(ref), ref
        assert re.search(rf"uses: {re.escape(ref)} # v\d", text), f"{ref} lacks its `# vX` comment"


ADOPTED = Path("adopter") / ".github" / "workflows"
ADOPTERS = templates.rendered(Path("adopter"), templates.adopter("gpu-wheel-release==1.0"))
"""What `release init --ci github` writes, by path (tests/unit/test_init.py checks init's output)."""
EVERY_WORKFLOW = {
    **{path: path.read_text(encoding="utf-8") for path in sorted(WORKFLOWS.glob("*.y*ml"))},
    **ADOPTERS,
}
"""Ours and every one an adopter gets."""


def assert_steps_fail_with_their_commands(doc: dict[Any, Any], name: str) -> None:
    """`defaults.run.shell: bash` (GitHub: `bash --noprofile --norc -eo pipefail {0}`), and no job
    or step chooses a shell without pipefail: with none set, a step is `bash -e {0}`, where
    `cmd | tee -a "$GITHUB_OUTPUT"` is green when cmd fails."""
    assert doc.get("defaults") == {"run": {"shell": "bash"}}, f"{name}: no defaults.run.shell: bash"
    for job_name, job in doc["jobs"].items():
        job_shell = workflow.default_shell(job) or workflow.default_shell(doc)
        for step in job.get("steps", []):
            if "run" in step:
                argv = workflow.shell_argv(step.get("shell") or job_shell, "S")
                assert "pipefail" in argv, (name, job_name, step.get("name"), argv)


def _label(path: Path) -> str:
    return f"{'ours' if path.is_absolute() else 'adopter'}/{path.name}"


@pytest.mark.parametrize("path", EVERY_WORKFLOW, ids=_label)
def test_every_step_fails_when_its_command_fails(path: Path) -> None:
    doc = yaml.safe_load(EVERY_WORKFLOW[path])
    assert isinstance(doc, dict)
    assert_steps_fail_with_their_commands(doc, path.name)


def test_the_pipefail_check_bites() -> None:
    doc = read("release.yml")
    doc.pop("defaults")
    with pytest.raises(AssertionError, match=r"no defaults\.run\.shell"):
        assert_steps_fail_with_their_commands(doc, "release.yml")
    doc["defaults"] = {"run": {"shell": "bash"}}
    doc["jobs"]["plan"]["steps"][-1]["shell"] = "sh"
    with pytest.raises(AssertionError, match="plan"):
        assert_steps_fail_with_their_commands(doc, "release.yml")


@pytest.mark.parametrize("name", NAMES)
def test_checkouts_keep_no_credentials(name: str) -> None:
    checkouts = [s for _, s in steps(read(name)) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkouts
    for step in checkouts:
        assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", NAMES)
def test_permissions_are_least_privilege(name: str) -> None:
    doc = read(name)
    assert doc["permissions"] in ({}, {"contents": "read"})
    for job_name, job in doc["jobs"].items():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{name}: job {job_name} declares no permissions"
        if perms.get("id-token"):
            # publish-pypi: trusted publishing; github-release: the manifest's attestation.
            assert (name, job_name) in {("release.yml", "publish-pypi"), ("release.yml", "github-release")}
        if perms.get("contents") == "write":
            assert (name, job_name) == ("release.yml", "github-release")


@pytest.mark.parametrize("name", NAMES)
def test_no_expression_inside_run_scripts(name: str) -> None:
    doc = read(name)
    for job_name, step in steps(doc):
        assert "${{" not in step.get("run", ""), f"{name}: {job_name}: pass values through env:"
    for where, text in strings(doc.get("env", {}), ".env"):
        if "\n" in text:  # scripts kept in env and run with bash -c
            assert "${{" not in text, where


@pytest.mark.parametrize(
    ("name", "job", "output"),
    [
        ("release.yml", "build", "build-jobs"),
        ("release.yml", "smoke", "build"),
        ("release.yml", "smoke-image", "images"),
        ("ci.yml", "build", "build"),
        ("hardware.yml", "device", "single"),
        ("hardware.yml", "prefill", "pair"),
        ("hardware.yml", "decode", "pair"),
    ],
)
def test_job_matrices_come_from_the_plan_job(name: str, job: str, output: str) -> None:
    spec = read(name)["jobs"][job]
    assert spec["needs"] == "plan" or "plan" in spec["needs"]
    assert spec["strategy"]["matrix"] == f"${{{{ fromJSON(needs.plan.outputs.{output}) }}}}"
    runs_on = spec["runs-on"]
    assert runs_on in HOSTED_RUNNERS or runs_on == "${{ matrix.runner }}"


def test_plan_jobs_run_the_toolkit() -> None:
    release_runs = " ".join(s.get("run", "") for s in read("release.yml")["jobs"]["plan"]["steps"])
    assert 'python -m release plan --github release --tag "$TAG"' in release_runs
    hardware_runs = " ".join(s.get("run", "") for s in read("hardware.yml")["jobs"]["plan"]["steps"])
    assert "python -m release plan --github hardware" in hardware_runs
    ci_runs = " ".join(s.get("run", "") for s in read("ci.yml")["jobs"]["plan"]["steps"])
    assert 'python -m release plan --github ci --python "$TOOLKIT_PYTHON"' in ci_runs


@pytest.mark.parametrize("name", NAMES)
def test_no_python_lives_in_the_workflows(name: str) -> None:
    """Every step calls toolkit commands: no inline interpreter, no heredoc of Python."""
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    for marker in ("python -c", "python - ", "python -\n", "<<'EOF'", "<<EOF", "import json", "from release"):
        assert marker not in text, f"{name}: {marker!r}"


@pytest.mark.parametrize("name", NAMES)
def test_every_plan_output_a_job_reads_is_an_output_of_the_plan_job(name: str) -> None:
    """`needs.plan.outputs.X` is empty unless the plan job maps X from its step (a job matrix read
    from an unmapped output is `fromJSON('')`: the job never runs)."""
    doc = read(name)
    mapped = set(doc["jobs"]["plan"].get("outputs", {}))
    read_outputs = set(re.findall(r"needs\.plan\.outputs\.([A-Za-z0-9_-]+)", (WORKFLOWS / name).read_text()))
    assert read_outputs <= mapped


@pytest.mark.parametrize("name", NAMES)
def test_every_output_the_jobs_read_is_planned(name: str) -> None:
    """The plan job's outputs are exactly what `release plan --github` prints."""
    from release.commands.plan import github_outputs
    from release.plan.steps import make_plan

    workflow = name.removesuffix(".yml")
    outputs = set(read(name)["jobs"]["plan"].get("outputs", {}))
    printed = set(
        github_outputs(make_plan(load(ROOT / "matrix.yaml")), workflow, tag="v0.1.0", python="3.12")
    )
    assert outputs - {"tag"} <= printed


def test_hardware_runs_on_the_planned_runner_labels() -> None:
    doc = read("hardware.yml")
    for job in ("device", "prefill", "decode"):
        assert doc["jobs"][job]["runs-on"] == "${{ matrix.runner }}"


def test_hardware_has_no_inline_program() -> None:
    """Every run: step is one line and every env value one word or expression: the logic (image,
    devices, handshake) lives in `release hardware`, which the rehearsal and the tests run."""
    doc = read("hardware.yml")
    for where, env in [("env", doc.get("env", {}))] + [
        (f"jobs.{j}.env", job.get("env", {})) for j, job in doc["jobs"].items()
    ]:
        for key, value in env.items():
            assert "\n" not in str(value), f"{where}.{key} is a multi-line value (a program in YAML)"
    for job, step in steps(doc):
        if "run" in step:
            lines = [ln for ln in step["run"].splitlines() if ln.strip()]
            assert len(lines) == 1, (job, step.get("name"), lines)
    workflow.load(WORKFLOWS / "hardware.yml")  # every step is one the rehearsal can map


def test_hardware_legs_are_release_hardware_commands() -> None:
    doc = read("hardware.yml")
    runs = {j: [s["run"] for s in job["steps"] if "run" in s] for j, job in doc["jobs"].items()}
    single = next(r for r in runs["device"] if "release hardware" in r)
    assert '--release "$TAG"' in single and '--image "$CONTAINER"' in single and "--role single" in single
    prefill = [r for r in runs["prefill"] if "release hardware" in r]
    assert "--detach" in prefill[0] and "--attach" in prefill[1]
    assert "--master-host 0.0.0.0" in prefill[0]  # the decode node reaches this host's master
    assert '--done-artifact "$IDENTIFIER-done"' in prefill[1]
    decode = next(r for r in runs["decode"] if "release hardware" in r)
    assert '--address-artifact "$IDENTIFIER-address"' in decode
    upload = "actions/upload-artifact@"
    uploads = {
        j: [s["with"]["name"] for s in job["steps"] if s.get("uses", "").startswith(upload)]
        for j, job in doc["jobs"].items()
    }
    assert uploads["prefill"] == ["${{ matrix.identifier }}-address"]
    assert uploads["decode"] == ["${{ matrix.identifier }}-done"]
    for job in ("prefill", "decode"):
        assert doc["jobs"][job]["permissions"]["actions"] == "read"  # gh run download


def test_build_job_uses_the_toolkit_configuration() -> None:
    build = read("release.yml")["jobs"]["build"]
    runs = [s.get("run", "") for s in build["steps"]]
    # No --python: the job builds every Python of its variant in one container run.
    assert any("python -m release build" in r and "--container" in r and "--python" not in r for r in runs)
    assert any("python -m release verify --release" in r for r in runs)
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "${{ matrix.job }}"
    # The smoke jobs download the job's artifact that holds their wheel.
    for job in ("smoke", "smoke-image"):
        steps = read("release.yml")["jobs"][job]["steps"]
        download = next(s for s in steps if s.get("uses", "").startswith("actions/download-artifact@"))
        assert download["with"]["name"] == "${{ matrix.artifact }}"


def test_one_build_job_per_variant_and_machine(loaded: LoadedMatrix) -> None:
    """release.yml's build matrix has one entry per variant and machine, listing every Python of
    the variant; each build step names that job as its artifact (what the smoke jobs download)."""
    made = make_plan(loaded)
    jobs = plan.build_jobs(made)
    names = {f"{s.variant.name}-{machine_of(s.variant)}" for s in made.builds}
    assert sorted(j["job"] for j in jobs) == sorted(names)
    assert {"cpu-aarch64", "cuda-aarch64"} <= {j["job"] for j in jobs}  # rocm: x86_64 by its backend data
    for job in jobs:
        steps = [s for s in made.builds if plan.build_job_name(s) == job["job"]]
        assert job["pythons"] == " ".join(s.python for s in steps)
        assert job["identifiers"] == [s.identifier for s in steps]
        assert job["runner"] == steps[0].to_json()["runner"]


def test_publish_uses_trusted_publishing() -> None:
    doc = read("release.yml")
    job = doc["jobs"]["publish-pypi"]
    assert set(job["needs"]) >= {"build", "smoke", "smoke-image"}
    assert job["environment"]["name"] == "${{ needs.plan.outputs.environment }}"
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    runs = " ".join(s.get("run", "") for s in job["steps"])
    assert 'python -m release publish --tag "$TAG" --dry-run' in runs
    publish = next(s for s in job["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@"))
    assert publish["with"]["attestations"] is True
    assert "password" not in publish["with"]
    gh = doc["jobs"]["github-release"]
    assert gh["needs"] == ["plan", "publish-pypi"]
    assert gh["permissions"] == {"contents": "write", "id-token": "write", "attestations": "write"}
    attest = next(s for s in gh["steps"] if s.get("uses", "").startswith("actions/attest-build-provenance@"))
    assert attest["with"]["subject-path"] == "artifacts/release-manifest.json"


def _plan_json(loaded: LoadedMatrix, capsys: pytest.CaptureFixture[str], *, smoke: bool = False) -> list[Any]:
    args = argparse.Namespace(select=None, json=True, smoke=smoke, github=None, variant=None, no_probe=True)
    assert plan.run(args, loaded) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    assert isinstance(include, list)
    return include


def test_a_new_variant_gets_jobs_without_a_workflow_edit(
    tmp_path: Path, loaded: LoadedMatrix, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    extra = (
        "  rocm6:\n"
        "    distribution: xfer-engine-rocm6\n"
        "    backend: rocm\n"
        '    toolkit: "6.4"\n'
        "    cmake_defines: {XFER_BACKEND: hip}\n"
        '    exclude: ["libamdhip64.so*", "libhsa-runtime64.so*"]\n'
        "    images: [vllm-rocm]\n"
        "    hardware: [mi355x]\n"
        "\n"
    )
    (tmp_path / "engine").symlink_to(ROOT / "engine")  # engine.source must hold the project
    grown = loads(
        text.replace("\nimages:\n", "\n" + extra + "images:\n", 1),
        path=tmp_path / "matrix.yaml",
        backends_dir=ROOT / "packaging" / "backends",
    )
    before = _plan_json(loaded, capsys)
    after = _plan_json(grown, capsys)
    added = [s for s in after if s not in before]
    assert [s["identifier"] for s in added] == [
        f"cp{py.replace('.', '')}-rocm6-manylinux_x86_64" for py in loaded.matrix.python
    ]
    assert {s["variant"] for s in added} == {"rocm6"}
    # Every key the build jobs read from `matrix.` is in each entry.
    used = matrix_keys("release.yml")
    assert used - {"runner", "container", "image", "artifact", "job", "pythons"} <= set(added[0])
    # ... and the build job's own entry (one per variant and machine) carries the rest.
    job = next(j for j in plan.build_jobs(make_plan(grown)) if j["variant"] == "rocm6")
    assert {"job", "pythons", "variant", "machine", "runner"} <= set(job)
    assert job["pythons"] == " ".join(loaded.matrix.python)
    smoke_added = [s for s in _plan_json(grown, capsys, smoke=True) if s["variant"] == "rocm6"]
    assert [(s["image"], s["hardware"]) for s in smoke_added] == [("vllm-rocm", "mi355x")]
    # The workflows themselves need no edit: the new names are not in them and they still pass.
    for name in NAMES:
        assert literal_names(read(name), grown.matrix) == []


def test_hardware_entries_carry_what_the_jobs_read(
    loaded: LoadedMatrix, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = _plan_json(loaded, capsys, smoke=True)
    assert entries
    used = matrix_keys("hardware.yml")
    for entry in entries:
        assert used <= set(entry)
        assert isinstance(entry["runner"], list)
    assert {e["nodes"] for e in entries} == {1, 2}


def _env_names(job: dict[str, Any]) -> dict[str, str]:
    env = job.get("env") or {}
    return {k: v for k, v in env.items() if isinstance(v, str) and ("vars." in v or "secrets." in v)}


@pytest.mark.parametrize(
    ("workflow", "backends_dir"),
    [
        (WORKFLOWS / "release.yml", ROOT / "packaging" / "backends"),
        (ADOPTED / "release.yml", toolkit_backends()),
    ],
)
def test_release_passes_exactly_the_declared_inputs(workflow: Path, backends_dir: Path) -> None:
    """Each backend's `toolkit.install_env`, from a variable or secret of the same name, reaches the
    jobs that install toolkits and no other job; nothing else comes from `vars` or `secrets`."""
    declared = declared_variables(load_backends(backends_dir))
    assert "MUSA_INSTALLER" in declared
    doc = yaml.safe_load(EVERY_WORKFLOW[workflow])
    for name, job in doc["jobs"].items():
        wanted = {v: workflow_value(v) for v in declared} if name in VARIABLE_JOBS["release.yml"] else {}
        assert _env_names(job) == wanted, f"{workflow.name}: jobs.{name}"
        assert "vars." not in json.dumps(job.get("steps", [])), f"{workflow.name}: jobs.{name}: steps"
    assert "secrets." not in json.dumps(doc.get("env", {}))


@pytest.mark.parametrize("workflow", [WORKFLOWS / "ci.yml", ADOPTED / "ci.yml"], ids=str)
def test_ci_runs_release_ready_with_whether_each_input_is_set(workflow: Path) -> None:
    declared = declared_variables(load_backends(toolkit_backends()))
    doc = yaml.safe_load(EVERY_WORKFLOW[workflow])
    for name, job in doc["jobs"].items():
        wanted = {v: presence_value(v) for v in declared} if name in VARIABLE_JOBS["ci.yml"] else {}
        assert _env_names(job) == wanted, f"{workflow.name}: jobs.{name}"
    runs = [s.get("run", "") for s in doc["jobs"]["ready"]["steps"]]
    assert any(r.endswith("release ready") for r in runs)
    assert doc["jobs"]["ready"]["permissions"] == {"contents": "read"}


def test_the_upload_environment_comes_from_the_plan(loaded: LoadedMatrix) -> None:
    from release.commands.plan import github_outputs
    from release.plan.steps import make_plan

    the_plan = make_plan(loaded)
    assert github_outputs(the_plan, "release", tag="v0.2.0")["environment"] == "pypi"
    assert github_outputs(the_plan, "release", tag="v0.2.0rc1")["environment"] == "testpypi"
    assert "environment" in read("release.yml")["jobs"]["plan"]["outputs"]


@pytest.mark.parametrize("workflow", [WORKFLOWS / "ci.yml", ADOPTED / "ci.yml"], ids=str)
def test_ci_probes_the_serving_images_when_their_declarations_change(workflow: Path) -> None:
    """The images job pulls (bounded) and probes every serving image when matrix.yaml or the
    facts file changed, and weekly; a missing fact for a pinned image fails it."""
    doc = yaml.safe_load(EVERY_WORKFLOW[workflow])
    assert doc[True]["schedule"], "a weekly run catches a tag that moved"  # YAML 1.1 reads `on` as True
    job = doc["jobs"]["images"]
    assert job["permissions"] == {"contents": "read"} and job["timeout-minutes"] <= 60
    assert job["env"] == {"BASE": "${{ github.event.pull_request.base.sha }}"}
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # --changed-since needs the base commit
    (run,) = [s["run"] for s in job["steps"] if "images probe" in s.get("run", "")]
    assert run.split("images probe", 1)[1].split() == [
        "--pull",
        "--pull-timeout",
        "1800",
        "--write",
        "--require",
        "--changed-since",
        '"$BASE"',
    ]
    # What the probe wrote (a `pin: probe` tag's digest) must be committed: the job fails until
    # it is, and hands the file over as an artifact.
    names = [s.get("name", "") for s in job["steps"]]
    facts_step = "The facts file holds what the probe recorded (digests of pin-probe tags)"
    check = job["steps"][names.index(facts_step)]
    assert check["run"].startswith("git diff --exit-code -- images.facts.json ||")
    upload = job["steps"][-1]
    assert upload["if"] == "failure()" and upload["with"]["path"] == "images.facts.json"
