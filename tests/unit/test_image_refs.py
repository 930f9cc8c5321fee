"""Serving images by digest: references are parsed and checked, and a release plan refuses a
serving image that a release job would run by tag only (other plans warn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release import cli
from release.config.checks import unpinned_serving_images
from release.config.imageref import parse_image_reference
from release.config.matrix import LoadedMatrix, loads
from release.errors import MatrixError

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "packaging" / "backends"
_LINES = (ROOT / "matrix.yaml").read_text(encoding="utf-8").splitlines()
VLLM_LINE, SGLANG_LINE = (
    next(i for i, line in enumerate(_LINES, 1) if line.strip().startswith("container:") and image in line)
    for image in ("vllm-openai-rocm", "lmsysorg/sglang")
)
"""Where the committed matrix declares the two serving images (error messages name these lines)."""
VLLM = "docker.io/vllm/vllm-openai-rocm:v0.21.0"
SGLANG = "docker.io/lmsysorg/sglang:v0.5.11-rocm720-mi30x"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def _matrix(tmp_path: Path, **replace: str) -> Path:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("source: engine", f"source: {ROOT / 'engine'}", 1)
    for old, new in replace.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _loaded(path: Path) -> LoadedMatrix:
    return loads(path.read_text(encoding="utf-8"), path=path, backends_dir=BACKENDS)


@pytest.mark.parametrize(
    ("text", "name", "tag", "pinned"),
    [
        (VLLM, "docker.io/vllm/vllm-openai-rocm", "v0.21.0", False),
        (f"{VLLM}@{DIGEST}", "docker.io/vllm/vllm-openai-rocm", "v0.21.0", True),
        (SGLANG, "docker.io/lmsysorg/sglang", "v0.5.11-rocm720-mi30x", False),
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
    assert problem.line == VLLM_LINE
    assert fragment in problem.message


def test_tag_only_serving_images_are_named_with_the_fix(tmp_path: Path) -> None:
    loaded = _loaded(_matrix(tmp_path))
    problems = unpinned_serving_images(loaded.matrix, loaded.lines, "matrix.yaml")
    assert [p.key for p in problems] == ["images.vllm-rocm.container", "images.sglang-rocm.container"]
    assert [p.line for p in problems] == [VLLM_LINE, SGLANG_LINE]
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
    assert err.startswith(f"error: matrix.yaml:{VLLM_LINE}: images.vllm-rocm.container: ")
    assert f"matrix.yaml:{SGLANG_LINE}: images.sglang-rocm.container: " in err
    assert "Traceback" not in err
    # A backfill of a variant that runs no serving image is not held up by them.
    backfill = ["--matrix", path, "plan", "--github", "release", "--tag", "v0.1.0", "--variant", "cuda"]
    assert cli.main(backfill) == 0


def test_other_plans_warn_and_succeed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_matrix(tmp_path))
    assert cli.main(["--matrix", path, "plan"]) == 0
    out, err = capsys.readouterr()
    assert "build steps" in out
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2
    assert "images.vllm-rocm.container" in warnings[0]


def test_a_pinned_release_plan_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_matrix(tmp_path, **{VLLM: f"{VLLM}@{DIGEST}", SGLANG: f"{SGLANG}@{DIGEST}"}))
    assert cli.main(["--matrix", path, "plan", "--github", "release", "--tag", "v0.1.0"]) == 0
    out, err = capsys.readouterr()
    assert f'"container":"{VLLM}@{DIGEST}"' in out
    assert "warning" not in err
