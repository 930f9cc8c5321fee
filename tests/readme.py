"""The README's commands, as the executable-README tier and .ci/run read them.

Each command is the bash block right after a `<!-- readme-test: NAME -->` line (an HTML comment:
invisible where the README is rendered).
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
NAMES = ("setup", "test")


def readme_commands(text: str | None = None) -> dict[str, str]:
    """{name: command} for every marked block."""
    text = README.read_text(encoding="utf-8") if text is None else text
    found = {}
    for match in re.finditer(r"^<!-- readme-test: (\w+) -->\n```bash\n(.*?)^```$", text, re.M | re.S):
        found[match.group(1)] = match.group(2).strip()
    return found
