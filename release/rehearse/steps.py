"""One job instance's steps, run here: run: scripts with bash as GitHub runs them, and the
GitHub-only actions through their local equivalents."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from release import process
from release.errors import ReleaseError
from release.machine.containers import Container
from release.rehearse import expressions
from release.rehearse.pins import lowest_pins, wheel_lowest_pins
from release.rehearse.services import User, give, setup_python
from release.rehearse.workflow import Step, shell_argv
from release.wheel.files import file_sha256
from release.wheel.names import parse_wheel_name

_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".mypy_cache", ".ruff_cache", ".pytest_cache")
_TOP = {".git", ".venv", ".nox", "build", "wheelhouse", "dist"}
"""Not part of a fresh checkout: outputs and environments at the top of the tree."""


def _checkout_ignore(root: Path) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(_ANYWHERE(directory, names))
        return skipped | (_TOP & set(names)) if Path(directory) == root else skipped

    return ignore


_OUTPUT_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)=(.*)")


SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin")


class StepFailed(Exception):
    """A step ended badly; the message is the job table's reason."""


@dataclass
class Setup:
    """What every job of one rehearsal shares."""

    repo: Path
    work: Path
    artifacts: Path
    toolcache: Path
    user: User
    lowest: bool
    index_url: str
    gh_dir: Path
    container_host: str | None
    log: Callable[[str], None]
    checkout_files: Mapping[str, str] = field(default_factory=dict)
    """Written over the checkout's copies (path relative to the repository: text)."""
    toolkit_wheel: Path | None = None
    """`--toolkit WHEEL`, copied where the job's user reads it: installed in place of `.` or `$TOOLKIT`."""
    uv: Path | None = None
    """uv, where the job's user runs it, with its cache beside it: the install steps' venv and
    install (`--installer uv`, the default); None runs `python -m venv` and pip as written."""


@dataclass
class Instance:
    """One job instance (one matrix entry) with its workspace and evolving environment."""

    setup: Setup
    slug: str
    user: User
    contexts: dict[str, Any]
    env: dict[str, str]
    path: list[str] = field(default_factory=list)
    outputs: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    logfile: Path | None = None
    container: Container | None = None

    @property
    def workspace(self) -> Path:
        return self.setup.work / "jobs" / self.slug / "workspace"

    @property
    def home(self) -> Path:
        return self.setup.work / "jobs" / self.slug

    @property
    def summary(self) -> Path:
        """The job summary its steps append Markdown to (`$GITHUB_STEP_SUMMARY`), as on GitHub."""
        return self.home / "files" / "summary.md"

    def context(self, status: expressions.Status) -> expressions.Context:
        env = {**self.contexts.get("env", {}), **self.env}
        return expressions.Context({**self.contexts, "env": env, "steps": self.outputs}, status)

    def full_env(self, extra: Mapping[str, str]) -> dict[str, str]:
        base = {
            "HOME": str(self.user.home),
            "USER": self.user.name,
            "LANG": "C.UTF-8",
            "PATH": os.pathsep.join([*self.path, str(self.setup.gh_dir), *SYSTEM_PATH]),
        }
        if self.setup.container_host and self.container is None:
            base["CONTAINER_HOST"] = self.setup.container_host
        return {**base, **self.contexts.get("env", {}), **self.env, **extra}


def run_script(
    instance: Instance, script: str, env: dict[str, str], *, as_root: bool = False, shell: str | None = "bash"
) -> None:
    """A script as GitHub runs a run: step: written to a file, run by `shell` as GitHub expands it
    (`workflow.SHELLS`; None, no shell: set, is `bash -e`, without pipefail), as the job's user,
    output to the job log. The rehearsal's own scripts (install, publish) run with bash."""
    prelude = 'sudo() { "$@"; }\n' if as_root and os.geteuid() == 0 else ""
    files = instance.home / "files"
    files.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="step-", suffix=".sh", dir=files)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(prelude + script)
    os.chmod(name, 0o644)  # noqa: PTH101 (the job's user reads it; mkstemp makes it 0600)
    give(Path(name), instance.user)
    bash = shell_argv(shell, name)
    if instance.container is not None:
        passed = {k: v for k, v in env.items() if k not in ("PATH", "HOME", "USER", "CONTAINER_HOST")}
        argv = [*instance.container.prefix(passed, workdir=instance.workspace), *bash]
    else:
        argv = bash if as_root else [*instance.user.switch, *bash]
    logfile = instance.logfile or instance.home / "job.log"
    with logfile.open("a", encoding="utf-8", errors="replace") as log:
        log.write(f"$ {script.strip()}\n")
        log.flush()
        try:
            proc = process.stream(argv, timeout=process.STEP_S, cwd=instance.workspace, env=env, to=log)
        except process.TimedOut as exc:
            raise StepFailed(str(exc)) from None
    if proc.returncode != 0:
        msg = f"exit {proc.returncode}"
        raise StepFailed(msg)


