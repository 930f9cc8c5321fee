"""The run's own account of where its minutes go (docs/records/ci-time.md), and the check that the `slow`
marker tells the truth.

Every pytest process of a run (the one process, or each xdist worker) appends one JSON line per
event to `account.jsonl` in the run's directory (the controller's basetemp, which xdist workers
live under): a shared fixture's set-up (which fixture, its scope, seconds), a local image asked
for through `images.ensure` (made or found up to date, seconds, on whose behalf) and a test's own
time (its set-up and call, less the shared fixtures and local images it happened to pay for:
those are in the account, and which test pays them depends on the order). The process that reports (the
controller) reads the file back at the end and prints the account; under CI a test whose own time
is over SLOW_S and that is not marked `slow` fails the run (the limit stretches where the machine
was busier than the run makes it: `busier`), and the unmarked tests over half of it are listed.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from release import settings
from release.machine.images import MAKE_LOCK_DIR

SLOW_S = settings.number("RELEASE_SLOW_S")
"""A test whose own time is over this is marked `slow` (issue 32; RELEASE_SLOW_S changes it)."""
ACCOUNT = "account.jsonl"
SHARED_SCOPES = frozenset({"session", "package", "module", "class"})


LONG_FILES = {
    "tests/integration/test_rehearse.py": 710,
    # the real matrix's second builds and registry smokes, split off test_rehearse.py (issue 60):
    # 556 s here beside it at load 7-10, its builds taken from the store; handed out second, so
    # the two run side by side
    "tests/integration/test_rehearse_second_build.py": 440,
    "tests/integration/test_rehearse_machines.py": 435,
    "tests/integration/test_rehearse_failures.py": 390,
    "tests/integration/test_adoption_rehearse.py": 300,
    "tests/integration/test_rehearse_grace.py": 280,
    "tests/integration/test_readme.py": 250,
    "tests/integration/test_rehearse_hardware.py": 250,
    "tests/integration/test_standins.py": 180,
    "tests/integration/test_smoke_standin.py": 150,
    "tests/integration/test_wheel_store.py": 150,
    "tests/integration/test_nox_sessions.py": 150,
    "tests/integration/test_cross_build.py": 120,
    "tests/integration/test_container.py": 120,
    "tests/integration/test_adoption.py": 120,
    "tests/integration/test_reproduce.py": 90,
}
"""Test files whose wall time (with the images and wheels they happen to make) was longest in a
fresh run, in seconds (issue 60's run of 77f3c49: its slowest tests, summed per file). They are
handed to the xdist workers first (`--dist loadfile --no-loadscope-reorder` keeps collection
order): the longest file starts at once instead of after the many quick ones, so it bounds the run
less. Every other file keeps its place after them."""


def long_files_first(paths: list[str]) -> list[str]:
    """`paths` (a test file per item, root-relative) reordered: LONG_FILES longest first, the rest
    in their given order. Stable and the same on every worker (xdist checks the collections match)."""
    order = {path: index for index, path in enumerate(paths)}
    return sorted(order, key=lambda path: (-LONG_FILES.get(path, 0), order[path]))


def run_directory(basetemp: Path, *, worker: bool) -> Path:
    """The directory every process of one run shares: an xdist worker's basetemp is
    `<controller's basetemp>/popen-gwN`."""
    return basetemp.parent if worker else basetemp


RUN_STORE: list[Path] = []
"""This run's wheel store (`wheel_store`), once the session has started: what a test that takes its
wheels from the store passes its builds as RELEASE_WHEEL_STORE (`store_env`)."""


def store_env() -> dict[str, str]:
    """RELEASE_WHEEL_STORE=<this run's store> for a build, a rehearsal's jobs (`--env`) or a nox
    session that builds wheels another test of the run may have built from the same inputs."""
    return {"RELEASE_WHEEL_STORE": str(RUN_STORE[-1])} if RUN_STORE else {}


def wheel_store(directory: Path) -> Path:
    """The run's store of container-built wheels (`RELEASE_WHEEL_STORE`, release.builder.store):
    one per run, named by the run's directory, outside root's private pytest directory so that a
    rehearsal's jobs (the `runner` user) reach it. Made by the first build that uses it."""
    return Path(tempfile.gettempdir()) / f"release-wheel-store-{directory.name}-{directory.stat().st_ino}"


def store_lines(events: Iterable[Mapping[str, object]]) -> list[str]:
    """How many container-built wheels the run's builds took from its store and how many they built,
    and each wheel built more than once (its inputs differed, or a build held no store)."""
    events = list(events)
    if not events:
        return []
    did = Counter(str(e.get("did")) for e in events)
    lines = [f"wheels reused: {did['reused']}, built: {did['built']} (container builds, the run's store)"]
    if did["kept"]:
        lines.append(f"  and {did['kept']} built before the run (a checkout's up to date), put in the store")
    built = Counter(str(e.get("wheel")) for e in events if e.get("did") == "built")
    twice = sorted((name, n) for name, n in built.items() if n > 1)
    lines += [f"  {name} was built {n} times (different inputs)" for name, n in twice]
    return lines


def record(directory: Path, entry: Mapping[str, object]) -> None:
    """Append one event (a single short write with O_APPEND: lines of two workers never mix)."""
    line = (json.dumps(dict(entry), sort_keys=True) + "\n").encode()
    fd = os.open(directory / ACCOUNT, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read(directory: Path) -> list[dict[str, object]]:
    path = directory / ACCOUNT
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


BUSY_PER_CPU = 2.0
"""The load a run makes by itself: `.ci/run`'s three workers on two cores keep the one-minute load
average near 4. Past that, other work on the machine stretches every test alike."""


@dataclass(frozen=True)
class Offender:
    test: str
    seconds: float
    limit: float
    load: float | None = None


def busier(entry: Mapping[str, object]) -> float:
    """How much busier than a run makes it the machine was as the test ended: its one-minute load
    average over BUSY_PER_CPU per core, at least 1 (an entry without a load: 1)."""
    load, cpus = entry.get("load"), entry.get("cpus")
    if not isinstance(load, (int, float)) or not isinstance(cpus, int) or cpus < 1:
        return 1.0
    return max(1.0, float(load) / (BUSY_PER_CPU * cpus))


def _unmarked(entries: Iterable[Mapping[str, object]]) -> Iterator[tuple[Mapping[str, object], float]]:
    """(entry, own seconds) of each test entry not marked `slow`."""
    for e in entries:
        if e.get("kind") == "test" and not e.get("slow"):
            yield e, float(str(e.get("own_s", 0)))


def unmarked_slow(entries: Iterable[Mapping[str, object]], limit: float = SLOW_S) -> list[Offender]:
    """Tests whose own time is over `limit` and that are not marked `slow`, slowest first. The limit
    stretches with the machine's load beyond what the run makes by itself (`busier`): a 50 s test
    that took 70 s because another job shared the machine is not slow, while one over the limit on
    a machine that held only this run is."""
    found = []
    for e, seconds in _unmarked(entries):
        stretched = limit * busier(e)
        if seconds > stretched:
            load = e.get("load")
            said = float(load) if isinstance(load, (int, float)) else None
            found.append(Offender(str(e["test"]), seconds, stretched, said))
    return sorted(found, key=lambda o: -o.seconds)


def near_slow(entries: Iterable[Mapping[str, object]], limit: float = SLOW_S) -> list[Offender]:
    """Unmarked tests between half the limit and the limit: the ones a busier machine may tip over,
    named so a maintainer marks them (or makes them quicker) before they fail a run."""
    near = [(e, seconds) for e, seconds in _unmarked(entries) if limit / 2 < seconds <= limit]
    found = [Offender(str(e["test"]), seconds, limit) for e, seconds in near]
    return sorted(found, key=lambda o: -o.seconds)


def machine_load() -> dict[str, object]:
    """The one-minute load average and the core count, recorded with each test's own time."""
    try:
        return {"load": round(os.getloadavg()[0], 2), "cpus": os.cpu_count() or 1}
    except OSError:
        return {}


def _seconds(entry: Mapping[str, object]) -> float:
    return float(str(entry.get("seconds", 0)))


def account_lines(entries: Iterable[Mapping[str, object]]) -> list[str]:
    """The printed account: shared fixtures (1 s or more) and local images, slowest first."""
    entries = list(entries)
    fixtures = sorted((e for e in entries if e.get("kind") == "fixture"), key=_seconds, reverse=True)
    made = sorted((e for e in entries if e.get("kind") == "image"), key=_seconds, reverse=True)
    lines = []
    shown = [e for e in fixtures if _seconds(e) >= 1.0]
    total = sum(_seconds(e) for e in fixtures)
    head = f"shared fixtures: {len(fixtures)} set up, {total:.0f} s in all"
    lines.append(f"{head} ({len(shown)} took 1 s or more)")
    for e in shown:
        lines.append(f"  {_seconds(e):7.1f} s  {e['fixture']} ({e['scope']}, {e['worker']}) for {e['first']}")
    lines.append(f"local images asked for: {len(made)}, {sum(_seconds(e) for e in made):.0f} s in all")
    for e in made:
        lines.append(f"  {_seconds(e):7.1f} s  {e['image']}: {e['state']} ({e['worker']}) by {e['by']}")
    return lines + worker_lines(entries)


def worker_lines(entries: Iterable[Mapping[str, object]]) -> list[str]:
    """When each worker's last test (of 1 s or more) ended, from the start of the first: the run's
    tail, where one worker still runs while the others are done."""
    tests = [e for e in entries if e.get("kind") == "test" and "end" in e]
    if not tests:
        return []
    ends = [
        (str(e.get("worker", "main")), float(str(e["end"])), float(str(e.get("own_s", 0)))) for e in tests
    ]
    start = min(end - own for _, end, own in ends)
    last: dict[str, float] = {}
    for worker, end, _ in ends:
        last[worker] = max(last.get(worker, 0.0), end - start)
    shown = ", ".join(f"{w} {t:.0f} s" for w, t in sorted(last.items(), key=lambda kv: kv[1]))
    return [f"last test (of 1 s or more) ended, from the first one's start: {shown}"]


def ensure_recorder(
    ensure: Callable[..., None], note: Callable[[Mapping[str, object]], None], by: Callable[[], str]
) -> Callable[..., None]:
    """`images.ensure`, recording each call: the image, made or found up to date, seconds, by whom."""

    def recorded(engine: str, image: object, *, log: Callable[[str], None]) -> None:
        said: list[str] = []

        def tee(line: str) -> None:
            said.append(line)
            log(line)

        started = time.monotonic()
        state = "failed"
        try:
            ensure(engine, image, log=tee)
            state = image_state(said)
        finally:
            tag = str(getattr(image, "tag", image))
            seconds = time.monotonic() - started
            note({"kind": "image", "image": tag, "state": state, "seconds": seconds, "by": by()})

    return recorded


def image_state(said: list[str]) -> str:
    """What `images.ensure` said it did (its last word on the image)."""
    waited = " (waited for another maker)" if any("is locked by" in line for line in said) else ""
    return _last_word(said) + waited


def _last_word(said: list[str]) -> str:
    for line in reversed(said):
        if ": tagged (" in line:
            return "tagged"
        if ": made (" in line:
            return "made"
        if "up to date" in line:
            return "up to date"
        if ": present;" in line:
            return "present, used as it is"
    return "checked"


MAKE_IMAGE_RECORD = MAKE_LOCK_DIR
"""Where scripts/make-image.sh keeps calls.log (a line a call) and inputs/<inputs>.txt: the
directory of its locks."""


@dataclass(frozen=True)
class ImageCall:
    """One make-image.sh call, from its calls.log line."""

    when: float
    tag: str
    inputs: str
    did: str
    seconds: int
    by: str


def image_calls(record: Path, since: float) -> list[ImageCall]:
    """make-image.sh's calls since `since` (epoch seconds): every process's, the rehearsals' own
    included, which `images.ensure` in the test processes does not see. Lines it cannot read are
    left out."""
    path = record / "calls.log"
    if not path.is_file():
        return []
    calls = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split("\t")
        if len(fields) != 6 or not fields[0].isdigit() or not fields[4].isdigit():
            continue
        call = ImageCall(float(fields[0]), fields[1], fields[2], fields[3], int(fields[4]), fields[5])
        if call.when >= since:
            calls.append(call)
    return calls


def image_call_lines(calls: list[ImageCall], record: Path) -> list[str]:
    """How many calls did what, and each tag made more than once: its makes (inputs, seconds, who
    asked) and the lines by which their inputs differ, which say why the later make did not find
    the earlier image up to date."""
    if not calls:
        return []
    did = Counter(call.did for call in calls)
    counts = ", ".join(f"{what} {n}" for what, n in sorted(did.items()))
    lines = [f"make-image.sh calls (every process): {len(calls)}: {counts}"]
    makes: dict[str, list[ImageCall]] = {}
    for call in calls:
        if call.did in ("made", "layer"):
            makes.setdefault(call.tag, []).append(call)
    for tag, made in sorted(makes.items()):
        if len(made) < 2:
            continue
        lines.append(f"  {tag} was made {len(made)} times:")
        lines += [f"    {c.seconds:5d} s  inputs {c.inputs[:12]}  by {c.by}" for c in made]
        for before, after in itertools.pairwise(made):
            lines += [f"    {line}" for line in _inputs_difference(record, before.inputs, after.inputs)]
    return lines


def _inputs_difference(record: Path, before: str, after: str) -> list[str]:
    if before == after:
        return [f"inputs {after[:12]} both times: the image was removed or its tag moved in between"]
    texts = []
    for inputs in (before, after):
        path = record / "inputs" / f"{inputs}.txt"
        if not path.is_file():
            return [f"inputs {before[:12]} -> {after[:12]} (no {path} to compare)"]
        texts.append(path.read_text(encoding="utf-8", errors="replace").splitlines())
    gone = [f"- {line}" for line in texts[0] if line not in texts[1]]
    came = [f"+ {line}" for line in texts[1] if line not in texts[0]]
    return [f"inputs {before[:12]} -> {after[:12]}:", *gone, *came]
