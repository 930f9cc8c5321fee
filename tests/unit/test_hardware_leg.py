"""The pure parts of `release hardware` and of the rehearsal's hardware.yml support: the GPU
device flags a host gives a container, the pull failure's message, the stand-in mapping, the
release asset pattern, the `gh` stand-in's answers and the concurrent prefill/decode jobs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from release import cli, process
from release.commands import hardware
from release.config.backends import load_backends
from release.config.matrix import load
from release.errors import SmokeError, UsageError
from release.hardware import emulated
from release.hardware.container import ensure_image, pull_failure
from release.hardware.fetch import wheel_pattern
from release.machine import containers as smoke_container
from release.machine.containers import ContainerEngine, standins
from release.machine.devices import device_flags
from release.plan.steps import make_plan
from release.rehearse import gh_standin, workflow

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("backend", "nodes", "nvidia_smi", "flags"),
    [
        ("rocm", {"/dev/kfd", "/dev/dri"}, False,
         ["--device=/dev/kfd", "--device=/dev/dri", "--group-add", "video", "--ipc=host"]),
        ("rocm", {"/dev/dri"}, True, ["--ipc=host"]),
        ("rocm", set(), False, ["--ipc=host"]),
        ("rocm", {"/dev/kfd"}, False, ["--device=/dev/kfd", "--group-add", "video", "--ipc=host"]),
        ("cuda", {"/dev/kfd", "/dev/dri"}, True, ["--gpus", "all", "--ipc=host"]),
        ("cuda", set(), False, ["--ipc=host"]),
        ("cpu", {"/dev/kfd", "/dev/dri"}, True, ["--ipc=host"]),
    ],
)  # fmt: skip
def test_device_flags_are_the_backends_data_as_far_as_the_host_has_them(
    backend: str, nodes: set[str], nvidia_smi: bool, flags: list[str]
) -> None:
    """/dev/dri alone (an Intel or display GPU) is no compute device: only /dev/kfd means AMD; a
    backend's container gets its own backend's devices only."""
    needs = load_backends(ROOT / "packaging" / "backends")[backend].container
    which = (lambda name: f"/usr/bin/{name}" if nvidia_smi else None)  # noqa: E731
    assert device_flags(needs, exists=nodes.__contains__, which=which) == flags


def test_a_digest_pull_failure_names_the_reference_and_the_fix() -> None:
    reference = f"docker.io/vllm/vllm-openai-rocm:v0.21.0@{DIGEST}"
    text = pull_failure(
        reference, "docker", "Error: manifest unknown\n", "matrix.yaml:112: images.vllm-rocm.container"
    )
    assert reference in text
    assert "manifest unknown" in text
    assert "matrix.yaml:112: images.vllm-rocm.container" in text
    assert "skopeo inspect docker://docker.io/vllm/vllm-openai-rocm:v0.21.0" in text
    assert "docker.io/vllm/vllm-openai-rocm:v0.21.0@sha256:<digest>" in text
    assert f"docker pull {reference}" in text


def test_a_tag_pull_failure_says_to_pin_it() -> None:
    text = pull_failure("docker.io/x/y:1", "podman", "")
    assert "docker.io/x/y:1" in text and "pin it by digest" in text and "no output" in text


def test_the_serving_image_is_pulled_by_the_smoke_pull_with_the_hardware_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hardware and smoke share one pull (`ContainerEngine.pull`); each words the failure."""
    ran: list[list[str]] = []

    def engine(argv: list[str], **_options: object) -> process.Result:
        ran.append(argv)
        return process.Result(tuple(argv), 125, "", "Error: manifest unknown\n")

    monkeypatch.setattr(smoke_container.process, "run", engine)
    with pytest.raises(SmokeError) as raised:
        declared = "matrix.yaml:9: images.y.container"
        ensure_image(ContainerEngine("podman"), "docker.io/x/y:1", lambda _line: None, declared)
    assert str(raised.value) == pull_failure(
        "docker.io/x/y:1", "podman", "Error: manifest unknown\n", "matrix.yaml:9: images.y.container"
    )
    with pytest.raises(SmokeError, match=r"^cannot pull docker.io/x/y:1: Error: manifest unknown$"):
        ContainerEngine("podman").pull("docker.io/x/y:1", log=lambda _line: None)
    assert [a[:3] for a in ran] == [["podman", "image", "inspect"], ["podman", "pull", "docker.io/x/y:1"]] * 2


