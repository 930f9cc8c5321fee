"""The rehearsal: release.yml's jobs for one tag, run here in the workflow's order.

Jobs run as the unprivileged runner user (GitHub's ubuntu runners run steps as `runner`), except
`container:` jobs, which run as root in their image as on GitHub. A job whose `needs` failed is
skipped unless its `if:` says otherwise, as in Actions; the result is a job table.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from release import table
from release.config.matrix import LoadedMatrix
from release.errors import ReleaseError, SmokeError, ToolchainError, UsageError
from release.machine.containers import STANDINS_ENV, ContainerEngine
from release.plan.steps import make_plan
from release.rehearse import expressions, gh_standin
from release.rehearse.services import PODMAN, Services, User, give, reachable, runner_user
from release.rehearse.steps import Instance, Setup, StepFailed, run_step
from release.rehearse.workflow import Job, Workflow
from release.variants.resolution import uv_binary
from release.wheel.names import is_report

RUN_ID = "1"
BUILD_IMAGE_COMMANDS = frozenset({"build", "reproduce", "smoke"})
"""The toolkit commands that run in a variant's build image (smoke: a leg this host cannot run)."""
SERVING_IMAGE_COMMANDS = frozenset({"smoke", "hardware"})
"""The toolkit commands that run in serving images (or their stand-ins)."""


class RehearsalFailed(ReleaseError):
    """The workflow would fail: names the jobs that did."""


@dataclass
class Options:
    repo: Path
    workflow: Workflow
    tag: str
    work: Path
    lowest: bool = True
    variant: str = ""
    user: str = "runner"
    repository: str = "local/rehearsal"
    log: Callable[[str], None] = print
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for every job."""
    loaded: LoadedMatrix | None = None
    """The matrix, for the local images that stand in for registry images."""
    inputs: dict[str, str] = field(default_factory=dict)
    """workflow_dispatch inputs (a declared `tag` input defaults to the rehearsed tag)."""
    release_assets: Path | None = None
    """Wheels and verify reports the tag's GitHub Release already holds (for hardware.yml)."""
    checkout_files: dict[str, str] = field(default_factory=dict)
    """Files (path relative to the repository: text) the jobs' checkout holds in place of the
    repository's own: a narrowed matrix.yaml (`release rehearse --python/--floor`)."""
    toolkit: Path | None = None
    """The toolkit wheel every install step installs in place of `.` or the pinned `$TOOLKIT`."""
    installer: str = "uv"
    """What the install steps run on this machine: uv (venv --seed, pip install) or pip as written."""
    only: tuple[str, ...] = ()
    """The job ids that run (`release rehearse --job`); every other job is skipped, as a job whose
    `if:` is false, and the jobs that need it follow their own `if:`, as on GitHub. Empty: all."""


GITHUB_ONLY = "github-only"
"""The status of jobs this machine cannot run (free-threaded Pythons): neither success nor failure."""


@dataclass
class Result:
    job: str
    name: str
    status: str
    """success, failure or skipped (Actions' words), or github-only."""
    seconds: float = 0.0
    who: str = ""
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    instance: Instance | None = None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "job"


