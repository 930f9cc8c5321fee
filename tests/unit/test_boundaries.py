"""Each class of untrusted input crosses one boundary module (DESIGN.md, "Safe by construction"),
as every process goes through `release.process` (`test_processes.py`): reads through
`release.wheel.files`, writes and deletes through `release.atomic`, numbers from text through
`release.config.names`, printed foreign text through `release.table.printable`. The scanner is
`tests/unit/boundaries.py`; here it runs over release/ and over planted sources.

`ALLOWED` names every module that still uses a raw primitive of a class, with the reason. A new
module is in no entry, so its first raw `open()`, `rmtree`, `\\d` or unescaped `print` fails here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.boundaries import HOMES, raw_uses

RELEASE = Path(__file__).resolve().parents[2] / "release"

READ_PENDING = (
    "raw read of a project or toolkit file (issue 57 inventory): to move behind release.wheel.files"
)
WRITE_PENDING = "raw write of the toolkit's own output (issue 57 inventory): to move behind release.atomic"
NUMBER_PENDING = "int()/float() of a value the toolkit made or checked (issue 57 inventory): to prove or move"
PRINT_PENDING = "prints the toolkit's messages (issue 57 inventory): each field to pass through printable()"
INIT_HELPER = "owned by the init helper's change (issue 57 causes 6-8, 15): release/init, staging"
VERIFY_HELPER = "owned by the verify helper's change (issue 57 causes 2, 12-14): release/inspect"

ALLOWED: dict[str, dict[str, str]] = {
    "release/atomic.py": {"read": READ_PENDING},
    "release/builder/compiler_cache.py": {"write": "finish removes its own mkdtemp, a cold cache"},
    "release/builder/container.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/builder/cross.py": {"print": PRINT_PENDING, "read": READ_PENDING, "write": WRITE_PENDING},
    "release/builder/host.py": {"write": WRITE_PENDING},
    "release/builder/prebuild.py": {
        "number": NUMBER_PENDING,
        "print": PRINT_PENDING,
        "read": READ_PENDING,
        "write": WRITE_PENDING,
    },
    "release/builder/repair.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/builder/reuse.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/builder/store.py": {
        "read": "os.open(O_CREAT) of a lock file another user opens too (never replaced: a rename "
        "would split the lock)",
        "write": "the run's wheel store: directories world-writable for the runner user's jobs "
        "(chmod) and a complete key directory renamed into place; release.atomic has neither",
    },
    "release/builder/stage.py": {"read": INIT_HELPER, "write": INIT_HELPER},
    "release/builder/sysdeps.py": {"read": READ_PENDING},
    "release/cli.py": {"print": PRINT_PENDING, "read": READ_PENDING},
    "release/commands/build.py": {"print": PRINT_PENDING},
    "release/commands/check_resolution.py": {"print": PRINT_PENDING},
    "release/commands/github_release.py": {"print": PRINT_PENDING},
    "release/commands/hardware.py": {
        "print": PRINT_PENDING,
        "write": WRITE_PENDING,
    },
    "release/commands/images.py": {"print": PRINT_PENDING},
    "release/commands/init.py": {"print": PRINT_PENDING},
    "release/commands/plan.py": {"print": PRINT_PENDING},
    "release/commands/publish.py": {"print": PRINT_PENDING},
    "release/commands/ready.py": {"print": PRINT_PENDING},
    "release/commands/rehearse.py": {"print": PRINT_PENDING},
    "release/commands/repair.py": {"print": PRINT_PENDING},
    "release/commands/reproduce.py": {"print": PRINT_PENDING, "write": WRITE_PENDING},
    "release/commands/schema.py": {"print": PRINT_PENDING, "read": READ_PENDING, "write": WRITE_PENDING},
    "release/commands/toolchain.py": {"print": PRINT_PENDING},
    "release/commands/variants.py": {"print": PRINT_PENDING},
    "release/commands/verify.py": {"print": PRINT_PENDING},
    "release/commands/verify_release.py": {"print": PRINT_PENDING},
    "release/commands/workflows.py": {"print": PRINT_PENDING},
    "release/config/backends.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/config/dataschema.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/config/pins.py": {"read": READ_PENDING},
    "release/config/pythons.py": {"read": READ_PENDING},
    "release/config/shapes.py": {"read": READ_PENDING},
    "release/hardware/emulated.py": {"write": WRITE_PENDING},
    "release/hardware/fetch.py": {"write": WRITE_PENDING},
    "release/hardware/pair.py": {
        "read": "opens the detached leg's record and log for the child to write (its own files)",
        "write": WRITE_PENDING,
    },
    "release/init/repository.py": {"read": INIT_HELPER},
    "release/init/runtime_places.py": {"number": INIT_HELPER},
    "release/init/scan.py": {"read": INIT_HELPER},
    "release/init/sysdeps.py": {"read": INIT_HELPER},
    "release/init/workflows.py": {"read": INIT_HELPER},
    "release/inspect/devicecode.py": {"read": VERIFY_HELPER},
    "release/layers.py": {"read": READ_PENDING},
    "release/machine/emulation.py": {"read": READ_PENDING},
    "release/machine/images.py": {"number": NUMBER_PENDING},
    "release/machine/imaging.py": {"number": NUMBER_PENDING, "read": READ_PENDING, "write": WRITE_PENDING},
    "release/machine/install.py": {"print": PRINT_PENDING},
    "release/machine/interpreters.py": {"number": NUMBER_PENDING},
    "release/machine/lock.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/machine/recipe.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/machine/therock.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/machine/toolchain.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/nox_sessions.py": {"print": PRINT_PENDING},
    "release/plan/imagefacts.py": {"number": NUMBER_PENDING},
    "release/plan/inputs.py": {"read": READ_PENDING},
    "release/plan/resolve.py": {"read": READ_PENDING},
    "release/publish/checked_set.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/publish/handoff.py": {"read": READ_PENDING},
    "release/publish/manifest.py": {"write": WRITE_PENDING},
    "release/publish/release_day.py": {"print": PRINT_PENDING},
    "release/publish/transport.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/publish/upload.py": {"number": NUMBER_PENDING},
    "release/publish/variant_upload.py": {"read": READ_PENDING},
    "release/rehearse/expressions.py": {"number": NUMBER_PENDING},
    "release/rehearse/gh_standin.py": {"print": PRINT_PENDING, "read": READ_PENDING, "write": WRITE_PENDING},
    "release/rehearse/narrow.py": {"read": READ_PENDING},
    "release/rehearse/pins.py": {"read": READ_PENDING},
    "release/rehearse/runner.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/rehearse/services.py": {"number": NUMBER_PENDING, "read": READ_PENDING, "write": WRITE_PENDING},
    "release/rehearse/steps.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/rehearse/workflow.py": {"read": READ_PENDING},
    "release/reproduce/compare.py": {"read": READ_PENDING},
    "release/reproduce/inputs.py": {"read": READ_PENDING},
    "release/settings.py": {"number": NUMBER_PENDING, "print": PRINT_PENDING},
    "release/smoke/hostruntime.py": {"print": PRINT_PENDING},
    "release/smoke/image.py": {"write": WRITE_PENDING},
    "release/smoke/probe.py": {"number": NUMBER_PENDING},
    "release/smoke/runner.py": {"write": WRITE_PENDING},
    "release/table.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/variants/make.py": {"write": WRITE_PENDING},
    "release/variants/metadata.py": {"number": NUMBER_PENDING, "read": READ_PENDING},
    "release/variants/resolution.py": {"read": READ_PENDING, "write": WRITE_PENDING},
    "release/wheel/archive.py": {"number": NUMBER_PENDING},
    "release/wheel/rewrite.py": {"read": READ_PENDING, "write": WRITE_PENDING},
}
"""release/ module -> {class: why it may still use that class's raw primitive}."""


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(RELEASE.rglob("*.py")):
        yield f"release/{path.relative_to(RELEASE).as_posix()}", path.read_text(encoding="utf-8")


def test_every_raw_primitive_is_in_its_boundary_or_listed() -> None:
    found = [
        f"{name}:{line}: {what}: use {HOMES[kind]} ({kind})"
        for name, source in _sources()
        for kind, line, what in raw_uses(source)
        if name != HOMES[kind] and kind not in ALLOWED.get(name, {})
    ]
    assert not found, "\n".join(found)


def test_each_exception_is_still_needed() -> None:
    """An entry whose module no longer uses that class's raw primitive is stale: remove it."""
    sources = dict(_sources())
    stale = [
        f"{name}: {kind}"
        for name, kinds in ALLOWED.items()
        for kind in kinds
        if name not in sources or kind not in {k for k, _l, _w in raw_uses(sources[name])}
    ]
    assert stale == []
    assert all(reason.strip() for kinds in ALLOWED.values() for reason in kinds.values())


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("open('x')", "read"),
        ("from pathlib import Path\nPath('x').read_text()", "read"),
        ("import os\nos.open('x', os.O_RDONLY)", "read"),
        ("p.open('rb')", "read"),
        ("found = sorted(root.rglob('*.whl'))", "read"),
        ("import os\nfor top, dirs, names in os.walk(root): pass", "read"),
        ("import shutil\nshutil.rmtree('x')", "write"),
        ("import shutil\nshutil.copytree('a', 'b')", "write"),
        ("p.mkdir(parents=True)", "write"),
        ("p.write_text('x')", "write"),
        ("p.unlink()", "write"),
        ("tmp.replace(target)", "write"),
        ("import os\nos.remove('x')", "write"),
        ("import re\nre.compile(r'(\\d+)')", "number"),
        ("import re\nPATTERN = r'v\\d'", "number"),
        ("int(text)", "number"),
        ("float(line.split()[0])", "number"),
        ("print(output)", "print"),
        ("print(f'failed: {tail}')", "print"),
        ("import json\nprint(json.dumps(report, ensure_ascii=False))", "print"),
        ("import sys\nsys.stderr.write(text)", "print"),
    ],
)
def test_a_planted_raw_primitive_is_seen(source: str, kind: str) -> None:
    assert kind in {k for k, _line, _what in raw_uses(source)}


