"""One rehearsal of a workflow for a tag (`release rehearse`): the options resolved from the
command's arguments and the matrix, the jobs run, and what the outcome says."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.config.matrix import LoadedMatrix
from release.config.pythons import python
from release.errors import UsageError
from release.machine.interpreters import find_interpreter
from release.plan.version import version_from_tag
from release.rehearse import runner, workflow
from release.rehearse.narrow import narrowed


@dataclass(frozen=True)
class Rehearsed:
    """What a rehearsal ran: the workflow (its file and its jobs) and each job instance's result."""

    path: Path
    workflow: workflow.Workflow
    results: list[runner.Result]


def rehearse(
    loaded: LoadedMatrix,
    *,
    tag: str,
    workflow_path: Path | None = None,
    work: Path | None = None,
    lowest: bool = True,
    variant: str = "",
    user: str = "runner",
    repository: str = "local/rehearsal",
    env: dict[str, str] | None = None,
    inputs: dict[str, str] | None = None,
    release_assets: Path | None = None,
    pythons: Sequence[str] = (),
    floor: str | None = None,
    machines: Sequence[str] = (),
    toolkit: Path | None = None,
    installer: str = "uv",
    only: Sequence[str] = (),
    log: Callable[[str], None] = print,
) -> Rehearsed:
    """Rehearse `workflow_path` (default: release.yml beside the matrix) for `tag`, in `work`
    (default: build/rehearse/ beside the matrix), the jobs' checkout narrowed to `pythons`,
    `floor` and `machines` when given; only the jobs `only` names run, when it names any."""
    version_from_tag(tag, loaded.matrix.publish.tag_pattern)  # a wrong tag stops here, in one line
    pythons, github = _here(loaded, pythons, log)
    root = loaded.root
    path = workflow_path or root / ".github" / "workflows" / "release.yml"
    flow = workflow.load(path)
    check_jobs(flow, only)
    options = runner.Options(
        repo=root,
        workflow=flow,
        tag=tag,
        work=(work or root / "build" / "rehearse").resolve(),
        lowest=lowest,
        variant=variant,
        user=user,
        repository=repository,
        log=log,
        loaded=loaded,
        env=env or {},
        inputs=inputs or {},
        release_assets=release_assets.resolve() if release_assets else None,
        checkout_files=_checkout_files(loaded, pythons, floor, machines, log),
        toolkit=toolkit.resolve() if toolkit else None,
        installer=installer,
        only=tuple(only),
    )
    if options.toolkit is not None and (options.toolkit.suffix != ".whl" or not options.toolkit.is_file()):
        msg = f"--toolkit {toolkit}: not a wheel file (python -m pip wheel --no-deps -w dist SOURCE)"
        raise UsageError(msg)
    if options.release_assets is not None and not options.release_assets.is_dir():
        msg = f"--release-assets {release_assets}: not a directory"
        raise UsageError(msg)
    pins = "lowest allowed dependency versions" if options.lowest else "newest dependency versions"
    log(f"rehearsing {path.name} for {tag} in {options.work} ({pins}, installed by {installer})")
    results = runner.Rehearsal(options).run()
    if github:  # shown, never as passed: a free-threaded CPython exists on GitHub's runners only
        why = "no free-threaded CPython on this machine; release.yml builds and smokes them on GitHub"
        name = f"every job of Python {', '.join(github)}"
        results.append(runner.Result("github-only", name, runner.GITHUB_ONLY, reason=why))
    return Rehearsed(path, flow, results)


def _here(
    loaded: LoadedMatrix, pythons: Sequence[str], log: Callable[[str], None]
) -> tuple[Sequence[str], list[str]]:
    """(the Pythons the jobs' checkout keeps, the free-threaded ones left to GitHub): a t Python
    with no interpreter here is GitHub-only, said in one line, and the checkout goes without it."""
    asked = list(pythons) or list(loaded.matrix.python)
    github = [p for p in asked if python(p).free_threaded and find_interpreter(p) is None]
    if not github:
        return pythons, []
    kept = [p for p in asked if p not in github]
    if not kept:
        msg = f"--python {', '.join(github)}: GitHub-only (no free-threaded CPython on this machine)"
        raise UsageError(msg)
    log(f"GitHub-only: Python {', '.join(github)} (no free-threaded CPython on this machine): the jobs' "
        "checkout leaves them out and the job table lists them as github-only, not as passed")  # fmt: skip
    return kept, github


def check_jobs(flow: workflow.Workflow, only: Sequence[str]) -> None:
    """Raise `UsageError` for a `--job` that is not a job id of `flow`, naming the ones it has."""
    unknown = [job for job in only if job not in flow.jobs]
    if unknown:
        msg = f"--job {', '.join(unknown)}: not a job of {flow.path.name} (its jobs: {', '.join(flow.jobs)})"
        raise UsageError(msg)


def _checkout_files(
    loaded: LoadedMatrix,
    pythons: Sequence[str],
    floor: str | None,
    machines: Sequence[str],
    log: Callable[[str], None],
) -> dict[str, str]:
    """The jobs' checkout's matrix file narrowed to `pythons`, `floor` and `machines` ({} when not)."""
    narrow = narrowed(loaded, pythons, floor, machines)
    if narrow is None:
        return {}
    text, said = narrow
    for line in said:
        log(f"the jobs' checkout of {loaded.path.name}: {line}")
    return {loaded.path.resolve().relative_to(loaded.root.resolve()).as_posix(): text}


def local_equivalents(flow: workflow.Workflow) -> list[str]:
    """Each step that GitHub runs and the rehearsal replaces, with what runs in its place."""
    return sorted(
        {f"{s.label}: {s.local}" for j in flow.jobs.values() for s in j.steps if s.kind not in ("toolkit",)}
    )


def require_success(rehearsed: Rehearsed) -> None:
    """Raise `RehearsalFailed` naming each job that failed."""
    failed = runner.failures(rehearsed.results)
    if failed:
        lines = "\n".join(f"  {r.name}: {r.reason}" for r in failed)
        msg = f"the workflow {rehearsed.path.name} would fail: {len(failed)} job(s) failed:\n{lines}"
        raise runner.RehearsalFailed(msg)
