"""Making a local image from its recipe: the plan of bases and layers is Python's, the work is the two
shell leaves of scripts/make-image.sh (`base`: debootstrap, interpreters, import; `layer`: a script
in a container of a base, committed).

An image whose label is its recipe's inputs hash is kept; an image of the same inputs under another
tag is tagged; a layer's base is made (or found) first, under its own tag's lock. Every call is one
line of /var/tmp/release-make-image/calls.log (epoch seconds, tag, inputs, what it did: up-to-date,
tagged, layer or made, seconds, who asked) and its inputs are inputs/<hash>.txt there, which
tests/ci_time.py reads to say why one tag was made twice."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from release import process, settings
from release.config.pythons import python
from release.config.resources import missing_script_message, toolkit_scripts
from release.errors import ToolchainError
from release.machine import therock
from release.machine.containers import DERIVED_LABEL, INPUTS_LABEL, ContainerEngine, ContainerStepFailed
from release.machine.emulation import CROSS_LABEL
from release.machine.lock import build_lock
from release.machine.recipe import LEAF_SCRIPTS, Digests, Recipe, inputs_hash, inputs_text, read_digests
from release.wheel.names import manylinux_interpreter

MAKE_TIMEOUT = 3600
RECORD = Path("/var/tmp/release-make-image")  # noqa: S108 (machine-wide, root-owned)
"""The per-tag locks, calls.log and inputs/<hash>.txt."""
LABEL = INPUTS_LABEL
_DERIVED = f'{{{{index .Labels "{DERIVED_LABEL}"}}}}{{{{index .Labels "{CROSS_LABEL}"}}}}'
"""A Go template that prints something for an image committed over another: DERIVED_LABEL, or a
cross image's own label (`release.builder.cross`: before DERIVED_LABEL, a cross image also kept
its base's inputs label)."""
"""The label that carries an image's inputs hash (make-image.sh writes the one it is given)."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class Made:
    """What making one tag did (`up-to-date`, `tagged`, `layer`, `made`, calls.log's words)."""

    did: str
    seconds: float


def one_maker(log: Log, tag: str) -> contextlib.AbstractContextManager[None]:
    """Held while `tag` is made or checked: one maker per tag on a machine (the leaves keep their
    scratch per run and their logs per tag; the debootstrap cache has a lock of its own)."""
    name = ".make-" + re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".lock"
    what = f"making the local image {tag}"
    return build_lock(RECORD, what=what, wait_s=MAKE_TIMEOUT, say=log, name=name, error=ToolchainError)


@contextlib.contextmanager
def _one_recipe(inputs: str) -> Iterator[None]:
    """One maker per recipe, whatever its tag: two tags of one recipe asked for side by side are one
    image, the second a tag of the first (waits silently, as the per-tag lock has said its say)."""
    fd = os.open(RECORD / f".inputs-{inputs[:32]}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def make(engine: ContainerEngine, recipe: Recipe, *, log: Log, force: bool = False) -> Made:
    """Make `recipe.tag` unless it is up to date (per-tag lock held here). A leaf script the
    installed toolkit lacks is one line naming the toolkit, the file and the fix."""
    for name in LEAF_SCRIPTS:
        if not (toolkit_scripts() / name).is_file():
            raise ToolchainError(missing_script_message(name, f"making the local image {recipe.tag}"))
    RECORD.joinpath("inputs").mkdir(parents=True, exist_ok=True)
    with one_maker(log, recipe.tag):
        return _make(engine, recipe, read_digests(toolkit_scripts()), log=log, force=force)


def _make(engine: ContainerEngine, recipe: Recipe, digests: Digests, *, log: Log, force: bool) -> Made:
    started = time.monotonic()
    text = inputs_text(recipe, digests)
    inputs = inputs_hash(text)
    kept = RECORD / "inputs" / f"{inputs}.txt"
    if not kept.exists():
        kept.write_text(text + "\n", encoding="utf-8")

    def done(did: str) -> Made:
        _remember(recipe.tag, inputs, did, started)
        return Made(did, time.monotonic() - started)

    have = engine.inspect(recipe.tag, '{{index .Labels "' + LABEL + '"}} ' + _DERIVED) or ""
    if not force and have.split() == [inputs]:  # a derived image under the recipe's tag is remade
        log(f"{recipe.tag} is up to date (inputs {inputs[:12]}): nothing to do")
        return done("up-to-date")
    old = engine.image_id(recipe.tag) or ""
    with _one_recipe(inputs):
        same = "" if force else _with_inputs(engine, inputs)
        if same:
            try:
                engine.tag(same, recipe.tag)
            except ContainerStepFailed as exc:
                raise ToolchainError(str(exc)) from None
            _drop_old(engine, recipe.tag, old)
            log(f"{recipe.tag}: the image made from the same inputs ({same[:12]}), tagged")
            return done("tagged")
        layer = recipe.layer()
        if layer is None:
            _leaf(base_argv(recipe, inputs), recipe.tag, log=log)
        else:
            kind, under = layer
            under_inputs = inputs_hash(inputs_text(under, digests))
            under = dataclasses.replace(under, tag=f"localhost/release-{kind}-base-{under_inputs[:16]}")
            log(f"the image without its {kind}: {under.tag}")
            with one_maker(lambda line: log(f"  {line}"), under.tag):
                _make(engine, under, digests, log=lambda line: log(f"  {line}"), force=False)
            base_id = engine.image_id(under.tag) or ""
            argv = layer_argv(recipe, kind, base_id, inputs)
            if kind == "layout" and recipe.runtime_via in therock.LAYOUTS:
                staged = therock.stage(engine, base_id, recipe)
                try:
                    _leaf(["layer", "--mount", str(staged), *argv[1:]], recipe.tag, log=log)
                finally:
                    shutil.rmtree(staged, ignore_errors=True)
            else:
                _leaf(argv, recipe.tag, log=log)
        _drop_old(engine, recipe.tag, old)
        check_image(engine, recipe, log=log)
        size = (engine.inspect(recipe.tag, "{{.Size}}") or "").strip()
        log(f"{recipe.tag}: image size {int(size or 0) / 2**20:.0f} MiB")
        return done("made" if layer is None else "layer")


def _python_dirs(recipe: Recipe, versions: tuple[str, ...]) -> list[str]:
    return [arg for v in versions for arg in ("--python-dir", f"{v}={recipe.home(v)}")]


def _head(leaf: str, recipe: Recipe, inputs: str) -> list[str]:
    """Both leaves' first words: the leaf, the tag, its label and its interpreters' label."""
    return [leaf, "--tag", recipe.tag, "--label", f"{LABEL}={inputs}", "--pythons", ",".join(recipe.pythons)]


def base_argv(recipe: Recipe, inputs: str) -> list[str]:
    """The `base` leaf's arguments: debootstrap, the interpreters, the toolchain, import."""
    argv = [*_head("base", recipe, inputs), "--suite", recipe.suite, "--mirror", recipe.mirror]
    argv += ["--include", ",".join(recipe.include)]
    argv += _python_dirs(recipe, recipe.all_pythons)
    if recipe.minbase:
        return [*argv, "--minbase-only"]
    argv += ["--env-python", recipe.env_python or "none", "--auditwheel", recipe.auditwheel]
    return [*argv, "--gcc", recipe.gcc] if recipe.gcc else argv


def layer_argv(recipe: Recipe, kind: str, base: str, inputs: str) -> list[str]:
    """The `layer` leaf's arguments: the kind's script in a container of `base`, committed."""
    argv = [*_head("layer", recipe, inputs), "--from", base]
    argv += [arg for v in recipe.dropped for arg in ("--drop", f"{v}={recipe.home(v)}")]
    if kind == "layout" and recipe.runtime_via in therock.LAYOUTS:
        return [*argv, *therock.layer_args(recipe)]
    if kind == "layout":
        if recipe.runtime_via == "LD_LIBRARY_PATH":
            argv += ["--env", f"LD_LIBRARY_PATH={recipe.runtime_prefix}"]
        return [*argv, "layout", recipe.runtime_prefix, recipe.runtime_via, ",".join(recipe.runtime_libs)]
    if kind == "toolkit":
        newest = recipe.pythons[-1]
        return [*argv, "toolkit", recipe.toolkit_install, f"{recipe.home(newest)}/bin"]
    archives = [word for archive, names in recipe.by_archive.items() for word in (archive, " ".join(names))]
    return [*argv, "packages", recipe.mirror, recipe.suite, *archives]


def _leaf(argv: list[str], tag: str, *, log: Log) -> None:
    """Run one leaf of make-image.sh, its step lines passed on as they come (minutes of work); one
    line naming what failed when it fails."""
    returncode, last = _run_streamed(["bash", str(toolkit_scripts() / "make-image.sh"), *argv], log=log)
    if returncode != 0:
        msg = f"could not make image {tag}: {last or 'make-image.sh failed'}"
        raise ToolchainError(msg)


def _run_streamed(argv: list[str], *, log: Log) -> tuple[int, str]:
    """(exit status, its last non-empty line); one deadline bounds the whole run."""
    last = ""

    def said(line: str) -> None:
        nonlocal last
        if line:
            last = line
            log(line)

    try:
        proc = process.run(argv, timeout=MAKE_TIMEOUT, merge=True, lines=said)
    except process.TimedOut:
        return 1, f"make-image.sh ran past {MAKE_TIMEOUT} s and was stopped"
    return proc.returncode, last


def _with_inputs(engine: ContainerEngine, inputs: str) -> str:
    """The newest image (any tag) labelled `inputs`, or ''; never one committed over such an image
    (a cross image: an older toolkit's kept its base's label, and no DERIVED_LABEL), which is
    not the recipe's. `podman images` fails now and then while another process removes an image
    (it reads each image's labels; podman #24800): asked again, so that a passing failure is not
    taken for "none" and the recipe made twice side by side."""
    last = ""
    shown = "{{.Id}} " + _DERIVED
    for attempt in range(1, 6):
        proc = engine.labelled(LABEL, inputs, shown)
        if proc.returncode == 0:
            rows = [line.split() for line in proc.stdout.splitlines()]
            return next((r[0] for r in rows if len(r) == 1 and re.fullmatch(r"[0-9a-f]{64}", r[0])), "")
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        if attempt < 5:
            time.sleep(attempt)
    msg = f"`{engine} images` failed five times: is there an image of inputs {inputs[:12]}? ({last})"
    raise ToolchainError(msg)


def _drop_old(engine: ContainerEngine, tag: str, old: str) -> None:
    """The image `tag` named before, once nothing else names it."""
    if old and old != (engine.image_id(tag) or ""):
        engine.remove_image(old)


def check_image(engine: ContainerEngine, recipe: Recipe, *, log: Log) -> None:
    """Every interpreter runs, the compilers are the asked GCC, a venv can be made and filled."""
    tag = recipe.tag

    def run(script: str) -> str:
        proc = engine.run_script(tag, script)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
            msg = f"checking {tag} failed: {last}"
            raise ToolchainError(msg)
        return proc.stdout

    if recipe.all_pythons:
        probe = "".join(
            f"printf '%s ' {manylinux_interpreter(v)}; {manylinux_interpreter(v)} -c 'import sys, ssl, venv; "
            "print(sys.version.split()[0])' || exit 1; "
            for v in recipe.all_pythons
        )
        for line in run(probe).splitlines():
            where, _, version = line.partition(" ")
            log(f"in {tag}: {where} is {version}")
    if recipe.gcc:
        majors = {v.split(".")[0] for v in run("for c in cc c++ gcc g++; do $c -dumpversion; done").split()}
        if majors != {recipe.gcc}:
            msg = f"cc, c++, gcc, g++ in {tag} report GCC {', '.join(sorted(majors))}, not GCC {recipe.gcc}"
            raise ToolchainError(msg)
        log(f"in {tag}: {run('c++ --version').splitlines()[0]}")
    if recipe.pythons:
        # The venv a smoke leg makes: no ensurepip, the interpreter's pip aimed at it (machine/venv.py).
        py = manylinux_interpreter(recipe.pythons[0])
        run(f"{py} -m venv --without-pip /tmp/v && {py} -m pip --python /tmp/v/bin/python --version")
        log(f"in {tag}: python -m venv works, and its pip installs into one (--python)")


def _cp(version: str) -> str:
    """`cp314-cp314t`: the directory of /opt/python an interpreter has in a build image."""
    return Path(python(version).manylinux_path()).name


def _remember(tag: str, inputs: str, did: str, started: float) -> None:
    """One calls.log line (tests/ci_time.py reads it): who asked is RELEASE_IMAGE_CALLER (the test
    suite's running test), else this process."""
    by = settings.raw("RELEASE_IMAGE_CALLER")
    if not by:
        with contextlib.suppress(OSError):
            by = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    by = re.sub(r" \([^)]*\)$", "", by.strip())
    line = f"{int(time.time())}\t{tag}\t{inputs}\t{did}\t{int(time.monotonic() - started)}\t{by}\n"
    with contextlib.suppress(OSError), (RECORD / "calls.log").open("a", encoding="utf-8") as out:
        out.write(line)
