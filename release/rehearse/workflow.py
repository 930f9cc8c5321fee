"""release.yml read as the rehearsal's job list, so the two cannot drift.

Every step of every job must be something the rehearsal can run here, or it is a `WorkflowError`
naming the job and the step:

- a single toolkit command (`python -m release ...` or `release ...`), whose standard output may
  go to `$GITHUB_OUTPUT` or `$GITHUB_ENV` (`| tee -a "$GITHUB_OUTPUT"`) or to one file (`> FILE`);
- the toolkit's installation (`python -m pip install .`, or the pinned `"$TOOLKIT"`);
- a single GitHub CLI command (`gh ...`), which the rehearsal sends to its local stand-in;
- runner setup where every line is one `sudo` command (the runner's passwordless sudo);
- one of the actions only GitHub runs, each mapped to a local equivalent (`LOCAL_ACTIONS`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from release.errors import UsageError

LOCAL_ACTIONS = {
    "actions/checkout": ("checkout", "copy of the tree"),
    "actions/setup-python": ("setup-python", "a local interpreter first on PATH"),
    "actions/upload-artifact": ("upload-artifact", "copied to the rehearsal's artifact store"),
    "actions/download-artifact": ("download-artifact", "copied from the rehearsal's artifact store"),
    "pypa/gh-action-pypi-publish": ("pypi-publish", "twine upload to the local index (127.0.0.1)"),
    "actions/attest-build-provenance": ("attest", "the subject hashed; only GitHub signs an attestation"),
    "actions/cache": ("cache", "nothing restored or saved: the job starts cold, as GitHub's first run does"),
}
_CAPTURE = re.compile(r"""\|\s*tee\s+-a\s+"?\$\{?(GITHUB_OUTPUT|GITHUB_ENV)\}?"?\s*$""")
_REDIRECT = re.compile(r""">\s*("[^"]+"|'[^']+'|[^\s|&;<>]+)\s*$""")
_INSTALL = re.compile(r"""^\S*python\S*\s+-m\s+pip\s+install(\s+--quiet)?\s+(\.|"\$TOOLKIT")$""")
_OPERATORS = re.compile(r"""(&&|\|\||[;|&<>`]|\$\()""")
SHELLS = {
    None: "bash -e {0}",
    "bash": "bash --noprofile --norc -eo pipefail {0}",
    "sh": "sh -e {0}",
    "python": "python {0}",
}
"""How GitHub runs a run: step on Linux for each `shell:` (None: no shell: anywhere, where GitHub
runs `bash -e {0}`, without pipefail); `{0}` is the script file. Any other value is a custom
template, which GitHub requires to contain `{0}`."""


class WorkflowError(UsageError):
    """A workflow the rehearsal cannot map, naming the job and the step."""


@dataclass(frozen=True)
class Step:
    job: str
    index: int
    label: str
    kind: str
    """toolkit, install, gh, sudo, or one of the LOCAL_ACTIONS kinds."""
    raw: Mapping[str, Any]
    words: tuple[str, ...] = ()
    """For toolkit steps: the command's words after `release` (as written, before expansion)."""
    capture: str | None = None
    """GITHUB_OUTPUT or GITHUB_ENV when the output is teed there."""
    shell: str | None = None
    """The step's `shell:`, else its job's or the workflow's `defaults.run.shell` (None: none set)."""

    def shell_argv(self, script: str) -> list[str]:
        """The command line GitHub runs this step's script file with."""
        return shell_argv(self.shell, script)

    @property
    def run(self) -> str:
        return str(self.raw.get("run", ""))

    @property
    def command(self) -> str | None:
        """A toolkit step's command (`build`, `smoke`, ...): its first word past the toolkit's own
        options (`--matrix FILE`, `--debug`); None for other steps."""
        words = iter(self.words)
        for word in words:
            if word == "--matrix":
                next(words, None)
            elif not word.startswith("-"):
                return word
        return None

    @property
    def local(self) -> str:
        """How the rehearsal runs it, for the table."""
        uses = str(self.raw.get("uses", "")).split("@")[0]
        if uses in LOCAL_ACTIONS:
            return "GitHub-only, here: " + LOCAL_ACTIONS[uses][1]
        return {
            "toolkit": "release " + " ".join(self.words[:1]),
            "install": 'a fresh venv, pip install . or "$TOOLKIT" (--toolkit: that wheel), lowest pins'
            " unless --latest; uv runs both unless --installer pip",
            "gh": "gh against the local GitHub stand-in",
            "sudo": "runner setup, as root (the runner's sudo)",
        }[self.kind]


