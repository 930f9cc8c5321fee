"""A local stand-in for the GitHub CLI (`gh`), used by the rehearsal: the few calls release.yml
makes, kept in a directory instead of on GitHub.

    python gh_standin.py STORE release view TAG --json assets --repo OWNER/NAME
    python gh_standin.py STORE release create TAG FILE... [--prerelease] ... --repo OWNER/NAME
    python gh_standin.py STORE release upload TAG FILE... --repo OWNER/NAME
    python gh_standin.py STORE release download TAG --pattern NAME --dir DIR --repo OWNER/NAME
    python gh_standin.py STORE workflow run FILE --repo OWNER/NAME --ref REF [-f KEY=VALUE]...

A release is STORE/releases/OWNER/NAME/TAG/ (its assets, and release.json); every call is
appended to STORE/calls.jsonl. Standard library only: the rehearsal copies this file where the
runner user can run it with any Python 3. Answers mimic gh's ("release not found", "already
exists"); anything else exits 2, naming what the stand-in does not know.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

VALUE_FLAGS = {"--json", "--repo", "--title", "--pattern", "--dir", "--ref", "-f", "--notes", "--target"}


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


def release(store: Path, words: list[str], values: dict[str, list[str]], flags: set[str]) -> int:
    if len(words) < 2 or "--repo" not in values:
        return _fail(f"gh stand-in: release {' '.join(words[:1])} needs a tag and --repo", 2)
    action, tag, files = words[0], words[1], words[2:]
    place = store / "releases" / values["--repo"][0] / tag
    if action == "view":
        if not place.is_dir():
            return _fail("release not found")
        assets = [
            {"name": p.name, "size": p.stat().st_size, "digest": f"sha256:{_sha256(p)}"}
            for p in sorted(place.iterdir())
            if p.name != "release.json"
        ]
        print(json.dumps({"assets": assets}))
        return 0
    if action == "create":
        if place.is_dir():
            return _fail(f"a release with the same tag name already exists: {tag}")
        place.mkdir(parents=True)
        about = {"tag": tag, "prerelease": "--prerelease" in flags, "title": values.get("--title", [tag])[0]}
        (place / "release.json").write_text(json.dumps(about), encoding="utf-8")
    elif action == "upload":
        if not place.is_dir():
            return _fail("release not found")
        taken = [Path(f).name for f in files if (place / Path(f).name).exists()]
        if taken:
            return _fail(f"asset under the same name already exists: {taken}")
    elif action == "download":
        pattern, target = values.get("--pattern", [""])[0], Path(values.get("--dir", ["."])[0])
        if not (place / pattern).is_file():
            return _fail(f"no assets match {pattern}")
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(place / pattern, target / pattern)
        return 0
    else:
        return _fail(f"gh stand-in: release {action} is not one of view, create, upload, download", 2)
    for name in files:
        shutil.copyfile(name, place / Path(name).name)
    return 0


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
