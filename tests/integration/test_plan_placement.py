"""`release plan` as a user runs it, on the repository's matrix.yaml: the build table has a `runs`
column from this host's real probes (its toolkits' files, its Pythons, `podman info`), one why
line per variant and machine follows it, `--json` carries the same two fields, and `--no-probe`
says "not probed". Nothing is built and no container starts."""

from __future__ import annotations

import json
import re
import time

import pytest

from release.config.machines import host_machine
from tests.integration.conftest import toolkit

pytestmark = pytest.mark.integration

RUNS = re.compile(r"host|not here|github-only|(cross in )?image \S+ via (podman|docker)")


def test_release_plan_says_where_each_step_runs_and_why() -> None:
    started = time.monotonic()
    proc = toolkit("plan", timeout=120)
    took = time.monotonic() - started
    lines = proc.stdout.splitlines()
    assert lines[0].split()[-1] == "runs" and "platform floor" in lines[0], lines[0]
    counted = re.compile(r"\d+ build steps from matrix\.yaml")
    count = next(i for i, line in enumerate(lines) if counted.fullmatch(line))
    rows = [line.split(maxsplit=5) for line in lines[2 : count - 1]]
    assert rows and all(RUNS.fullmatch(row[5].strip()) for row in rows), rows
    why = lines[count + 1 :]
    machine = host_machine()
    cpu = next(line for line in why if line.startswith(f"cpu {machine}: "))
    assert cpu == f"cpu {machine}: host: no toolkit needed"  # the cpu variant needs no toolkit anywhere
    for identifier, *_, runs in rows:
        if runs.strip() == "github-only":
            continue
        variant, arch = identifier.split("-")[1], identifier.split("manylinux_", 1)[1]
        said = [line for line in why if line.startswith(f"{variant} {arch}: {runs.strip()}: ")]
        assert len(said) == 1, (identifier, runs, why)
    assert took < 60, f"release plan took {took:.1f} s: probing must stay cheap"

    include = json.loads(toolkit("plan", "--json", "--select", "cp312-*", timeout=120).stdout)["include"]
    assert include and all(RUNS.fullmatch(step["runs"]) and step["why"] for step in include), include

    unprobed = toolkit("plan", "--no-probe", "--select", "cp312-*", timeout=120).stdout.splitlines()
    assert all(line.endswith(" not probed") for line in unprobed[2:7]), unprobed
    assert any(line.startswith("where each step runs: not probed (--no-probe)") for line in unprobed)
