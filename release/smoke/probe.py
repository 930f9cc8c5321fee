"""Read a serving image's facts from the image itself: one container, no GPU, no network, a
shell script that prints what is there (its Pythons and their platform, its C library, where each
runtime soname resolves, its toolkit version files), parsed into `ImageFacts`."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from release import process
from release.config.facts import FACTS_FILE, SYSTEM_LIBRARY_DIRS, ImageFacts, Layout, Via
from release.config.matrix import LoadedMatrix
from release.errors import ReleaseError, SmokeError, UsageError
from release.machine.containers import ContainerEngine
from release.plan.imagefacts import (
    Disagreement,
    awaiting_digests,
    compare,
    current,
    image_sonames,
    pinned_without_facts,
)
from release.plan.steps import make_plan
from release.table import printable

PROBE_TIMEOUT = 300.0
MAX_OUTPUT = 1 << 20

_PYTHON = (
    "import json, sys, sysconfig; "
    "print('python=' + json.dumps([f'{sys.version_info[0]}.{sys.version_info[1]}', "
    "sys.implementation.name, sys.executable, sysconfig.get_platform()]))"
)


def script(sonames: Sequence[str], prefixes: Sequence[str], version_files: Sequence[str]) -> str:
    """The POSIX shell script run in the image: one `key=value` line per fact."""
    names = " ".join(shlex.quote(s) for s in sonames)
    dirs = " ".join(prefixes)  # globs, expanded by the image's shell
    files = " ".join(version_files)
    return f"""
echo "glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')"
echo "ld_library_path=${{LD_LIBRARY_PATH:-}}"
for p in $(command -v python3 2>/dev/null) \\
         $(for v in 8 9 10 11 12 13 14 15; do command -v python3.$v; done 2>/dev/null) \\
         /opt/python/cp3*/bin/python /usr/bin/python3.* /usr/local/bin/python3.* /opt/conda/bin/python3; do
  case "$p" in *-config|*m) continue ;; esac
  [ -x "$p" ] && [ -f "$p" ] && "$p" -c {shlex.quote(_PYTHON)} 2>/dev/null
done
ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*\\([^ ]*\\) .* => \\(.*\\)$/ldconfig=\\1 \\2/p'
for s in {names}; do
  for d in $(echo "${{LD_LIBRARY_PATH:-}}" | tr ':' ' '); do [ -e "$d/$s" ] && echo "ldpath=$s $d"; done
  for d in {dirs}; do [ -e "$d/$s" ] && echo "prefix=$s $d"; done
done
for f in {files}; do [ -f "$f" ] && echo "version=$f $(head -c 300 "$f" | tr '\\n' ' ')"; done
true
"""


def run_probe(engine: ContainerEngine, reference: str, text: str, *, timeout: float = PROBE_TIMEOUT) -> str:
    """The script's output from one `--rm` container of `reference` (no network, no GPU)."""
    try:
        proc = engine.run_script(reference, text, timeout=timeout)
    except process.TimedOut:
        msg = f"probing {reference} took over {timeout:.0f} s ({engine} run); is the engine answering?"
        raise SmokeError(msg) from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        msg = f"cannot probe {reference} ({engine} run exited {proc.returncode}): {lines[-1]}"
        raise SmokeError(msg)
    return proc.stdout[:MAX_OUTPUT]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isascii() and p.isdigit() and len(p) < 8)


@dataclass
class _ProbeLines:
    """The probe script's `key=value` lines, gathered by key."""

    pythons: dict[str, str] = field(default_factory=dict)  # version -> executable (CPython, first found)
    platforms: dict[str, str] = field(default_factory=dict)  # version -> sysconfig platform
    glibc: str | None = None
    ld_library_path: str = ""
    cache: dict[str, str] = field(default_factory=dict)  # soname -> path (ldconfig -p)
    on_path: dict[str, str] = field(default_factory=dict)  # soname -> LD_LIBRARY_PATH directory
    in_prefix: dict[str, str] = field(default_factory=dict)  # soname -> prefix directory
    versions: list[str] = field(default_factory=list)  # "<version file> <its first bytes>"

    @classmethod
    def read(cls, output: str) -> _ProbeLines:
        lines = cls()
        for line in output.splitlines():
            key, _, value = line.partition("=")
            if key == "glibc":
                lines.glibc = value.strip() or None
            elif key == "ld_library_path":
                lines.ld_library_path = value.strip()
            elif key == "python":
                lines.add_python(value)
            elif key in ("ldconfig", "ldpath", "prefix"):
                name, _, where = value.partition(" ")
                table = {"ldconfig": lines.cache, "ldpath": lines.on_path, "prefix": lines.in_prefix}[key]
                table.setdefault(name, where.strip())
            elif key == "version":
                lines.versions.append(value.strip())
        return lines

    def add_python(self, value: str) -> None:
        try:
            version, implementation, path, platform = json.loads(value)
        except (ValueError, TypeError):
            return
        if implementation == "cpython" and version not in self.pythons:
            self.pythons[version], self.platforms[version] = str(path), str(platform)

    def runtime(self, sonames: Sequence[str]) -> tuple[dict[str, str | None], Layout | None, list[str]]:
        """Where each soname resolves (None: nowhere), the layout that makes, and notes on it."""
        runtime: dict[str, str | None] = {}
        layout: Layout | None = None
        notes: list[str] = []
        for soname in sonames:
            if soname in self.on_path:  # LD_LIBRARY_PATH comes before the loader cache
                directory, via = self.on_path[soname], "LD_LIBRARY_PATH"
            elif soname in self.cache:
                directory, via = str(self.cache[soname]).rsplit("/", 1)[0], "ld.so.conf.d"
            else:
                runtime[soname] = None
                if soname in self.in_prefix:
                    notes.append(f"{soname} is at {self.in_prefix[soname]} but not on the loader's path")
                layout = layout or Layout(runtime="absent")
                continue
            runtime[soname] = f"{directory.rstrip('/')}/{soname}"
            if layout is None or layout.runtime == "absent":
                layout = _layout_of(directory, via)  # type: ignore[arg-type]
        return runtime, layout, notes


