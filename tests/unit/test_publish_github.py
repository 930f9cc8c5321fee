"""`release github-release` with an in-memory gh (no process): add what is missing, replace nothing."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from release import cli
from release.commands import github_release as command
from release.config import matrix
from release.errors import PublishError, UsageError
from release.publish import github_release as ghr

ROOT = Path(__file__).resolve().parents[2]


class FakeGh:
    """`gh release …` over a dict of releases; `digests=False` acts like an older GitHub."""

    def __init__(self, *, digests: bool = True) -> None:
        self.releases: dict[str, dict[str, bytes]] = {}
        self.calls: list[list[str]] = []
        self.digests = digests
        self.fail: dict[str, str] = {}

    def __call__(self, cmd: Sequence[str]) -> tuple[int, str, str]:
        args = list(cmd)
        self.calls.append(args)
        assert args[0] == "gh" and args[1] == "release" and args[-2] == "--repo"
        command, tag, rest = args[2], args[3], args[4:-2]
        if command in self.fail:
            return 1, "", self.fail[command]
        release = self.releases.get(tag)
        if command == "view":
            if release is None:
                return 1, "", "release not found\n"
            assets = [
                {"name": n, "size": len(d), **({"digest": "sha256:" + _sha(d)} if self.digests else {})}
                for n, d in release.items()
            ]
            return 0, json.dumps({"assets": assets}), ""
        files = [Path(a) for a in rest if not a.startswith("--") and a != tag]
        if command == "create":
            if release is not None:
                return 1, "", "a release with the same tag name already exists"
            self.releases[tag] = {f.name: f.read_bytes() for f in files}
            return 0, "", ""
        if command == "upload":
            assert "--clobber" not in rest
            assert release is not None
            if any(f.name in release for f in files):
                return 1, "", "asset under the same name already exists"
            release.update({f.name: f.read_bytes() for f in files})
            return 0, "", ""
        if command == "download":
            assert release is not None
            name, target = rest[rest.index("--pattern") + 1], Path(rest[rest.index("--dir") + 1])
            (target / name).write_bytes(release[name])
            return 0, "", ""
        return 2, "", "unknown command"

    def commands(self) -> list[str]:
        return [c[2] for c in self.calls]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    directory = tmp_path / "artifacts"
    (directory / "cpu").mkdir(parents=True)
    (directory / "cpu" / "a-1.0-py3-none-any.whl").write_bytes(b"wheel a")
    (directory / "cpu" / "a-1.0-py3-none-any.whl.verify.json").write_bytes(b"{}")
    (directory / "b-1.0-py3-none-any.whl").write_bytes(b"wheel b")
    (directory / ".hidden").write_bytes(b"not attached")
    return directory


def release(gh: FakeGh) -> ghr.GitHubRelease:
    return ghr.GitHubRelease(gh="gh", repo="acme/xfer", tag="v1.0.0", runner=gh)


def test_a_missing_release_is_created_with_every_file(dist: Path) -> None:
    gh = FakeGh()
    rows = ghr.attach(release(gh), ghr.collect([str(dist)]), prerelease=True)
    assert [status for _, status in rows] == ["uploaded (release created)"] * 3
    assert sorted(gh.releases["v1.0.0"]) == [
        "a-1.0-py3-none-any.whl", "a-1.0-py3-none-any.whl.verify.json", "b-1.0-py3-none-any.whl",
    ]  # fmt: skip
    create = gh.calls[-1]
    assert {"--verify-tag", "--generate-notes", "--prerelease"} <= set(create)


def test_only_missing_assets_are_uploaded(dist: Path) -> None:
    gh = FakeGh()
    gh.releases["v1.0.0"] = {"b-1.0-py3-none-any.whl": b"wheel b"}
    rows = dict(ghr.attach(release(gh), ghr.collect([str(dist)]), prerelease=False))
    assert rows["b-1.0-py3-none-any.whl"] == "already there"
    assert gh.commands() == ["view", "upload"]
    uploaded = [Path(a).name for a in gh.calls[-1][4:-2]]
    assert uploaded == ["a-1.0-py3-none-any.whl", "a-1.0-py3-none-any.whl.verify.json"]


@pytest.mark.parametrize("digests", [True, False])
def test_a_differing_asset_stops_everything(dist: Path, digests: bool) -> None:
    gh = FakeGh(digests=digests)
    gh.releases["v1.0.0"] = {"b-1.0-py3-none-any.whl": b"wheel B", "a-1.0-py3-none-any.whl": b"wheel a+"}
    with pytest.raises(PublishError) as info:
        ghr.attach(release(gh), ghr.collect([str(dist)]), prerelease=False)
    message = str(info.value)
    assert message.startswith("2 asset(s) of release v1.0.0 in acme/xfer differ from the local files")
    assert "  - b-1.0-py3-none-any.whl: sha256 " in message
    assert "  - a-1.0-py3-none-any.whl: 8 bytes on the release, 7 here" in message
    assert "upload" not in gh.commands()
    assert gh.commands().count("download") == (0 if digests else 1)  # only the same-size one


def test_identical_assets_without_digests_are_downloaded_once_each(dist: Path) -> None:
    gh = FakeGh(digests=False)
    files = ghr.collect([str(dist)])
    gh.releases["v1.0.0"] = {f.name: f.path.read_bytes() for f in files.values()}
    rows = ghr.attach(release(gh), files, prerelease=False)
    assert {status for _, status in rows} == {"already there"}
    assert gh.commands() == ["view", "download", "download", "download"]


def test_a_release_created_meanwhile_is_compared_not_recreated(dist: Path) -> None:
    gh = FakeGh()
    real = gh.__call__

    def racing(cmd: Sequence[str]) -> tuple[int, str, str]:
        if cmd[2] == "create":  # another run created it a moment ago, with one file
            gh.releases["v1.0.0"] = {"b-1.0-py3-none-any.whl": b"wheel b"}
        return real(cmd)

    racy = ghr.GitHubRelease("gh", "acme/xfer", "v1.0.0", runner=racing)
    rows = dict(ghr.attach(racy, ghr.collect([str(dist)]), prerelease=False))
    assert rows["b-1.0-py3-none-any.whl"] == "already there"
    assert gh.commands() == ["view", "create", "view", "upload"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "not JSON"),
        ("[]", "no assets list"),
        ('{"assets": {}}', "no assets list"),
        ('{"assets": ["x"]}', "assets[0] is not an object"),
        ('{"assets": [{"name": 1, "size": 1}]}', "assets[0].name is not a name"),
        ('{"assets": [{"name": "a", "size": "1"}]}', "assets[0].size is not a size"),
        ('{"assets": [{"name": "a", "size": true}]}', "assets[0].size is not a size"),
        ('{"assets": [{"name": "a", "size": 1, "digest": "md5:00"}]}', "assets[0].digest is not sha256"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_unexpected_gh_output_is_one_line(text: str, fragment: str) -> None:
    with pytest.raises(PublishError) as info:
        ghr.parse_assets(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_gh_errors_are_one_redacted_line(dist: Path) -> None:
    gh = FakeGh()
    gh.fail["view"] = "HTTP 401: Bad credentials\ntoken ghp_secret123 rejected\n"
    with pytest.raises(PublishError) as info:
        ghr.attach(
            ghr.GitHubRelease("gh", "acme/xfer", "v1.0.0", runner=gh, secrets=("ghp_secret123",)),
            ghr.collect([str(dist)]),
            prerelease=False,
        )
    assert str(info.value) == (
        "gh release view failed for acme/xfer v1.0.0: HTTP 401: Bad credentials | token *** rejected"
    )


def test_files_that_cannot_be_assets(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "x.whl").write_bytes(b"1")
    (tmp_path / "two" / "x.whl").write_bytes(b"2")
    with pytest.raises(UsageError, match=r"two files are called x\.whl"):
        ghr.collect([str(tmp_path)])
    odd = tmp_path / "three" / "with space.whl"
    odd.parent.mkdir()
    odd.write_bytes(b"3")
    with pytest.raises(UsageError, match=r"GitHub would rename an asset called 'with space\.whl'"):
        ghr.collect([str(odd)])
    with pytest.raises(UsageError, match="no such file or directory"):
        ghr.collect([str(tmp_path / "nowhere")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="nothing to attach"):
        ghr.collect([str(tmp_path / "empty")])


def _run(tmp_path: Path, *argv: str, text: str | None = None) -> int:
    path = ROOT / "matrix.yaml"
    if text is not None:
        path = tmp_path / "matrix.yaml"
        path.write_text(text, encoding="utf-8")
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    loaded = matrix.load(path, backends_dir=ROOT / "packaging" / "backends")
    return command.run(parser.parse_args(list(argv)), loaded)


def test_the_command_checks_its_arguments(
    tmp_path: Path, dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_REF_TYPE", raising=False)
    with pytest.raises(UsageError, match="needs a release tag"):
        _run(tmp_path, "--repo", "acme/xfer", str(dist))
    with pytest.raises(UsageError, match="--repo must be OWNER/NAME"):
        _run(tmp_path, "--tag", "v1.0.0", "--repo", "acme", str(dist))
    with pytest.raises(UsageError, match=r"does not match publish\.tag_pattern"):
        _run(tmp_path, "--tag", "release-1", "--repo", "acme/xfer", str(dist))


def test_github_release_false_attaches_nothing(
    tmp_path: Path, dist: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("github_release: true", "github_release: false")
    argv = ("--tag", "v1.0.0", "--repo", "acme/xfer", "--gh", "/nowhere/gh", str(dist))
    assert _run(tmp_path, *argv, text=text) == 0
    assert "publish.github_release is false: nothing is attached" in capsys.readouterr().out


def test_the_command_is_registered() -> None:
    assert cli.COMMANDS["github-release"][0] == "github_release"
