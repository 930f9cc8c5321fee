"""Serving images by digest: references are parsed and checked, and a release plan refuses a
serving image that a release job would run by tag only (other plans warn)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from release import cli
from release.config.checks import unpinned_serving_images
from release.config.imageref import parse_image_reference
from release.config.matrix import LoadedMatrix, loads
from release.errors import MatrixError
from release.plan.steps import make_plan
from release.smoke.probe import registry_digest

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
VLLM = "docker.io/vllm/vllm-openai-rocm:v0.21.0"
SGLANG = "docker.io/lmsysorg/sglang:v0.5.16-rocm720-mi30x"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def _matrix(tmp_path: Path, **replace: str) -> Path:
    """A copy of matrix.yaml whose serving images are tag-only (the repository pins them), then edited."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    pinned = f'"({re.escape(VLLM)}|{re.escape(SGLANG)})@sha256:[0-9a-f]{{64}}"'
    text = re.sub(pinned, r'"\1"', text)
    for old, new in replace.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _line_of(reference: str) -> int:
    """The line of matrix.yaml that declares this container reference."""
    lines = (ROOT / "matrix.yaml").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if f'container: "{reference}' in line)


def _loaded(path: Path) -> LoadedMatrix:
    return loads(path.read_text(encoding="utf-8"), path=path, backends_dir=BACKENDS)


@pytest.mark.parametrize(
    ("text", "name", "tag", "pinned"),
    [
        (VLLM, "docker.io/vllm/vllm-openai-rocm", "v0.21.0", False),
        (f"{VLLM}@{DIGEST}", "docker.io/vllm/vllm-openai-rocm", "v0.21.0", True),
        (SGLANG, "docker.io/lmsysorg/sglang", "v0.5.16-rocm720-mi30x", False),
        (f"docker.io/rocm/vllm@{DIGEST}", "docker.io/rocm/vllm", None, True),
        ("registry.example:5000/team/image:1.0", "registry.example:5000/team/image", "1.0", False),
        ("localhost/xfer-smoke-rocm-distro:6.4", "localhost/xfer-smoke-rocm-distro", "6.4", False),
        ("ubuntu", "ubuntu", None, False),
    ],
)
def test_references_parse(text: str, name: str, tag: str | None, pinned: bool) -> None:
    ref = parse_image_reference(text)
    assert (ref.name, ref.tag, ref.pinned) == (name, tag, pinned)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (f"{VLLM}@sha256:abc", "is not sha256:<64 lowercase hex digits>"),
        (f"{VLLM}@md5:{'0' * 32}", "is not sha256:"),
        ("docker.io/ROCm/vllm:x", "is not lowercase path components"),
        ("docker.io/rocm/vllm:bad tag", "is not a tag"),
        (" docker.io/rocm/vllm", "surrounding spaces"),
    ],
)
def test_bad_references_are_located_matrix_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = _matrix(tmp_path, **{f'"{VLLM}"': repr(text).replace("'", '"')})
    with pytest.raises(MatrixError) as info:
        _loaded(path)
    (problem,) = info.value.problems
    assert problem.key == "images.vllm-rocm.container"
    assert problem.line == _line_of(VLLM)
    assert fragment in problem.message


def test_tag_only_serving_images_are_named_with_the_fix(tmp_path: Path) -> None:
    loaded = _loaded(_matrix(tmp_path))
    problems = unpinned_serving_images(loaded.matrix, loaded.lines, "matrix.yaml")
    assert [p.key for p in problems] == ["images.vllm-rocm.container", "images.sglang-rocm.container"]
    assert [p.line for p in problems] == [_line_of(VLLM), _line_of(SGLANG)]
    assert f"pin it by digest, `{VLLM}@sha256:<digest>`" in problems[0].message
    assert f"skopeo inspect docker://{SGLANG}" in problems[1].message
    assert unpinned_serving_images(loaded.matrix, loaded.lines, "matrix.yaml", ["cpu", "cuda"]) == []


def test_digests_satisfy_the_check(tmp_path: Path) -> None:
    path = _matrix(tmp_path, **{VLLM: f"{VLLM}@{DIGEST}", SGLANG: f"{SGLANG}@{DIGEST}"})
    loaded = _loaded(path)
    assert unpinned_serving_images(loaded.matrix, loaded.lines, "matrix.yaml") == []


def test_a_release_plan_refuses_tags_and_writes_no_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(_matrix(tmp_path))
    assert cli.main(["--matrix", path, "plan", "--github", "release", "--tag", "v0.1.0"]) == 3
    out, err = capsys.readouterr()
    assert out == "", "nothing may reach $GITHUB_OUTPUT"
    assert err.startswith(f"error: matrix.yaml:{_line_of(VLLM)}: images.vllm-rocm.container: ")
    assert f"matrix.yaml:{_line_of(SGLANG)}: images.sglang-rocm.container: " in err
    assert "Traceback" not in err
    # A backfill of a variant that runs no serving image is not held up by them.
    backfill = ["--matrix", path, "plan", "--github", "release", "--tag", "v0.1.0", "--variant", "cuda"]
    assert cli.main(backfill) == 0


def test_other_plans_warn_and_succeed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_matrix(tmp_path))
    assert cli.main(["--matrix", path, "plan"]) == 0
    out, err = capsys.readouterr()
    assert "build steps" in out
    warnings = [
        line for line in err.splitlines() if line.startswith("warning: ") and "hardware names" not in line
    ]
    assert len(warnings) == 2  # the two unpinned images (the Grace tiers' lines are test_plan_machines')
    assert "images.vllm-rocm.container" in warnings[0]