def parse(
    output: str,
    *,
    reference: str,
    digest: str | None,
    sonames: Sequence[str],
) -> ImageFacts:
    """The facts in the probe script's output (unknown lines are ignored)."""
    lines = _ProbeLines.read(output)
    runtime, layout, notes = lines.runtime(sonames)
    if lines.ld_library_path:
        notes.append(f"LD_LIBRARY_PATH={lines.ld_library_path}")
    return ImageFacts(
        reference=reference,
        digest=digest,
        source="probe",
        pythons=dict(sorted(lines.pythons.items(), key=lambda kv: _version_key(kv[0]))),
        platforms=lines.platforms,
        glibc=lines.glibc,
        layout=layout if sonames else None,
        runtime=runtime,
        toolkit_version=_toolkit_version(lines.versions),
        notes=tuple(notes),
    )


def _layout_of(directory: str, via: Via) -> Layout:
    directory = directory.rstrip("/")
    if via == "ld.so.conf.d" and directory in SYSTEM_LIBRARY_DIRS:
        return Layout(runtime="system")
    return Layout(runtime="prefix", prefix=directory, via=via)


def _toolkit_version(lines: list[str]) -> str | None:
    """The first version file's version (`7.2.4-...` from ROCm's .info/version; CUDA's
    version.json `"version" : "13.0.1"`)."""
    for line in lines:
        _path, _, text = line.partition(" ")
        text = text.strip()
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except ValueError:
                data = {}
            found = (data.get("cuda") or {}).get("version") if isinstance(data, dict) else None
            if isinstance(found, str):
                return found
            continue
        first = text.split()[0] if text.split() else ""
        if first[:1].isdigit():
            return first
    return None


def image_digest(engine: ContainerEngine, reference: str) -> str | None:
    """The pinned digest of `reference`; else, for a tag pulled from its registry, the registry's
    digest of it (what `name:tag@sha256:...` pins: `pin: probe` records it); else the local
    image's id (`sha256:...`)."""
    _, at, digest = reference.partition("@")
    if at:
        return digest
    inspected = engine.inspect(reference, "{{json .RepoDigests}} {{.Id}}")
    repo_digests, _, found = (inspected or "").strip().rpartition(" ")
    if not found:
        return None
    return registry_digest(reference, repo_digests) or (
        found if found.startswith("sha256:") else f"sha256:{found}"
    )


def registry_digest(reference: str, repo_digests: str) -> str | None:
    """The digest among an image's RepoDigests (`["docker.io/x/y@sha256:..."]`, JSON) that belongs
    to `reference`'s repository; None where it has none (a local image)."""
    try:
        entries = json.loads(repo_digests or "null")
    except ValueError:
        return None
    name = reference.rpartition(":")[0] if ":" in reference.rpartition("/")[2] else reference
    if name.startswith("localhost/"):
        return None  # made here: its id is what names it
    for entry in entries if isinstance(entries, list) else []:
        repo, at, digest = str(entry).partition("@")
        if (
            at
            and repo.removeprefix("docker.io/") == name.removeprefix("docker.io/")
            and digest.startswith("sha256:")
        ):
            return digest
    return None


def probe(
    engine: ContainerEngine,
    reference: str,
    *,
    sonames: Sequence[str],
    prefixes: Sequence[str],
    version_files: Sequence[str],
    timeout: float = PROBE_TIMEOUT,
) -> ImageFacts:
    """Start `reference` once and read its facts."""
    roots = [p.rstrip("/") for p in prefixes]
    files = [f"{root}/{name}" for root in roots for name in version_files]
    text = script(sonames, [f"{root}/lib" for root in roots] + roots, files)
    output = run_probe(engine, reference, text, timeout=timeout)
    return parse(output, reference=reference, digest=image_digest(engine, reference), sonames=sonames)


def present(engine: ContainerEngine, reference: str) -> bool:
    return engine.has_image(reference)