@dataclass(frozen=True)
class Job:
    id: str
    raw: Mapping[str, Any]
    steps: tuple[Step, ...]

    @property
    def needs(self) -> tuple[str, ...]:
        needs = self.raw.get("needs", ())
        return (needs,) if isinstance(needs, str) else tuple(needs)

    @property
    def container(self) -> bool:
        return "container" in self.raw


@dataclass(frozen=True)
class Workflow:
    path: Path
    env: Mapping[str, Any]
    jobs: dict[str, Job]
    name: str = ""
    triggers: Mapping[str, Any] = field(default_factory=dict)
    """`on:` as a mapping (event -> its settings)."""

    def toolkit_commands(self) -> frozenset[str]:
        """The toolkit commands its steps run (`build`, `smoke`, `hardware`, ...)."""
        return frozenset(s.command for j in self.jobs.values() for s in j.steps if s.command is not None)

    @property
    def event(self) -> str:
        """The event a rehearsal stands for: a tag push, else a manual dispatch."""
        return "push" if "push" in self.triggers or not self.triggers else "workflow_dispatch"

    @property
    def inputs(self) -> Mapping[str, Any]:
        """workflow_dispatch inputs with their declarations."""
        dispatch = self.triggers.get("workflow_dispatch") or {}
        return (dispatch.get("inputs") or {}) if isinstance(dispatch, Mapping) else {}

    def concurrent(self, job: Job) -> list[Job]:
        """The jobs that run at the same time as `job` and meet while running: same needs, same
        strategy matrix (prefill and decode of one pair). GitHub runs them at once; so does the
        rehearsal, as otherwise one would wait for the other forever."""
        key = _meeting_key(job)
        return [j for j in self.jobs.values() if key is not None and _meeting_key(j) == key]

    def order(self) -> list[Job]:
        """Jobs in an order that runs each after what it needs (file order otherwise)."""
        done: list[str] = []
        pending = list(self.jobs)
        while pending:
            ready = [j for j in pending if all(n in done for n in self.jobs[j].needs)]
            if not ready:
                msg = f"{self.path.name}: jobs {', '.join(pending)} need each other or an unknown job"
                raise WorkflowError(msg)
            done.append(ready[0])
            pending.remove(ready[0])
        return [self.jobs[j] for j in done]


def _meeting_key(job: Job) -> tuple[tuple[str, ...], str] | None:
    matrix = (job.raw.get("strategy") or {}).get("matrix")
    return (job.needs, matrix) if isinstance(matrix, str) else None


def _triggers(doc: Mapping[Any, Any]) -> Mapping[str, Any]:
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on: {}}
    if isinstance(on, list):
        return {str(e): {} for e in on}
    return on if isinstance(on, Mapping) else {}


def script_lines(script: str) -> list[str]:
    """A run: script as the commands bash sees: comment lines dropped, continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _toolkit_words(command: str) -> tuple[str, ...] | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:1] == ["release"]:
        return tuple(words[1:])
    if len(words) >= 3 and "python" in Path(words[0]).name and words[1:3] == ["-m", "release"]:
        return tuple(words[3:])
    return None


def shell_argv(shell: str | None, script: str) -> list[str]:
    """`shell:` as GitHub expands it: the template's words with `{0}` replaced by the script file."""
    return [script if word == "{0}" else word for word in shlex.split(SHELLS.get(shell) or str(shell))]


def default_shell(raw: Mapping[str, Any]) -> str | None:
    """A workflow's or job's `defaults.run.shell`, if set."""
    defaults = raw.get("defaults")
    run = defaults.get("run") if isinstance(defaults, Mapping) else None
    shell = run.get("shell") if isinstance(run, Mapping) else None
    return None if shell is None else str(shell)