def test_a_pinned_release_plan_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_matrix(tmp_path, **{VLLM: f"{VLLM}@{DIGEST}", SGLANG: f"{SGLANG}@{DIGEST}"}))
    assert cli.main(["--matrix", path, "plan", "--github", "release", "--tag", "v0.1.0"]) == 0
    out, err = capsys.readouterr()
    assert f'"container":"{VLLM}@{DIGEST}"' in out
    assert "warning" not in err


def test_the_repository_pins_its_serving_images() -> None:
    loaded = _loaded(ROOT / "matrix.yaml")
    assert unpinned_serving_images(loaded.matrix, loaded.lines, "matrix.yaml") == []


ROCM10 = "docker.io/lmsysorg/sglang:v0.5.21-rocm10-mi35x"
AWAITING = {"vllm-rocm-v033", "amd-vllm-rocm10", "sglang-rocm10", "sglang-rocm724"}


def _pinned_matrix(tmp_path: Path, **replace: str) -> Path:
    return _matrix(tmp_path, **{VLLM: f"{VLLM}@{DIGEST}", SGLANG: f"{SGLANG}@{DIGEST}"}, **replace)


def _record(tmp_path: Path, name: str, reference: str, *, digest: str, source: str) -> None:
    facts = {
        "schema_version": 1,
        "images": {
            name: {
                "reference": reference,
                "digest": digest,
                "source": source,
                "pythons": {"3.12": "python3.12"},
            }
        },
    }
    (tmp_path / "images.facts.json").write_text(json.dumps(facts), encoding="utf-8")


def test_probe_pinned_tags_await_their_digest_and_no_job_runs_in_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pin: probe` tags without a recorded digest: listed, never run by tag, never refused."""
    path = _pinned_matrix(tmp_path)
    plan = make_plan(_loaded(path))
    assert set(plan.awaiting) == AWAITING
    assert plan.awaiting["sglang-rocm10"] == ROCM10
    assert not [s for s in plan.images if s.image.name in AWAITING]
    assert not [s for s in plan.smokes if s.image in AWAITING]
    assert cli.main(["--matrix", str(path), "plan", "--github", "release", "--tag", "v0.1.0"]) == 0
    out, err = capsys.readouterr()
    assert "rocm10" not in out and "v0.33.0" not in out, "no job may run a tag"
    line = _line_of(ROCM10)
    assert (
        f"awaiting: matrix.yaml:{line}: images.sglang-rocm10 ({ROCM10}) awaits its digest (pin: probe)" in err
    )
    assert "release images probe --pull --write" in err


def test_a_digest_a_probe_recorded_pins_the_tag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = "sha256:" + "fedcba9876543210" * 4
    path = _pinned_matrix(tmp_path)
    _record(tmp_path, "sglang-rocm10", ROCM10, digest=other, source="probe")
    loaded = _loaded(path)
    assert loaded.matrix.images["sglang-rocm10"].container == f"{ROCM10}@{other}"
    plan = make_plan(loaded)
    assert set(plan.awaiting) == AWAITING - {"sglang-rocm10"}
    assert {s.container for s in plan.smokes if s.image == "sglang-rocm10"} == {f"{ROCM10}@{other}"}
    assert cli.main(["--matrix", str(path), "plan", "--github", "release", "--tag", "v0.1.0"]) == 0
    assert f'"container":"{ROCM10}@{other}"' in capsys.readouterr().out
    # A later probe of the pinned reference keeps the pin; facts from public sources, or of
    # another tag, pin nothing.
    _record(tmp_path, "sglang-rocm10", f"{ROCM10}@{other}", digest=other, source="probe")
    assert _loaded(path).matrix.images["sglang-rocm10"].container == f"{ROCM10}@{other}"
    _record(tmp_path, "sglang-rocm10", ROCM10, digest=other, source="public")
    assert _loaded(path).matrix.images["sglang-rocm10"].container == ROCM10
    _record(tmp_path, "sglang-rocm10", ROCM10.replace("v0.5.21", "v0.5.20"), digest=other, source="probe")
    assert _loaded(path).matrix.images["sglang-rocm10"].container == ROCM10


def test_pin_probe_is_for_a_tag(tmp_path: Path) -> None:
    path = _pinned_matrix(tmp_path, **{f'"{ROCM10}"': f'"{ROCM10}@{DIGEST}"'})
    with pytest.raises(MatrixError) as info:
        _loaded(path)
    (problem,) = info.value.problems
    assert problem.key == "images.sglang-rocm10.pin"
    assert "write `container` as name:tag" in problem.message


@pytest.mark.parametrize(
    ("reference", "repo_digests", "found"),
    [
        (ROCM10, f'["docker.io/lmsysorg/sglang@{DIGEST}"]', DIGEST),
        (ROCM10, f'["lmsysorg/sglang@{DIGEST}"]', DIGEST),
        (ROCM10, f'["docker.io/lmsysorg/other@{DIGEST}"]', None),
        ("localhost/xfer-smoke-x:1", f'["localhost/xfer-smoke-x@{DIGEST}"]', None),
        (ROCM10, "null", None),
        (ROCM10, "not json", None),
    ],
)
def test_the_registry_digest_of_a_pulled_tag(reference: str, repo_digests: str, found: str | None) -> None:
    assert registry_digest(reference, repo_digests) == found
