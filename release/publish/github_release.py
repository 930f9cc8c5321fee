"""A release's files attached to its GitHub Release through `gh`, never replacing one.

PyPI keeps every file it was given; `gh release upload --clobber` replaced GitHub Release assets
on a re-run, so the two could differ. Here the release's assets are listed first (`gh release
view --json assets`: names, sizes and, from newer GitHub, sha256 digests; without a digest an
asset of the local file's size is downloaded and hashed). An asset whose content differs from
the local file stops the run before anything is uploaded, naming it; missing assets go up in one
`gh release upload` without `--clobber`; a missing release is created with all of them
(`--verify-tag --generate-notes`, `--prerelease` when the tag's version is one), its notes
opening with the variants the matrix holds back and why. `release github-release` is its command.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from release import process
from release.config.matrix import LoadedMatrix
from release.errors import PublishError, ToolchainError, UsageError
from release.publish import manifest, redact
from release.publish.handoff import mismatch
from release.publish.index import printable
from release.wheel.files import file_sha256, walk_files
from release.wheel.names import REPORT_SUFFIX

# GitHub renames an asset whose name holds anything else; a renamed asset could never be matched.
_ASSET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})")
NOT_FOUND = "release not found"
MANIFEST_NAME = "release-manifest.json"

Runner = Callable[[Sequence[str]], tuple[int, str, str]]
"""Runs a command: (exit status, stdout, stderr)."""


@dataclass(frozen=True)
class Asset:
    name: str
    size: int
    sha256: str | None


@dataclass(frozen=True)
class Local:
    name: str
    path: Path
    size: int
    sha256: str


def collect(arguments: Sequence[str]) -> dict[str, Local]:
    """Every regular file named or inside a named directory (recursively, dot-files skipped)."""
    found: dict[str, Local] = {}
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            paths = [p for p in walk_files(path, links=True) if not p.name.startswith(".")]
        elif path.is_file():
            paths = [path]
        else:
            msg = f"{argument}: no such file or directory"
            raise UsageError(msg)
        for p in paths:
            if not _ASSET_NAME.fullmatch(p.name):
                msg = f"{p}: GitHub would rename an asset called {p.name!r}; rename the file"
                raise UsageError(msg)
            if p.name in found and found[p.name].path != p:
                msg = f"two files are called {p.name}: {found[p.name].path} and {p} (an asset has one name)"
                raise UsageError(msg)
            found[p.name] = Local(p.name, p, p.stat().st_size, _sha256(p))
    if not found:
        msg = f"nothing to attach in {', '.join(arguments)}"
        raise UsageError(msg)
    return dict(sorted(found.items()))


def _sha256(path: Path) -> str:
    """The file's sha256, read only if it is a regular file (never blocking on a FIFO)."""
    try:
        return file_sha256(path)
    except OSError as exc:
        msg = f"{path}: cannot read it ({exc.strerror or exc})"
        raise UsageError(msg) from None


def parse_assets(text: str) -> dict[str, Asset]:
    """The assets of `gh release view --json assets`; `PublishError` for anything else."""

    def bad(what: str) -> NoReturn:
        msg = f"gh release view answered something unexpected: {what}"
        raise PublishError(msg)

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        bad("not JSON")
    assets = data.get("assets") if isinstance(data, dict) else None
    if not isinstance(assets, list):
        bad("no assets list")
    found: dict[str, Asset] = {}
    for i, entry in enumerate(assets):
        if not isinstance(entry, dict):
            bad(f"assets[{i}] is not an object")
        name, size, digest = entry.get("name"), entry.get("size"), entry.get("digest")
        if not isinstance(name, str) or not name.isprintable():
            bad(f"assets[{i}].name is not a name")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            bad(f"assets[{i}].size is not a size")
        match = _DIGEST.fullmatch(digest) if isinstance(digest, str) else None
        if digest not in (None, "") and match is None:
            bad(f"assets[{i}].digest is not sha256:<64 hex digits>")
        found[name] = Asset(name, size, match.group(1).lower() if match else None)
    return found


GH_TIMEOUT = 1800.0
"""Seconds one gh call may take (an upload of every asset included); past it gh is stopped."""


def run_process(cmd: Sequence[str]) -> tuple[int, str, str]:
    """gh, tracked and bounded: stopped and reaped at `GH_TIMEOUT` or on SIGTERM/SIGINT."""
    try:
        return process.run_bounded_apart(list(cmd), timeout=GH_TIMEOUT)
    except FileNotFoundError:
        msg = f"{cmd[0]}: not found (install the GitHub CLI, or pass --gh PATH)"
        raise ToolchainError(msg) from None
    except PermissionError:
        msg = f"{cmd[0]}: not executable"
        raise ToolchainError(msg) from None