def test_a_new_module_with_a_raw_primitive_fails(tmp_path: Path) -> None:
    """The rule as a new module meets it: not in `ALLOWED`, so each raw use is reported."""
    planted = "import re, shutil\nopen('x')\nshutil.rmtree('d')\nre.compile(r'\\d')\nprint(text)\n"
    name = "release/newstage/leak.py"
    assert name not in ALLOWED
    kinds = sorted({k for k, _l, _w in raw_uses(planted) if k not in ALLOWED.get(name, {})})
    assert kinds == ["number", "print", "read", "write"]


@pytest.mark.parametrize(
    "source",
    [
        "import re\nre.compile(r'(\\d+)', re.ASCII)",
        "import re\nre.compile(r'(?a)\\d+')",
        "import re\nre.fullmatch(r'\\d+', s, flags=re.A)",
        "'a-b'.replace('-', '_')",
        "int(len(x) / 2)",
        "int('7')",
        "print('done')",
        "print(f'{printable(name)}: done')",
        "print(table.render(('a',), rows))",
        "print(f'{count:d} wheels in {seconds:.1f} s')",
        "import json\nprint(json.dumps(report, indent=2))",
        "print(printable_lines(block))",
        "import tarfile\ntarfile.open('x')",
        "import shutil\nshutil.which('ls')",
    ],
)
def test_what_is_safe_is_not_flagged(source: str) -> None:
    assert list(raw_uses(source)) == []