class ImagesDisagree(ReleaseError):
    """An image's facts contradict the matrix, or (with --require) a pinned image has none."""

    exit_code = 1


@dataclass
class ProbeResult:
    """What `probe_matrix` found: table rows, disagreements, the registry images' new facts,
    pinned images still without facts, and images that could not be probed when they had to be."""

    rows: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    probed: dict[str, ImageFacts] = field(default_factory=dict)
    without_facts: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def require_agreement(self, facts_file: str, *, require_facts: bool) -> None:
        """Raise `ImagesDisagree` listing every problem: disagreements, failed probes and, when
        `require_facts`, pinned images without facts for their digest."""
        problems = [str(d) for d in self.disagreements]
        if require_facts:
            problems += [
                f"{facts_file}: images.{name}: {why}: run `release images probe --pull --write` where "
                "the registry is reachable, and commit the file"
                for name, why in self.without_facts.items()
            ]
        problems += self.failures
        if problems:
            lines = "\n".join(f"  {p}" for p in problems)
            msg = f"{len(problems)} problem(s) with the serving images:\n{lines}"
            raise ImagesDisagree(msg)


def _references(loaded: LoadedMatrix) -> dict[str, str | None]:
    """Image name -> what to probe: its registry reference, else its local image's tag."""
    plan = make_plan(loaded)
    local = {i.name: i.local.tag for v in plan.variants.values() for i in v.images if i.local is not None}
    return {name: image.container or local.get(name) for name, image in loaded.matrix.images.items()}


def _toolkit_places(loaded: LoadedMatrix, name: str) -> tuple[list[str], list[str]]:
    prefixes: list[str] = []
    files: list[str] = []
    for variant in loaded.matrix.variants.values():
        backend = loaded.backends.get(variant.backend)
        if name in variant.images and backend is not None and backend.toolkit is not None:
            prefixes += backend.toolkit.prefixes
            files += backend.toolkit.version_files
    return list(dict.fromkeys(prefixes)), list(dict.fromkeys(files))


def probe_matrix(
    loaded: LoadedMatrix,
    engine: ContainerEngine | None,
    recorded: Mapping[str, ImageFacts],
    *,
    names: Sequence[str] | None,
    pull: bool,
    pull_timeout: float,
    log: Callable[[str], None],
) -> ProbeResult:
    """Probe every image in use (or `names`) that this engine holds or, with `pull`, can pull;
    hold the others' recorded facts (for their digest) against the matrix instead."""
    used = [n for n in loaded.matrix.images if any(n in v.images for v in loaded.matrix.variants.values())]
    chosen = list(names) if names else used
    references = _references(loaded)
    result = ProbeResult()
    for name in chosen:
        reference = references.get(name)
        registry = loaded.matrix.images[name].container is not None
        facts, source = None, ""
        if engine is not None and reference is not None:
            try:
                if registry and pull:
                    engine.pull(reference, log=log, timeout=pull_timeout)
                if present(engine, reference):
                    prefixes, files = _toolkit_places(loaded, name)
                    log(f"probing {name}: {reference}")
                    facts = probe(
                        engine,
                        reference,
                        sonames=image_sonames(loaded, name),
                        prefixes=prefixes,
                        version_files=files,
                    )
                    source = "probe"
                    if registry:
                        result.probed[name] = facts
            except SmokeError as exc:
                result.failures.append(f"images.{name}: {exc}")
        if facts is None:
            facts = current(loaded, name, recorded.get(name))
            source = f"recorded ({facts.source})" if facts is not None else ""
        if facts is None:
            why = (
                "no engine to probe with"
                if engine is None
                else ("not held here (pass --pull)" if registry else "not made here (no local image yet)")
            )
            result.rows.append((name, "-", "-", "-", "-", f"not probed: {why}"))
            continue
        rows, problems = compare(loaded, name, facts)
        result.rows += [(r.image, r.fact, r.declared, r.found, source, r.status) for r in rows]
        result.disagreements += problems
    merged = {**recorded, **result.probed}
    pinned = pinned_without_facts(loaded, merged) | awaiting_digests(loaded, merged)
    result.without_facts = {n: why for n, why in pinned.items() if n in chosen}
    return result


def changed_since(loaded: LoadedMatrix, revision: str) -> list[str]:
    """The matrix and facts files changed since `revision` (git); both when git cannot say. A
    revision starting with `-` is refused (it would reach git as an option), and the revision
    passes after `--end-of-options` all the same."""
    if revision.startswith("-") or not revision.isprintable():
        shown = printable(revision)[:80]
        msg = f"--changed-since {shown}: not a git revision (with a leading '-' it reaches git as an option)"
        raise UsageError(msg)
    files = [loaded.path.name, FACTS_FILE]
    proc = process.run(
        ["git", "-C", str(loaded.root), "diff", "--name-only", "--end-of-options", revision, "--", *files],
        timeout=120,
    )
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        return [f"{' and '.join(files)} (git cannot compare with {revision}: {lines[-1]}; probing anyway)"]
    return [line for line in proc.stdout.splitlines() if line.strip()]
