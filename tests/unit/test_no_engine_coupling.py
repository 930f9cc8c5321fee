"""Nothing in release/ knows the reference engine: pointing matrix.yaml elsewhere must be enough."""

from __future__ import annotations

import re
from pathlib import Path

RELEASE = Path(__file__).resolve().parents[2] / "release"
FORBIDDEN = re.compile(r"xfer|engine/", re.IGNORECASE)


def test_release_modules_never_name_the_reference_engine() -> None:
    offenders = []
    for path in sorted(RELEASE.rglob("*")):
        if path.suffix not in {".py", ".json"} or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FORBIDDEN.search(line):
                offenders.append(f"{path.relative_to(RELEASE.parent)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_check_would_catch_a_mention(tmp_path: Path) -> None:
    assert FORBIDDEN.search('ENGINE_DIR = "engine/"')
    assert FORBIDDEN.search("import xfer")
    assert not FORBIDDEN.search("engine.source")
