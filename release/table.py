"""Tables for terminal summaries, and the same tables for the GitHub Actions job summary.

Every command's table goes through `render`. Where `GITHUB_STEP_SUMMARY` names a file (a step of
a GitHub Actions job, or the rehearsal's stand-in for one), the table is also appended to it as
Markdown, so the build summary, verify results, the smoke matrix, the release-day checks, the
readiness list and the publish outcome show on the run's page, not only in its raw logs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from release import settings

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
MAX_CELL = 400
"""Characters of one Markdown cell; a longer one is cut with an ellipsis (GitHub caps a summary at 1 MiB)."""


def printable(text: str) -> str:
    """`text` with every control, format (bidirectional overrides, zero-width) and separator
    character escaped as `repr` does (`\\n`, `\\x1b`, `\\u202e`): the one function that untrusted
    text (from a wheel, an index, an image, a manifest) goes through before it reaches a terminal
    or a job summary, so it can neither start a line of its own nor reorder what is shown."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def printable_lines(text: str) -> str:
    """`text` with each line `printable` and the line breaks kept: for a block of lines (a log
    line with an output tail below it, a table). Idempotent: escaped text stays as it is."""
    return "\n".join(printable(line) for line in text.split("\n"))


def render(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    title: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """A left-aligned table with a rule under the header; numbers are right-aligned.

    Also appended, as Markdown under `title`, to the job summary file when `GITHUB_STEP_SUMMARY`
    is set."""
    cells = [[_shown(str(c)) for c in row] for row in rows]
    numeric = [all(_is_number(row[i]) for row in cells) and bool(cells) for i in range(len(headers))]
    summary = settings.raw(SUMMARY_ENV, environ)
    if summary:
        _append(Path(summary), markdown(headers, cells, numeric, title))
    return _plain(headers, cells, numeric)


def _shown(cell: str) -> str:
    """A cell on one line: line breaks and tabs as spaces, other control and bidirectional
    characters escaped (`printable`), in the terminal and the job summary alike."""
    return cell if cell.isprintable() else printable(" ".join(cell.split()))


def _plain(headers: Sequence[str], cells: list[list[str]], numeric: list[bool]) -> str:
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def markdown(
    headers: Sequence[str],
    cells: Sequence[Sequence[str]],
    numeric: Sequence[bool] | None = None,
    title: str | None = None,
) -> str:
    """A GitHub-flavoured Markdown table: pipes and line breaks in cells escaped, numbers right-aligned."""
    align = numeric or [False] * len(headers)
    out = [f"#### {_cell(title)}", ""] if title else []
    out += [
        "| " + " | ".join(_cell(h) for h in headers) + " |",
        "| " + " | ".join("---:" if a else "---" for a in align) + " |",
    ]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in cells)
    return "\n".join(out) + "\n\n"


def _cell(text: str) -> str:
    text = text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.split()) or " "


def _append(path: Path, text: str) -> None:
    """One write in append mode: tables of parallel steps never interleave within a table. A summary
    that cannot be written is said on stderr, never a failure of the command whose table it is."""
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        print(f"warning: {SUMMARY_ENV}={path}: cannot append the table ({exc.strerror})", file=sys.stderr)


def _is_number(text: str) -> bool:
    try:
        float(text.rstrip("s%x").replace(",", ""))
    except ValueError:
        return False
    return True
