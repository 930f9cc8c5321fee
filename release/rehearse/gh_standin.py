"""A local stand-in for the GitHub CLI (`gh`), used by the rehearsal: the few calls release.yml
makes, kept in a directory instead of on GitHub.

    python gh_standin.py STORE release view TAG --json assets --repo OWNER/NAME
    python gh_standin.py STORE release view --json tagName [--jq '"tag=" + .tagName'] --repo OWNER/NAME
    python gh_standin.py STORE release create TAG FILE... [--prerelease] ... --repo OWNER/NAME
    python gh_standin.py STORE release upload TAG FILE... --repo OWNER/NAME
    python gh_standin.py STORE release download TAG --pattern GLOB... --dir DIR --repo OWNER/NAME
    python gh_standin.py STORE run download RUN_ID --name ARTIFACT --dir DIR --repo OWNER/NAME
    python gh_standin.py STORE workflow run FILE --repo OWNER/NAME --ref REF [-f KEY=VALUE]...

A release is STORE/releases/OWNER/NAME/TAG/ (its assets, and release.json), the latest the one
made last; a run's artifacts are STORE/runs/RUN_ID/artifacts/NAME/ (where the rehearsal's
upload-artifact puts them, so a job may wait for another's); every call is
appended to STORE/calls.jsonl. Standard library only: the rehearsal copies this file where the
runner user can run it with any Python 3. Answers mimic gh's ("release not found", "already
exists"); anything else exits 2, naming what the stand-in does not know.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

VALUE_FLAGS = {
    "--json", "--jq", "--repo", "--title", "--pattern", "--dir", "--ref", "-f", "--notes", "--target",
    "--name",
}  # fmt: skip
_JQ = re.compile(r'\s*(?:"([^"]*)"\s*\+\s*)?\.([A-Za-z]+)\s*')
"""The one jq shape the stand-in answers: an optional string prefix plus one field."""


def _split(args: list[str]) -> tuple[list[str], dict[str, list[str]], set[str]]:
    words: list[str] = []
    values: dict[str, list[str]] = {}
    flags: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in VALUE_FLAGS and i + 1 < len(args):
            values.setdefault(arg, []).append(args[i + 1])
            i += 2
            continue
        if arg.startswith("-"):
            flags.add(arg)
        else:
            words.append(arg)
        i += 1
    return words, values, flags


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fail(text: str, code: int = 1) -> int:
    print(text, file=sys.stderr)
    return code


def _latest(store: Path, values: dict[str, list[str]]) -> int:
    """`gh release view --json tagName`: the release made last."""
    place = store / "releases" / values["--repo"][0]
    made = sorted(place.iterdir(), key=lambda p: p.stat().st_mtime_ns) if place.is_dir() else []
    if not made:
        return _fail("release not found")
    if values.get("--json") != ["tagName"]:
        return _fail("gh stand-in: release view without a tag answers --json tagName only", 2)
    jq = values.get("--jq", [".tagName"])[0]
    shape = _JQ.fullmatch(jq)
    if shape is None or shape.group(2) != "tagName":
        return _fail(f'gh stand-in: --jq {jq!r} is not `.tagName` or `"prefix" + .tagName`', 2)
    print(f"{shape.group(1) or ''}{made[-1].name}")
    return 0


def run_download(store: Path, words: list[str], values: dict[str, list[str]]) -> int:
    """`gh run download RUN --name NAME --dir DIR`: one artifact of this run, when it exists."""
    if len(words) != 2 or "--name" not in values:
        return _fail("gh stand-in: run download needs RUN_ID and --name", 2)
    source = store / "runs" / words[1] / "artifacts" / values["--name"][0]
    if not source.is_dir():
        return _fail(f"no artifact matches any of the names or patterns provided: {values['--name'][0]}")
    shutil.copytree(source, Path(values.get("--dir", ["."])[0]), dirs_exist_ok=True)
    return 0


def release(store: Path, words: list[str], values: dict[str, list[str]], flags: set[str]) -> int:
    if words[:1] == ["view"] and len(words) == 1 and "--repo" in values:
        return _latest(store, values)
    if len(words) < 2 or "--repo" not in values:
        return _fail(f"gh stand-in: release {' '.join(words[:1])} needs a tag and --repo", 2)
    action, tag, files = words[0], words[1], words[2:]
    place = store / "releases" / values["--repo"][0] / tag
    if action == "view":
        return _release_view(place)
    if action == "create":
        return _release_create(place, tag, files, values, flags)
    if action == "upload":
        return _release_upload(place, files)
    if action == "download":
        return _release_download(place, values)
    return _fail(f"gh stand-in: release {action} is not one of view, create, upload, download", 2)


def _release_view(place: Path) -> int:
    """`gh release view TAG --json assets`: the release's assets with their sha256 digests."""
    if not place.is_dir():
        return _fail("release not found")
    assets = [
        {"name": p.name, "size": p.stat().st_size, "digest": f"sha256:{_sha256(p)}"}
        for p in sorted(place.iterdir())
        if p.name != "release.json"
    ]
    print(json.dumps({"assets": assets}))
    return 0