def test_standins_parse_references_with_colons_and_digests() -> None:
    value = f"docker.io/a/b:1=localhost/b, docker.io/c/d:2@{DIGEST}=localhost/d"
    assert standins(value) == {"docker.io/a/b:1": "localhost/b", f"docker.io/c/d:2@{DIGEST}": "localhost/d"}
    assert standins("") == {}
    with pytest.raises(SmokeError, match="'localhost-only' is not REFERENCE=LOCAL_TAG"):
        standins("localhost-only")


def test_the_release_asset_pattern_is_the_wheel_file_name_spelling() -> None:
    assert wheel_pattern("xfer-engine-rocm", "3.12") == "xfer_engine_rocm-*-cp312-cp312-*.whl"
    assert wheel_pattern("Foo.Bar", "3.10") == "foo_bar-*-cp310-cp310-*.whl"
    assert wheel_pattern("xfer-engine", "3.14t") == "xfer_engine-*-cp314-cp314t-*.whl"  # a t wheel's name


def _args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {
        "role": "single", "address_file": None, "detach": False, "attach": False,
        "address_artifact": None, "done_artifact": None, "machine": None, "image": None, "index": None,
    }  # fmt: skip
    return argparse.Namespace(**{**defaults, **given})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"role": "decode"}, "--role decode needs --address-file"),
        ({"detach": True}, "--detach and --attach are for --role prefill"),
        ({"role": "prefill", "address_file": "a", "detach": True, "attach": True}, "give one"),
        ({"address_artifact": "x"}, "--address-artifact is for --role decode"),
        ({"role": "prefill", "address_file": "a", "done_artifact": "x"}, "--done-artifact goes with"),
    ],
)
def test_contradictory_arguments_are_usage_errors(given: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        hardware._check_arguments(_args(**given))


def test_an_image_leg_needs_the_python_named_with_its_version() -> None:
    assert hardware._named_version("python3.12") == "3.12"
    assert hardware._named_version("/opt/python/cp312-cp312/bin/python3.12") == "3.12"
    with pytest.raises(UsageError, match=r"python3\.12"):
        hardware._named_version("python3")


def _gh(store: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = gh_standin.main([str(store), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_gh_stand_in_answers_what_hardware_yml_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, repo = tmp_path / "store", ["--repo", "o/r"]
    release = store / "releases" / "o" / "r" / "v0.2.0"
    release.mkdir(parents=True)
    for name in ("a_b-0.2.0-cp312-cp312-x.whl", "a_b-0.2.0-cp312-cp312-x.whl.verify.json",
                 "a_b-0.2.0-cp313-cp313-x.whl", "c-0.2.0-cp312-cp312-x.whl"):  # fmt: skip
        (release / name).write_text(name)
    code, out, _ = _gh(store, "release", "view", "--json", "tagName", "--jq", '"tag=" + .tagName', *repo,
                       capsys=capsys)  # fmt: skip
    assert (code, out) == (0, "tag=v0.2.0\n")
    pattern = wheel_pattern("a-b", "3.12")
    into = tmp_path / "into"
    code, _, _ = _gh(store, "release", "download", "v0.2.0", "--dir", str(into), "--pattern", pattern,
                     "--pattern", f"{pattern}.verify.json", *repo, capsys=capsys)  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in into.iterdir()) == [
        "a_b-0.2.0-cp312-cp312-x.whl", "a_b-0.2.0-cp312-cp312-x.whl.verify.json"
    ]  # fmt: skip
    code, _, err = _gh(store, "run", "download", "1", "--name", "leg-address", "--dir", str(into), *repo,
                       capsys=capsys)  # fmt: skip
    assert code == 1 and "no artifact matches" in err
    artifact = store / "runs" / "1" / "artifacts" / "leg-address"
    artifact.mkdir(parents=True)
    (artifact / "address.json").write_text(json.dumps({"master": "10.0.0.1:7000"}))
    code, _, _ = _gh(store, "run", "download", "1", "--name", "leg-address", "--dir", str(into), *repo,
                     capsys=capsys)  # fmt: skip
    assert code == 0 and json.loads((into / "address.json").read_text())["master"] == "10.0.0.1:7000"


def test_hardware_yml_is_a_dispatch_whose_pair_jobs_run_together() -> None:
    flow = workflow.load(ROOT / ".github" / "workflows" / "hardware.yml")
    assert flow.event == "workflow_dispatch"
    assert "tag" in flow.inputs
    assert [j.id for j in flow.concurrent(flow.jobs["prefill"])] == ["prefill", "decode"]
    assert flow.concurrent(flow.jobs["device"]) == [flow.jobs["device"]]
    assert flow.concurrent(flow.jobs["plan"]) == []  # no matrix: runs alone
    release = workflow.load(ROOT / ".github" / "workflows" / "release.yml")
    assert release.event == "push"
    assert all(len(release.concurrent(j)) <= 1 for j in release.jobs.values())


def test_another_machines_leg_runs_here_only_under_emulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """--machine aarch64 on an x86_64 host: from a release, wheelhouse or file, never in a serving
    image or from an index (both are this machine's); and each thing emulation needs is named."""
    monkeypatch.setattr(hardware, "host_machine", lambda: "x86_64")
    for given in ({"image": "docker.io/x/y:1"}, {"index": "http://127.0.0.1/simple"}):
        with pytest.raises(UsageError, match="only under emulation, from --release, --wheelhouse or --wheel"):
            hardware._check_arguments(_args(machine="aarch64", **given))
    hardware._check_arguments(_args(machine="x86_64", image="docker.io/x/y:1"))  # this machine's: as before
    cuda = make_plan(load(ROOT / "matrix.yaml")).variant("cuda")
    monkeypatch.setattr(emulated, "emulation_missing", lambda machine: "")
    monkeypatch.setattr(emulated, "host_machine", lambda: "x86_64")
    monkeypatch.setattr(emulated, "cross_image_present", lambda engine, variant, machine: False)

    def refusal(version: str = "3.13", engine: str | None = "podman") -> str:
        return emulated._refusal(cuda, "aarch64", version, engine)

    assert "Debian's Python 3.13 of aarch64 only, not 3.12" in refusal("3.12")
    assert refusal().endswith("-cross-aarch64 here (`release build --variant cuda --arch aarch64` makes it)")
    assert "no container engine" in refusal(engine=None)
    monkeypatch.setattr(emulated, "emulation_missing", lambda machine: "no binfmt_misc entry for aarch64")
    said = "--machine aarch64: this x86_64 machine runs no aarch64 programs: no binfmt_misc entry for aarch64"
    assert refusal() == said
    monkeypatch.setattr(emulated, "emulation_missing", lambda machine: "")
    monkeypatch.setattr(emulated, "cross_image_present", lambda engine, variant, machine: True)
    assert refusal() == ""
    monkeypatch.setattr(ContainerEngine, "answering", staticmethod(lambda: None))
    with (
        pytest.raises(SmokeError, match="no container engine"),
        emulated.emulated_leg(cuda, "aarch64", "3.13", wheel=Path("w.whl"), target=Path("t"), exchange=None),
    ):
        pass


def test_a_machine_the_variant_does_not_release_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--matrix", str(ROOT / "matrix.yaml"), "hardware", "--variant", "rocm",
                     "--machine", "aarch64", "--python", "python3.13"])  # fmt: skip
    assert code != 0
    assert "--machine aarch64: variant rocm is released for x86_64 only" in capsys.readouterr().err
