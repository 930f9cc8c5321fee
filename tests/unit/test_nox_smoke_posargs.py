"""`nox -s build_cpu-3.12 smoke_cpu-3.12 -- --container` (issue 58, item 7): nox hands the same
arguments to both sessions; the smoke session leaves out the build's placement flags (with their
values) instead of failing on them, and passes every other argument on."""

from __future__ import annotations

from release.nox_sessions import smoke_posargs


def test_the_smoke_session_leaves_out_build_placement_flags() -> None:
    kept, dropped = smoke_posargs(
        ["--container", "--jobs", "2", "--image", "host", "--lock-wait=5", "--json"]
    )
    assert kept == ["--image", "host", "--json"]
    assert dropped == ["--container", "--jobs", "2", "--lock-wait=5"]


def test_smoke_arguments_pass_unchanged() -> None:
    assert smoke_posargs(["--image", "vllm-rocm", "--verbose"]) == (["--image", "vllm-rocm", "--verbose"], [])