def _release_create(
    place: Path, tag: str, files: list[str], values: dict[str, list[str]], flags: set[str]
) -> int:
    """`gh release create TAG FILES...`: a new release (refused when the tag has one) with its files."""
    if place.is_dir():
        return _fail(f"a release with the same tag name already exists: {tag}")
    place.mkdir(parents=True)
    about = {"tag": tag, "prerelease": "--prerelease" in flags, "title": values.get("--title", [tag])[0]}
    (place / "release.json").write_text(json.dumps(about), encoding="utf-8")
    _add_assets(place, files)
    return 0


def _release_upload(place: Path, files: list[str]) -> int:
    """`gh release upload TAG FILES...`: files added to a release, refused when a name is taken."""
    if not place.is_dir():
        return _fail("release not found")
    taken = [Path(f).name for f in files if (place / Path(f).name).exists()]
    if taken:
        return _fail(f"asset under the same name already exists: {taken}")
    _add_assets(place, files)
    return 0


def _release_download(place: Path, values: dict[str, list[str]]) -> int:
    """`gh release download TAG --pattern P --dir D`: the assets matching a pattern."""
    if not place.is_dir():
        return _fail("release not found")
    patterns, target = values.get("--pattern", ["*"]), Path(values.get("--dir", ["."])[0])
    files_here = [p for p in sorted(place.iterdir()) if p.name != "release.json"]
    matched = [p for p in files_here if any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)]
    if not matched:
        return _fail(f"no assets match the file pattern: {', '.join(patterns)}")
    target.mkdir(parents=True, exist_ok=True)
    for path in matched:
        shutil.copyfile(path, target / path.name)
    return 0


def _add_assets(place: Path, files: list[str]) -> None:
    for name in files:
        shutil.copyfile(name, place / Path(name).name)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        return _fail("usage: gh_standin.py STORE COMMAND ...", 2)
    store = Path(argv[0])
    store.mkdir(parents=True, exist_ok=True)
    with (store / "calls.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(argv[1:]) + "\n")
    words, values, flags = _split(argv[2:])
    if argv[1] == "release":
        return release(store, words, values, flags)
    if argv[1] == "run" and words[:1] == ["download"]:
        return run_download(store, words, values)
    if argv[1] == "workflow" and words[:1] == ["run"] and len(words) == 2:
        entry = {
            "workflow": words[1],
            "repo": values.get("--repo"),
            "ref": values.get("--ref"),
            "f": values.get("-f"),
        }
        with (store / "dispatches.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")
        print(f"created workflow_dispatch event for {words[1]} (local stand-in)")
        return 0
    return _fail(f"gh stand-in: `gh {' '.join(argv[1:3])}` is not a call release.yml makes", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