def _check_shell(shell: str | None, where: str) -> None:
    if shell in SHELLS:
        return
    try:
        words = shlex.split(str(shell))
    except ValueError:
        words = []
    if "{0}" not in words:
        msg = f"{where}: shell: {shell!r} is not bash, sh or python, nor a template with {{0}}"
        raise WorkflowError(msg)


def classify(job: str, index: int, raw: Mapping[str, Any], default: str | None = None) -> Step:
    """One step; `default` is the job's or the workflow's `defaults.run.shell`."""
    label = str(raw.get("name") or str(raw.get("uses", "")).split("@")[0] or f"step {index + 1}")
    where = f"job {job!r}, step {index + 1} ({label!r})"
    shell = str(raw["shell"]) if raw.get("shell") is not None else default
    if "uses" in raw:
        action = str(raw["uses"]).split("@")[0]
        if action not in LOCAL_ACTIONS:
            msg = f"{where}: the rehearsal has no local equivalent of {action}"
            raise WorkflowError(msg)
        return Step(job, index, label, LOCAL_ACTIONS[action][0], raw)
    if "run" not in raw:
        msg = f"{where}: neither run: nor uses:"
        raise WorkflowError(msg)
    _check_shell(shell, where)
    lines = script_lines(str(raw["run"]))
    if lines and all(re.fullmatch(r"sudo\s+[^;&|`]+?(\s*\|\|\s*true)?", ln) for ln in lines):
        return Step(job, index, label, "sudo", raw, shell=shell)
    if len(lines) != 1:
        msg = f"{where}: run: must be a single toolkit command, not {len(lines)} commands"
        raise WorkflowError(msg)
    command = lines[0]
    if _INSTALL.match(command):
        return Step(job, index, label, "install", raw, shell=shell)
    capture = None
    found = _CAPTURE.search(command)
    if found:
        capture, command = found.group(1), command[: found.start()].rstrip()
    else:
        redirect = _REDIRECT.search(command)
        command = command[: redirect.start()].rstrip() if redirect else command
    if _OPERATORS.search(_unquoted(command)):
        msg = f"{where}: run: must be a single toolkit command; {command!r} is a shell pipeline or list"
        raise WorkflowError(msg)
    if command.startswith("gh "):
        return Step(job, index, label, "gh", raw, shell=shell)
    words = _toolkit_words(command)
    if not words:
        msg = f"{where}: run: is not a toolkit command (`python -m release ...`): {command[:80]!r}"
        raise WorkflowError(msg)
    return Step(job, index, label, "toolkit", raw, words=words, capture=capture, shell=shell)


def _unquoted(command: str) -> str:
    """The command with quoted text blanked (operators inside quotes are data)."""
    return re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", command)


def parse(text: str, path: Path) -> Workflow:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = f"{path}: not YAML: {str(exc).splitlines()[0]}"
        raise WorkflowError(msg) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
        msg = f"{path}: no jobs: mapping"
        raise WorkflowError(msg)
    jobs: dict[str, Job] = {}
    for job_id, raw in doc["jobs"].items():
        if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
            msg = f"{path.name}: job {job_id!r}: the rehearsal runs jobs made of steps: only"
            raise WorkflowError(msg)
        shell = default_shell(raw) or default_shell(doc)
        steps = tuple(classify(str(job_id), i, s, shell) for i, s in enumerate(raw["steps"]))
        jobs[str(job_id)] = Job(str(job_id), raw, steps)
    workflow = Workflow(path, doc.get("env") or {}, jobs, str(doc.get("name") or path.stem), _triggers(doc))
    for job in jobs.values():
        unknown = [n for n in job.needs if n not in jobs]
        if unknown:
            msg = f"{path.name}: job {job.id!r} needs unknown job(s) {', '.join(unknown)}"
            raise WorkflowError(msg)
    return workflow


def load(path: Path) -> Workflow:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"{path}: cannot read the workflow ({exc.strerror})"
        raise WorkflowError(msg) from None
    return parse(text, path)