def _read_outputs(instance: Instance, step_id: str | None, output: Path, genv: Path) -> None:
    if step_id and output.exists():
        values = instance.outputs.setdefault(step_id, {"outputs": {}})["outputs"]
        values.update(_key_values(output.read_text(encoding="utf-8")))
    if genv.exists():
        instance.env.update(_key_values(genv.read_text(encoding="utf-8")))
        genv.write_text("", encoding="utf-8")


def _key_values(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        heredoc = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_-]*)<<(\S+)", line)
        if heredoc:
            body = []
            for inner in lines:
                if inner == heredoc.group(2):
                    break
                body.append(inner)
            found[heredoc.group(1)] = "\n".join(body)
            continue
        match = _OUTPUT_LINE.fullmatch(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def run_step(instance: Instance, step: Step, status: expressions.Status) -> str:
    """Run one step; returns what the table says about it ('' for a plain run). `StepFailed` on failure."""
    context = instance.context(status)
    step_env = {
        k: expressions.text(expressions.substitute(str(v), context))
        for k, v in (step.raw.get("env") or {}).items()
    }
    with_ = {
        k: expressions.text(expressions.substitute(str(v), context))
        for k, v in (step.raw.get("with") or {}).items()
    }
    files = instance.home / "files"
    files.mkdir(parents=True, exist_ok=True)
    output, genv = files / f"output-{step.index}", files / f"env-{step.index}"
    output.write_text("", encoding="utf-8")
    genv.write_text("", encoding="utf-8")
    summary = instance.summary
    if not summary.exists():
        summary.write_text("", encoding="utf-8")
    give(files, instance.user)
    github_env = {
        "GITHUB_OUTPUT": str(output),
        "GITHUB_ENV": str(genv),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(instance.workspace),
    }
    env = instance.full_env({**step_env, **github_env})
    kind = step.kind
    if kind == "checkout":
        shutil.rmtree(instance.workspace, ignore_errors=True)
        shutil.copytree(
            instance.setup.repo,
            instance.workspace,
            symlinks=True,
            ignore=_checkout_ignore(instance.setup.repo),
        )
        for relative, text in instance.setup.checkout_files.items():
            (instance.workspace / relative).write_text(text, encoding="utf-8")
        give(instance.home, instance.user)
        changed = (
            f" ({', '.join(instance.setup.checkout_files)} narrowed)" if instance.setup.checkout_files else ""
        )
        return f"copied {instance.setup.repo}{changed}"
    if kind == "setup-python":
        version = with_.get("python-version", "")
        bindir = setup_python(version, instance.setup.toolcache, instance.user)  # read-only to the user
        instance.path.insert(0, str(bindir))
        location = (bindir / "python").resolve().parents[1]
        instance.env["pythonLocation"] = str(location)
        return f"Python {version}: {location}"
    if kind == "install":
        return _install(instance, step, env)
    if kind == "upload-artifact":
        return _upload(instance, with_)
    if kind == "download-artifact":
        return _download(instance, with_)
    if kind == "pypi-publish":
        return _publish(instance, with_, env)
    if kind == "cache":
        return f"nothing restored into {with_.get('path', '?')}: the job starts cold (GitHub's first run)"
    if kind == "attest":
        subject = instance.workspace / str(with_.get("subject-path", ""))
        if not subject.is_file():
            msg = f"{step.label}: no subject {subject} to attest"
            raise ReleaseError(msg)
        return f"would attest {subject.name} (sha256 {file_sha256(subject)}); only GitHub signs it"
    note = ""
    if kind == "toolkit" and step.words[:2] == ("toolchain", "free-disk"):
        # A runner's disk is throwaway; this machine's is not: list what would go, delete nothing.
        env["INSTALL_DRY_RUN"] = "1"
        note = "dry run here: lists what a runner would free"
    run_script(instance, step.run, env, as_root=kind == "sudo", shell=step.shell)
    _read_outputs(instance, step.raw.get("id"), output, genv)
    return note


def _install(instance: Instance, step: Step, env: dict[str, str]) -> str:
    """The toolkit's installation (`pip install .` or `pip install "$TOOLKIT"`): a fresh venv of
    that python, first on PATH, holding the checkout, the pinned requirement from the index, or
    `--toolkit WHEEL` in place of either; at the lowest allowed versions of the toolkit's
    dependencies unless --latest (read from the checkout's pyproject.toml, else the wheel's METADATA).

    On this machine's runner (not in a job container) uv makes the venv (`--seed`: pip in it, as
    `python -m venv` leaves it) and installs the same requirement under the same constraints, in
    about a second where pip takes 15 s of CPU; `--installer pip` runs venv and pip as written."""
    words = shlex.split(step.run.strip())
    python = os.path.expandvars(words[0]) if instance.container is None else words[0]
    venv = instance.home / "toolkit-venv"
    files = instance.home / "files"
    venv_python = shlex.quote(str(venv / "bin" / "python"))
    uv = instance.setup.uv if instance.container is None else None
    if uv is not None:
        env = {**env, **uv_env(uv)}
        found = f'"$(command -v {shlex.quote(_expand(python, env))})"'  # the workflow's python, from PATH
        script = f"{shlex.quote(str(uv))} venv --quiet --seed --python {found} {shlex.quote(str(venv))}"
        run_script(instance, script, env)
    else:
        run_script(instance, f"{shlex.quote(_expand(python, env))} -m venv {shlex.quote(str(venv))}", env)
    wheel = instance.setup.toolkit_wheel
    said = "pip install ."
    if words[-1] != ".":
        pinned = env.get("TOOLKIT", "")
        if not pinned:
            msg = "the workflow's env sets no TOOLKIT (the pinned toolkit this step installs)"
            raise StepFailed(msg)
        if wheel is None:
            wheel = _download_pinned(instance, venv_python, pinned, env)
            said = f"pip install {pinned} (from the index)"
        else:
            _check_pin(wheel, pinned)
            said = f"pip install {wheel.name} (--toolkit, in place of {pinned})"
    elif wheel is not None:
        said = f"pip install {wheel.name} (--toolkit, in place of .)"
    if uv is not None:
        pip = f"{shlex.quote(str(uv))} pip install --quiet --python {venv_python}"
    else:
        pip = f"{venv_python} -m pip install --quiet"
    pins: list[str] = []
    if instance.setup.lowest:
        pyproject = instance.workspace / "pyproject.toml"
        pins = wheel_lowest_pins(wheel) if wheel is not None else lowest_pins(pyproject)
        constraints = files / "lowest-pins.txt"
        constraints.write_text("\n".join(pins) + "\n", encoding="utf-8")
        give(constraints, instance.user)
        pip += f" --constraint {shlex.quote(str(constraints))}"
        instance.env["PIP_CONSTRAINT"] = str(constraints)
    run_script(instance, f"{pip} {shlex.quote(str(wheel)) if wheel is not None else '.'}", env)
    instance.path.insert(0, str(venv / "bin"))
    by = ", by uv (venv --seed, pip install)" if uv is not None else ""
    return f"fresh venv, {said}{by}" + (f" with {len(pins)} lowest pins ({', '.join(pins)})" if pins else "")


def uv_env(uv: Path) -> dict[str, str]:
    """uv in a job: its cache beside it (one per rehearsal, the job's user owns it), the system's CA
    store (as pip's), no configuration file of this machine's and no interpreter download."""
    return {
        "UV_CACHE_DIR": str(uv.parent / "cache"),
        "UV_NATIVE_TLS": "1",
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
    }


def _download_pinned(instance: Instance, pip_python: str, pinned: str, env: dict[str, str]) -> Path:
    """The pinned toolkit's wheel from the index (its METADATA gives the lowest pins)."""
    into = instance.home / "files" / "toolkit"
    into.mkdir(parents=True, exist_ok=True)
    give(into, instance.user)
    dest = shlex.quote(str(into))
    script = f"{pip_python} -m pip download --quiet --no-deps --dest {dest} {shlex.quote(pinned)}"
    run_script(instance, script, env)
    found = sorted(into.glob("*.whl"))
    if len(found) != 1:
        msg = f"pip download {pinned}: expected one wheel, got {', '.join(p.name for p in found) or 'none'}"
        raise StepFailed(msg)
    return found[0]


def _check_pin(wheel: Path, pinned: str) -> None:
    """`--toolkit WHEEL` stands in for the workflow's pinned toolkit only where the pin admits it."""
    try:
        requirement = Requirement(pinned)
        name = parse_wheel_name(wheel.name)
    except (InvalidRequirement, ValueError, ReleaseError) as exc:
        msg = f"--toolkit {wheel.name} in place of TOOLKIT={pinned!r}: {exc}"
        raise StepFailed(msg) from None
    if canonicalize_name(requirement.name) != name.distribution or not requirement.specifier.contains(
        name.version, prereleases=True
    ):
        msg = (
            f"--toolkit {wheel.name} is {name.distribution} {name.version}, which the workflow's "
            f"TOOLKIT={pinned} does not admit: build the toolkit wheel of that version, or run "
            "`release init --ci github --force` with this toolkit to pin it"
        )
        raise StepFailed(msg)


def _flag(with_: Mapping[str, str], key: str) -> bool:
    """A boolean input (YAML `true` arrives as 'True')."""
    return with_.get(key, "false").strip().lower() == "true"


def _expand(word: str, env: Mapping[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), word)


def _upload(instance: Instance, with_: Mapping[str, str]) -> str:
    name = with_.get("name") or "artifact"
    patterns = [p.strip() for p in with_.get("path", "").splitlines() if p.strip()]
    matched: list[Path] = []
    for pattern in patterns:
        matched += [p for p in sorted(instance.workspace.glob(pattern)) if p.is_file()]
    if not matched:
        if with_.get("if-no-files-found", "warn") == "error":
            msg = f"upload-artifact {name}: no files match {', '.join(patterns)}"
            raise StepFailed(msg)
        return "no files"
    base = Path(os.path.commonpath([str(p.parent) for p in matched]))
    target = instance.setup.artifacts / name
    shutil.rmtree(target, ignore_errors=True)
    for path in matched:
        dest = target / path.relative_to(base)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    return f"{len(matched)} file(s) as artifact {name}"


def _download(instance: Instance, with_: Mapping[str, str]) -> str:
    into = instance.workspace / with_.get("path", ".")
    store = instance.setup.artifacts
    names = (
        [with_["name"]]
        if with_.get("name")
        else sorted(p.name for p in store.iterdir())
        if store.is_dir()
        else []
    )
    merge = _flag(with_, "merge-multiple") or bool(with_.get("name"))
    for name in names:
        if not (store / name).is_dir():
            msg = f"download-artifact: no artifact named {name}"
            raise StepFailed(msg)
        shutil.copytree(store / name, into if merge else into / name, dirs_exist_ok=True)
    into.mkdir(parents=True, exist_ok=True)
    give(instance.workspace, instance.user)
    return f"{len(names)} artifact(s) into {with_.get('path', '.')}"


def _publish(instance: Instance, with_: Mapping[str, str], env: dict[str, str]) -> str:
    """pypa/gh-action-pypi-publish: twine upload of packages-dir/* to the local index."""
    packages = with_.get("packages-dir", "dist/").rstrip("/")
    url = instance.setup.index_url
    skip = " --skip-existing" if _flag(with_, "skip-existing") else ""
    script = (
        f"python -m twine upload --non-interactive --repository-url {shlex.quote(url)} "
        f"-u rehearsal -p rehearsal{skip} {shlex.quote(packages)}/*"
    )
    run_script(instance, script, env)
    return f"twine upload {packages}/* to {url}"