class Rehearsal:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.results: list[Result] = []
        self.jobs: dict[str, dict[str, Any]] = {}
        """needs context: job id -> {result, outputs}."""

    def _setup(self, services: Services, user: User) -> Setup:
        work = self.o.work
        gh_dir = work / "gh"
        gh_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(gh_standin.__file__, gh_dir / "gh_standin.py")
        store = work / "github"
        store.mkdir(parents=True, exist_ok=True)
        wrapper = gh_dir / "gh"
        wrapper.write_text(
            f'#!/bin/sh\nexec python3 "{gh_dir}/gh_standin.py" "{store}" "$@"\n', encoding="utf-8"
        )
        wrapper.chmod(0o755)
        give(store, user)
        index = services.start_index()
        wheel = None
        if self.o.toolkit is not None:
            # Where the runner user reads it (a test's or a user's directory may be private).
            wheel = work / "toolkit" / self.o.toolkit.name
            wheel.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.o.toolkit, wheel)
            give(wheel.parent, user)
        return Setup(
            repo=self.o.repo,
            work=work,
            artifacts=store / "runs" / RUN_ID / "artifacts",  # where `gh run download` finds them
            toolcache=work / "toolcache",
            user=user,
            lowest=self.o.lowest,
            index_url=index,
            gh_dir=gh_dir,
            container_host=services.start_container_service(user),
            log=self.o.log,
            checkout_files=self.o.checkout_files,
            toolkit_wheel=wheel,
            uv=self._uv(user),
        )

    def _uv(self, user: User) -> Path | None:
        """uv where the job's user runs it (this toolkit's own, copied: a venv may be private), with
        an empty cache beside it that the jobs share; None for `--installer pip`."""
        if self.o.installer != "uv":
            return None
        found = uv_binary()
        if found is None:
            msg = "--installer uv: no uv here (the toolkit depends on it: pip install uv), or --installer pip"
            raise UsageError(msg)
        home = self.o.work / "uv"
        (home / "cache").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, home / "uv")
        (home / "uv").chmod(0o755)
        give(home, user)
        return home / "uv"

    def contexts(self) -> dict[str, Any]:
        ref = f"refs/tags/{self.o.tag}"
        flow = self.o.workflow
        github = {
            "ref": ref, "ref_name": self.o.tag, "ref_type": "tag", "event_name": flow.event,
            "repository": self.o.repository, "repository_owner": self.o.repository.split("/")[0],
            "token": "rehearsal-token", "workflow": flow.name, "run_id": RUN_ID, "run_attempt": "1",
        }  # fmt: skip
        inputs: dict[str, str] = {}
        for key, declared in flow.inputs.items():
            default = declared.get("default", "") if isinstance(declared, dict) else ""
            inputs[str(key)] = self.o.tag if key == "tag" else expressions.text(default)
        inputs |= {"variant": self.o.variant} if self.o.variant else {}
        inputs |= self.o.inputs
        base = {"github": github, "inputs": inputs, "vars": {}, "secrets": {}, "runner": {"os": "Linux"}}
        env: dict[str, str] = {}
        for key, value in self.o.workflow.env.items():
            env[key] = expressions.text(
                expressions.substitute(str(value), expressions.Context({**base, "env": env}))
            )
        return {**base, "env": env, "needs": {}}

    def run(self) -> list[Result]:
        work = self.o.work
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        work.chmod(0o755)  # the runner user passes through to its job directories
        user = runner_user(self.o.user)
        if not reachable(work, user):
            msg = (
                f"user {user.name} cannot reach {work} (a directory above it is private, such as "
                "/root or pytest's): pass --work under a directory others may enter, e.g. /tmp/rehearse"
            )
            raise ToolchainError(msg)
        services = Services(work)
        try:
            setup = self._setup(services, user)
            base = self.contexts()
            base["env"] = {
                "CI": "true", "GITHUB_REPOSITORY": self.o.repository, "GITHUB_REF": f"refs/tags/{self.o.tag}",
                "GITHUB_REF_NAME": self.o.tag, "GITHUB_REF_TYPE": "tag", "RUNNER_TEMP": str(work / "tmp"),
                "GITHUB_RUN_ID": RUN_ID, "GITHUB_RUN_ATTEMPT": "1", **self._standins(),
                **self.o.env, **base["env"],
            }  # fmt: skip
            (work / "tmp").mkdir()
            give(work / "tmp", user)
            if self.o.loaded is not None and os.geteuid() == 0:
                self._prepare_images(self.o.loaded)
            if self.o.release_assets is not None:
                self._seed_release(work / "github", self.o.release_assets, user)
            jobs = self.o.workflow.order()
            done: set[str] = set()
            for number, job in enumerate(jobs, 1):
                if job.id in done:
                    continue
                together = [j for j in self.o.workflow.concurrent(job) if j.id not in done] or [job]
                threads = [
                    threading.Thread(
                        target=self._job_or_failure,
                        args=(j, jobs.index(j) + 1, len(jobs), setup, base),
                        daemon=True,
                    )
                    for j in together
                ]
                if len(threads) > 1:
                    self.o.log(
                        f"[{number}/{len(jobs)}] {', '.join(j.id for j in together)}: run at the same time"
                    )
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                done |= {j.id for j in together}
        finally:
            services.close()
        self._write_summaries(work)
        return self.results

    def _write_summaries(self, work: Path) -> None:
        """Every job's summary in one file, in the order the jobs ran: what GitHub shows on the
        run's page, here as `summary.md` beside the logs."""
        parts = []
        for result in self.results:
            summary = result.instance.summary if result.instance is not None else None
            text = summary.read_text(encoding="utf-8").strip() if summary and summary.is_file() else ""
            if text:
                parts.append(f"## {result.name}\n\n{text}\n")
        if parts:
            (work / "summary.md").write_text("\n".join(parts), encoding="utf-8")
            self.o.log(f"job summaries ({len(parts)} job(s) wrote tables): {work / 'summary.md'}")

    def _standins(self) -> dict[str, str]:
        """The serving images no registry gives here, mapped to their local stand-ins (made by
        `_prepare_images`); `release hardware --image` runs the stand-in and says so."""
        if self.o.loaded is None or STANDINS_ENV in self.o.env:
            return {}
        pairs = {}
        for variant in make_plan(self.o.loaded).variants.values():
            for image in variant.images:
                if image.image.container and image.standin is not None and image.local is None:
                    pairs[image.image.container] = image.standin.tag
        return {STANDINS_ENV: ",".join(f"{k}={v}" for k, v in sorted(pairs.items()))} if pairs else {}

    def _seed_release(self, store: Path, assets: Path, user: User) -> None:
        """The tag's GitHub Release as release.yml left it: its wheels and verify reports."""
        place = store / "releases" / self.o.repository / self.o.tag
        place.mkdir(parents=True, exist_ok=True)
        found = sorted(p for p in assets.rglob("*") if p.suffix == ".whl" or is_report(p))
        if not found:
            msg = f"--release-assets {assets}: no wheels (and their verify reports) in it"
            raise ToolchainError(msg)
        for path in found:
            shutil.copyfile(path, place / path.name)
        (place / "release.json").write_text(f'{{"tag": "{self.o.tag}", "seeded_from": "{assets}"}}')
        give(store, user)
        self.o.log(f"GitHub Release {self.o.tag} (stand-in): {len(found)} assets from {assets}")

    def _prepare_images(self, loaded: LoadedMatrix) -> None:
        """The local images stand in for registry images (none is reachable here): made or
        reused as root before the jobs, as a registry holds them before a run. Only the kinds the
        workflow's commands use: hardware.yml builds nothing, so it gets no build image (making
        one takes minutes, and a trimmed matrix's recipe would replace the full one's image)."""
        from release.machine import images  # noqa: PLC0415 (only with a container engine)

        engine = ContainerEngine.answering()
        if engine is None:
            return
        commands = self.o.workflow.toolkit_commands()
        builds, serves = bool(commands & BUILD_IMAGE_COMMANDS), bool(commands & SERVING_IMAGE_COMMANDS)
        recipes = {}
        for variant in make_plan(loaded).variants.values():
            if builds and variant.build_image.local_recipe is not None:
                recipes[variant.build_image.local_recipe.tag] = variant.build_image.local_recipe
            for image in variant.images:
                if serves and image.made_here is not None:
                    recipes[image.made_here.tag] = image.made_here
        if not builds:
            said = "runs no `release build`, `reproduce` or `smoke`: no build image is made"
            self.o.log(f"[images] {self.o.workflow.path.name} {said}")
        for recipe in recipes.values():
            images.ensure(engine, recipe, log=lambda line: self.o.log(f"[images] {line}"))

    def _job_or_failure(self, job: Job, number: int, total: int, setup: Setup, base: dict[str, Any]) -> None:
        """`_job`, where a job that cannot even be set up (its `if` or `strategy.matrix` does not
        evaluate: `fromJSON('')` of an output its plan job never set) is a failed job, said in one
        line, as on GitHub: the jobs that need it are skipped and the rehearsal fails."""
        try:
            self._job(job, number, total, setup, base)
        except Exception as exc:  # any error of one job is that job's failure
            reason = f"{type(exc).__name__}: {exc}"
            self.o.log(f"[{number}/{total}] {job.id}: failed before its steps ({reason})")
            self.results.append(Result(job.id, str(job.raw.get("name", job.id)), "failure", reason=reason))
            self.jobs[job.id] = {"result": "failure", "outputs": {}}

    def _job(self, job: Job, number: int, total: int, setup: Setup, base: dict[str, Any]) -> None:
        needs = {n: self.jobs[n] for n in job.needs}
        status = expressions.Status(needs_results=tuple(str(n["result"]) for n in needs.values()))
        contexts = {**base, "needs": needs}
        context = expressions.Context(contexts, status)
        raw_name = str(job.raw.get("name", job.id))
        left_out = bool(self.o.only) and job.id not in self.o.only
        if left_out or not expressions.condition(job.raw.get("if"), context):
            why = "not among --job" if left_out else self._why_skipped(job, needs)
            self.o.log(f"[{number}/{total}] {job.id}: skipped ({why})")
            shown = f"{job.id} (every {_plain(raw_name)})" if "matrix." in raw_name else raw_name
            self.results.append(Result(job.id, shown, "skipped"))
            self.jobs[job.id] = {"result": "skipped", "outputs": {}}
            return
        matrix = (job.raw.get("strategy") or {}).get("matrix")
        entries: list[dict[str, Any]] = [{}]
        if matrix is not None:
            value = expressions.substitute(str(matrix), context) if isinstance(matrix, str) else matrix
            entries = list(value.get("include", [])) if isinstance(value, dict) else []
        results = []
        for entry in entries:
            instance_contexts = {**contexts, "matrix": entry}
            name = expressions.text(
                expressions.substitute(raw_name, expressions.Context(instance_contexts, status))
            )
            results.append(self._instance(job, name, number, total, setup, instance_contexts, status))
        overall = "failure" if any(r.status == "failure" for r in results) else "success"
        self.jobs[job.id] = {"result": overall, "outputs": self._outputs(job, results)}

    def _instance(  # noqa: PLR0917 (one job instance: where it stands, what it sees)
        self, job: Job, name: str, number: int, total: int, setup: Setup,
        contexts: dict[str, Any], status: expressions.Status,
    ) -> Result:  # fmt: skip
        container = job.raw.get("container")
        user = setup.user if container is None else User("root", 0, 0, Path("/root"))
        image = ""
        if container:
            declared = container.get("image") if isinstance(container, dict) else container
            image = expressions.text(
                expressions.substitute(str(declared), expressions.Context(contexts, status))
            )
        who = f"root in {image}" if container else user.name
        self.o.log(f"[{number}/{total}] {name}: started as {who}")
        slug = _slug(name)
        instance = Instance(setup=setup, slug=slug, user=user, contexts=contexts, env={})
        instance.workspace.mkdir(parents=True, exist_ok=True)  # as on a runner, checkout or not
        give(instance.home, instance.user)
        instance.logfile = setup.work / "logs" / f"{slug}.log"
        instance.logfile.parent.mkdir(parents=True, exist_ok=True)
        for key, value in (job.raw.get("env") or {}).items():
            instance.env[str(key)] = expressions.text(
                expressions.substitute(str(value), instance.context(status))
            )
        result = Result(job.id, name, "success", who=who)
        started = time.monotonic()
        try:
            if container:
                self._start_container(instance, image)
            self._run_steps(job, instance, status, result)
        finally:
            if instance.container is not None:
                instance.container.remove()
        result.seconds = time.monotonic() - started
        result.instance = instance
        verdict = "passed" if result.status == "success" else f"FAILED: {result.reason}"
        for note in result.notes:
            self.o.log(f"      - {note}")
        self.o.log(f"      {name}: {verdict} ({result.seconds:.0f} s)")
        if result.status == "failure":
            self._tail(instance.logfile)
        self.results.append(result)
        return result

    def _run_steps(self, job: Job, instance: Instance, status: expressions.Status, result: Result) -> None:
        """Run the job's steps in order into `result`: the first failure fails it, later ones are
        notes. success() in a step's if: means every earlier step succeeded; after a failure only
        steps whose if: says always() or failure() run, as on GitHub."""
        for step in job.steps:
            failed = result.status == "failure"
            steps_so_far = expressions.Status(needs_results=("failure",) if failed else ())
            condition = step.raw.get("if", "success()")
            if not expressions.condition(condition, instance.context(steps_so_far)):
                result.notes.append(f"{step.label}: skipped (if)")
                continue
            try:
                note = run_step(instance, step, status)
            except (StepFailed, ReleaseError, OSError) as exc:
                if not failed:
                    result.status = "failure"
                    result.reason = f"step {step.label!r}: {exc}"
                else:
                    result.notes.append(f"{step.label}: failed too ({exc})")
                continue
            if note:
                result.notes.append(f"{step.label}: {note}")

    def _start_container(self, instance: Instance, image: str) -> None:
        """A `container:` job: its steps run as root in the image, the workspace bind-mounted."""
        if not PODMAN.has_image(image):
            msg = f"container image {image} is not in the local store and no registry is reachable here"
            raise StepFailed(msg)
        name = f"rehearse-{os.getpid()}-{instance.slug}"[:60]
        instance.workspace.mkdir(parents=True, exist_ok=True)
        try:
            container = PODMAN.start(image, name, mounts=[(instance.home, True)])
        except SmokeError as exc:
            raise StepFailed(str(exc)) from None
        instance.container = container

    def _outputs(self, job: Job, results: list[Result]) -> dict[str, str]:
        declared = job.raw.get("outputs") or {}
        if not declared or not results:
            return {}
        instance = results[-1].instance
        if instance is None:
            return {}
        context = instance.context(expressions.Status())
        values = {k: expressions.text(expressions.substitute(str(v), context)) for k, v in declared.items()}
        if values.get("repository-url"):
            # The local index stands in for PyPI (and TestPyPI): no upload leaves this machine.
            values["repository-url"] = instance.setup.index_url
        return values

    def _why_skipped(self, job: Job, needs: dict[str, dict[str, Any]]) -> str:
        bad = [n for n, v in needs.items() if v["result"] != "success"]
        return (
            f"needs {', '.join(bad)}: " + ", ".join(str(needs[n]["result"]) for n in bad)
            if bad
            else "if: false"
        )

    def _tail(self, logfile: Path | None, lines: int = 25) -> None:
        if logfile is None or not logfile.exists():
            return
        text = logfile.read_text(encoding="utf-8", errors="replace").splitlines()
        for line in text[-lines:]:
            self.o.log(f"      | {line}")
        self.o.log(f"      (whole log: {logfile})")


def _plain(name: str) -> str:
    """A job name with its expressions left as they are (a skipped job has no matrix)."""
    return re.sub(r"\$\{\{\s*matrix\.(\S+)\s*\}\}", r"<\1>", name)


def render(results: list[Result]) -> str:
    rows = [(r.name, r.who or "-", r.status, f"{r.seconds:.0f}") for r in results]
    return table.render(("job", "runs as", "status", "seconds"), rows)


def failures(results: list[Result]) -> list[Result]:
    return [r for r in results if r.status == "failure"]
