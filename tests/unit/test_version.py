"""Tag -> version, pre-release routing and the build version."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from release.config import matrix as matrix_mod
from release.errors import UsageError
from release.plan.version import build_version, is_prerelease, route, tag_from_env, version_from_tag

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def loaded() -> matrix_mod.LoadedMatrix:
    return matrix_mod.load(ROOT / "matrix.yaml")


def _with_publish(loaded: matrix_mod.LoadedMatrix, **changes: object) -> matrix_mod.LoadedMatrix:
    publish = dataclasses.replace(loaded.matrix.publish, **changes)  # type: ignore[arg-type]
    return dataclasses.replace(loaded, matrix=dataclasses.replace(loaded.matrix, publish=publish))


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("v0.3.13", "0.3.13"),
        ("v0.3.13.post1", "0.3.13.post1"),
        ("v1.0.0rc1", "1.0.0rc1"),
        ("v1.0.0-RC1", "1.0.0rc1"),
        ("v2.0.dev3", "2.0.dev3"),
        ("refs/tags/v0.1.0", "0.1.0"),
    ],
)
def test_accepted_tags_are_normalized(tag: str, expected: str) -> None:
    assert version_from_tag(tag, "v*") == expected


def test_other_pattern_prefix_is_stripped() -> None:
    assert version_from_tag("release-1.2.3", "release-*") == "1.2.3"


@pytest.mark.parametrize("tag", ["0.3.13", "release-1.0", "x1.0"])
def test_tag_outside_pattern_is_refused_naming_tag_and_pattern(tag: str) -> None:
    with pytest.raises(UsageError) as info:
        version_from_tag(tag, "v*")
    assert repr(tag) in str(info.value)
    assert "'v*'" in str(info.value)


@pytest.mark.parametrize("tag", ["vnext", "v1.0.0-beta.x", "v"])
def test_invalid_version_is_refused(tag: str) -> None:
    with pytest.raises(UsageError, match="PEP 440"):
        version_from_tag(tag, "v*")


def test_local_version_is_refused() -> None:
    with pytest.raises(UsageError, match="local"):
        version_from_tag("v1.0+abc", "v*")


@pytest.mark.parametrize(
    ("version", "pre"),
    [("1.0.0", False), ("1.0.0rc1", True), ("1.0.0a1", True), ("1.0.dev1", True), ("0.3.13.post1", False)],
)
def test_is_prerelease(version: str, pre: bool) -> None:
    assert is_prerelease(version) is pre


def test_route(loaded: matrix_mod.LoadedMatrix) -> None:
    assert route(loaded.matrix, "1.0.0") == "https://upload.pypi.org/legacy/"
    assert route(loaded, "1.0.0rc1") == "https://test.pypi.org/legacy/"
    same = _with_publish(loaded, prerelease="publish")
    assert route(same.matrix, "1.0.0rc1") == "https://upload.pypi.org/legacy/"
    skip = _with_publish(loaded, prerelease="skip")
    assert route(skip.matrix, "1.0.0rc1") is None
    assert route(skip.matrix, "1.0.0") == "https://upload.pypi.org/legacy/"


def test_build_version_order(loaded: matrix_mod.LoadedMatrix) -> None:
    ci = {"GITHUB_REF_TYPE": "tag", "GITHUB_REF_NAME": "v0.2.0"}
    assert build_version(loaded, "v0.3.13", env=ci) == "0.3.13"
    assert build_version(loaded, None, env=ci) == "0.2.0"
    branch = {"GITHUB_REF_TYPE": "branch", "GITHUB_REF_NAME": "main"}
    assert build_version(loaded, None, env=branch) == loaded.matrix.engine.version
    assert build_version(loaded, None, env={}) == loaded.matrix.engine.version


def test_build_version_reads_os_environ(
    loaded: matrix_mod.LoadedMatrix, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_REF_TYPE", "tag")
    monkeypatch.setenv("GITHUB_REF_NAME", "v1.0.0rc1")
    assert tag_from_env() == "v1.0.0rc1"
    assert build_version(loaded, None) == "1.0.0rc1"