@dataclass
class GitHubRelease:
    """One release of one repository, through the `gh` executable."""

    gh: str
    repo: str
    tag: str
    runner: Runner = run_process
    secrets: tuple[str, ...] = ()
    notes: str = ""
    """Prepended to GitHub's generated notes when the release is created (what is held back)."""

    def _gh(self, *args: str) -> tuple[int, str, str]:
        return self.runner([self.gh, "release", *args, "--repo", self.repo])

    def _fail(self, what: str, stderr: str) -> NoReturn:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        said = " | ".join(lines[-3:]) or "no output"
        said = redact.Redactor.of(self.secrets)(said)
        msg = f"gh release {what} failed for {self.repo} {self.tag}: {printable(said)[:300]}"
        raise PublishError(msg)

    def assets(self) -> dict[str, Asset] | None:
        """The release's assets, or None when there is no release for the tag."""
        rc, out, err = self._gh("view", self.tag, "--json", "assets")
        if rc != 0:
            if NOT_FOUND in err.lower():
                return None
            self._fail("view", err)
        return parse_assets(out)

    def create(self, files: Sequence[Path], *, prerelease: bool) -> bool:
        """Create the release with `files`; False when it appeared meanwhile (another run)."""
        flags = ["--verify-tag", "--title", self.tag, "--generate-notes"]
        if self.notes:
            flags += ["--notes", self.notes]
        if prerelease:
            flags.append("--prerelease")
        rc, _, err = self._gh("create", self.tag, *map(str, files), *flags)
        if rc == 0:
            return True
        if "already exists" in err.lower():
            return False
        self._fail("create", err)

    def upload(self, files: Sequence[Path]) -> None:
        """Add assets; never `--clobber`: an existing name makes gh refuse, and so do we."""
        rc, _, err = self._gh("upload", self.tag, *map(str, files))
        if rc != 0:
            self._fail("upload", err)

    def download_sha256(self, name: str) -> str:
        with tempfile.TemporaryDirectory(prefix="release-asset-") as tmp:
            rc, _, err = self._gh("download", self.tag, "--pattern", name, "--dir", tmp)
            path = Path(tmp) / name
            if rc != 0 or not path.is_file():
                self._fail("download", err or f"{name} did not arrive")
            return _sha256(path)


def differs(release: GitHubRelease, local: Local, asset: Asset) -> str | None:
    """Why the asset is not the local file, or None when it is."""
    if asset.size != local.size:
        return f"{asset.size:,} bytes on the release, {local.size:,} here"
    remote = asset.sha256 or release.download_sha256(asset.name)
    if remote != local.sha256:
        return f"sha256 {remote[:12]}… on the release, {local.sha256[:12]}… here"
    return None


def attach(release: GitHubRelease, files: Mapping[str, Local], *, prerelease: bool) -> list[tuple[str, str]]:
    """(name, what happened) per file; `PublishError` naming every asset that differs."""
    assets = release.assets()
    if assets is None:
        if release.create([f.path for f in files.values()], prerelease=prerelease):
            return [(name, "uploaded (release created)") for name in files]
        assets = release.assets()
        if assets is None:
            msg = f"gh release create said {release.tag} exists, but gh release view does not find it"
            raise PublishError(msg)
    conflicts = []
    missing = []
    rows = []
    for name, local in files.items():
        if name not in assets:
            missing.append(local)
            rows.append((name, "uploaded"))
            continue
        why = differs(release, local, assets[name])
        if why is not None:
            conflicts.append(f"  - {name}: {why}")
        rows.append((name, "already there" if why is None else "DIFFERS"))
    if conflicts:
        msg = (
            f"{len(conflicts)} asset(s) of release {release.tag} in {release.repo} differ from the local "
            "files; nothing was uploaded (a release asset is never replaced: PyPI keeps its files, so "
            "the two would disagree; delete the asset on GitHub only if it is the wrong one):\n"
            + "\n".join(conflicts)
        )
        raise PublishError(msg)
    if missing:
        release.upload([f.path for f in missing])
    return rows


def check_manifest(files: Mapping[str, Local], manifest_file: Path) -> None:
    """Every file to attach is the manifest's (a wheel with its sha256 and size, or the verify
    report it names), and every wheel of the manifest is there; `PublishError` naming each file
    that is extra, missing or different. Nothing unlisted reaches the release."""
    wheels = manifest.load(manifest_file)
    problems = []
    for name, local in files.items():
        if local.path.resolve() == manifest_file.resolve():
            continue
        entry = wheels.get(name)
        report_of = wheels.get(name.removesuffix(REPORT_SUFFIX)) if name.endswith(REPORT_SUFFIX) else None
        if entry is not None:
            if local.sha256 != entry["sha256"] or local.size != entry["size"]:
                problems.append(f"  - {local.path}: {mismatch(name, str(entry['sha256']), local.sha256)}")
        elif report_of is not None and report_of.get("report_sha256"):
            if local.sha256 != report_of["report_sha256"]:
                problems.append(f"  - {local.path}: not the verify report the manifest names")
        else:
            problems.append(f"  - {local.path}: not in {manifest_file.name} (refused)")
    problems += [
        f"  - {name}: in {manifest_file.name}, not among the files" for name in wheels if name not in files
    ]
    if problems:
        msg = f"{len(problems)} file(s) do not match {manifest_file}; nothing was attached:\n" + "\n".join(
            problems
        )
        raise PublishError(msg)


def held_back_notes(loaded: LoadedMatrix) -> str:
    """The release notes' paragraph on the variants this release leaves out, and why."""
    held = [(n, v) for n, v in loaded.matrix.variants.items() if v.held_back is not None]
    if not held:
        return ""
    lines = ["**Not in this release** (held back in matrix.yaml):", ""]
    lines += [f"- `{v.distribution}` ({name}): {v.held_back}" for name, v in held]
    return "\n".join(lines)
