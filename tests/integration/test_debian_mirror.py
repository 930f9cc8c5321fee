"""The Debian mirror is one setting: scripts/_common.sh `debian_mirror` (the scripts') and
release.machine.debian `debian_mirror` (the toolkit's) give the same mirror for the same
environment and apt sources: DEBIAN_MIRROR, then the first Debian archive the sources name (apt's
files only, in apt's order), then deb.debian.org. Real bash, real files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from release.machine.debian import apt_source_files, debian_mirror

pytestmark = pytest.mark.integration

COMMON = Path(__file__).resolve().parents[2] / "scripts" / "_common.sh"
CASES = {
    "deb822": {"sources.list.d/debian.sources": "Types: deb\nURIs: http://a.example/debian/\nSuites: sid\n"},
    "one line": {
        "sources.list": "# deb http://old.example/debian sid main\n"
        "deb [arch=amd64] http://b.example/debian sid main\n"
    },
    "by name, .list and .sources alike": {
        "sources.list.d/a.sources": "URIs: http://c.example/debian\n",
        "sources.list.d/b.list": "deb http://d.example/debian sid main\n",
    },
    "apt's files only": {
        "sources.list.d/x.list.disabled": "deb http://e.example/debian sid main\n",
        "sources.list.d/y.sources": "Types: deb\nURIs: http://f.example/debian-security\n",
    },
    "none": {},
}  # fmt: skip


def _shell(apt: Path, mirror: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DEBIAN_MIRROR"} | {"APT_DIR": str(apt)}
    if mirror is not None:
        env["DEBIAN_MIRROR"] = mirror
    proc = subprocess.run(
        ["bash", "-c", '. "$0"; debian_mirror', str(COMMON)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


@pytest.mark.parametrize("case", list(CASES))
def test_the_scripts_and_the_toolkit_read_one_mirror(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sources.list.d").mkdir()
    for name, text in CASES[case].items():
        (tmp_path / name).write_text(text)
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    found = debian_mirror(apt_source_files(tmp_path))
    assert _shell(tmp_path, None) == found
    expected = {"deb822": "http://a.example/debian", "one line": "http://b.example/debian",
                "by name, .list and .sources alike": "http://c.example/debian"}  # fmt: skip
    assert found == expected.get(case, "http://deb.debian.org/debian")
    monkeypatch.setenv("DEBIAN_MIRROR", "http://chosen.example/debian/")
    assert _shell(tmp_path, "http://chosen.example/debian/") == debian_mirror(apt_source_files(tmp_path))
    assert debian_mirror(apt_source_files(tmp_path)) == "http://chosen.example/debian"
