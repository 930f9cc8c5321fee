"""What a tag push needs from outside the code, derived from the data that declares it.

One mechanism, not a second list:
- **variables**: a backend's `toolkit.install_env` (e.g. `MUSA_INSTALLER` in `musa.json`). The
  release workflow passes each, under its own name, from a repository variable or secret of that
  name, into the jobs in `VARIABLE_JOBS` and no other (a unit test holds the workflows to it);
- **environments**: `publish.environment`, and `publish.prerelease_environment` when pre-releases
  go to their own index; the upload job runs in the one `environment()` picks for the tag;
- **trusted publishers** and **index names**: one per planned distribution and index;
- **serving images**: each planned image's reference, which must be pinned by digest, and its
  registry, which the workflow reaches without credentials;
- **hardware**: the runner labels of each planned tier, and the dispatch of `hardware.yml`.

Pure: no process, no network. What only GitHub or the index can answer becomes a checklist item.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name

from release.config.backends import Backend
from release.config.checks import unpinned_serving_images
from release.config.facts import FACTS_FILE
from release.config.imageref import parse_image_reference
from release.config.matrix import Matrix
from release.errors import ReleaseError
from release.plan.imagefacts import pinned_without_facts
from release.plan.steps import Plan, awaiting_line
from release.plan.version import is_prerelease

VARIABLE_JOBS: Mapping[str, tuple[str, ...]] = {
    "release.yml": ("build", "second-build", "smoke"),
    "ci.yml": ("ready",),
}
"""The jobs of each workflow that receive the declared variables: release.yml's build job runs the
toolkit install (cibuildwheel passes the names into the container), and so does its second-build
job (`release reproduce`), its smoke job installs the runtime; ci.yml's readiness job only learns
whether each is set."""

Status = Literal["ok", "missing", "fail", "by hand", "held back", "awaiting"]
BLOCKING: tuple[Status, ...] = ("missing", "fail")

TITLE = "Before your first tag"


class NotReady(ReleaseError):
    """A tag push would fail for configuration alone."""

    exit_code = 1


PUBLISHING_URLS = {
    "https://upload.pypi.org/legacy/": "https://pypi.org/manage/project/{}/settings/publishing/",
    "https://test.pypi.org/legacy/": "https://test.pypi.org/manage/project/{}/settings/publishing/",
}


@dataclass(frozen=True)
class Item:
    """One outside input: what it is, whether it is there, and the line that says what to do."""

    kind: str
    name: str
    status: Status
    detail: str
    fix: str = ""


def declared_variables(backends: Mapping[str, Backend]) -> dict[str, tuple[str, ...]]:
    """Every `toolkit.install_env` name of the backend data, with the backends that declare it."""
    names: dict[str, list[str]] = {}
    for backend in backends.values():
        for name in backend.toolkit.install_env if backend.toolkit else ():
            names.setdefault(name, []).append(backend.name)
    return {name: tuple(by) for name, by in sorted(names.items())}


def workflow_value(name: str) -> str:
    """How release.yml passes a declared variable into a job: a variable, else a secret."""
    return f"${{{{ vars.{name} || secrets.{name} }}}}"


def presence_value(name: str) -> str:
    """How ci.yml tells its readiness job whether a variable is set, without its value."""
    return f"${{{{ (vars.{name} != '' || secrets.{name} != '') && 'set' || '' }}}}"


def environments(matrix: Matrix) -> dict[str, str]:
    """The GitHub environments the upload job may run in, by index upload URL."""
    publish = matrix.publish
    found = {publish.repository: publish.environment}
    if publish.prerelease == "separate-index" and publish.prerelease_repository:
        found[publish.prerelease_repository] = publish.prerelease_environment
    return found


def environment(matrix: Matrix, version: str) -> str:
    """The GitHub environment of the upload job for this version (its trusted publisher names it)."""
    publish = matrix.publish
    separate = is_prerelease(version) and publish.prerelease == "separate-index"
    return publish.prerelease_environment if separate else publish.environment


def _variables(plan: Plan, environ: Mapping[str, str]) -> list[Item]:
    loaded = plan.loaded
    items = []
    for name, by in declared_variables(loaded.backends).items():
        users = [v for v, spec in loaded.matrix.variants.items() if spec.backend in by]
        if not users:
            continue
        planned = [v for v in users if v in plan.variants]
        source = ", ".join(f"packaging/backends/{b}.json" for b in by)
        detail = f"variants {', '.join(users)}; release.yml build, smoke jobs; {source} (toolkit.install_env)"
        if not planned:
            held = "; ".join(f"{v}: {plan.held_back[v]}" for v in users if v in plan.held_back)
            detail += f"; not needed while held back ({held})"
            items.append(Item("variable", name, "held back", detail))
        elif environ.get(name, "").strip():
            items.append(Item("variable", name, "ok", detail))
        else:
            fix = (
                f"{name}: set the repository variable (or secret) {name} (Settings > Secrets and variables "
                f"> Actions): {' and '.join(by)}'s install script reads it, and variant(s) "
                f"{', '.join(planned)} cannot build without it; or hold them back in "
                f'{loaded.path.name} (variants.<name>.held_back: "<reason>")'
            )
            items.append(Item("variable", name, "missing", detail, fix))
    return items


def _images(plan: Plan) -> list[Item]:
    loaded = plan.loaded
    unpinned = {
        p.key: str(p)
        for p in unpinned_serving_images(loaded.matrix, loaded.lines, loaded.path.name, plan.variants)
    }
    items = []
    seen = dict.fromkeys(image.name for v in plan.variants.values() for image in v.images)
    for name in seen:
        container = loaded.matrix.images[name].container
        if container is None:
            continue
        registry = parse_image_reference(container).name.split("/", 1)[0]
        detail = f"images.{name}: pulled from {registry} without credentials (release.yml logs in nowhere)"
        problem = unpinned.get(f"images.{name}.container")
        if problem is None:
            items.append(Item("image", container, "ok", f"pinned by digest; {detail}"))
        else:
            items.append(Item("image", container, "fail", f"tag only; {detail}", problem))
    for name, tag in plan.awaiting.items():
        detail = (
            f"images.{name}: pin: probe, no digest recorded yet: no release or hardware job runs in it "
            "until ci.yml's images job records one"
        )
        items.append(Item("image", tag, "awaiting", detail, awaiting_line(loaded, name)))
    stale = pinned_without_facts(loaded, loaded.image_facts)
    for name in seen:
        facts = loaded.image_facts.get(name)
        if name in stale:
            fix = (
                f"{FACTS_FILE}: images.{name}: {stale[name]}: "
                "run `release images probe --pull --write` and commit the file"
            )
            items.append(Item("image facts", name, "missing", f"{FACTS_FILE}: {stale[name]}", fix))
        elif facts is not None and loaded.matrix.images[name].container is not None:
            source = "a probe" if facts.source == "probe" else "public sources"
            detail = f"{FACTS_FILE}: recorded from {source} for this digest"
            items.append(Item("image facts", name, "ok", detail))
    return items


def _publishing(plan: Plan, repository: str | None) -> list[Item]:
    matrix = plan.loaded.matrix
    owner, _, repo = (repository or "OWNER/NAME").partition("/")
    items = []
    for upload, env in environments(matrix).items():
        role = "releases" if upload == matrix.publish.repository else "pre-releases"
        items.append(
            Item(
                "environment", env, "by hand",
                f"Settings > Environments: the upload job runs in it for {role} (add required reviewers)",
            )
        )  # fmt: skip
    for upload, env in environments(matrix).items():
        page = PUBLISHING_URLS.get(upload, upload + " (its trusted-publisher settings)")
        for variant in plan.variants.values():
            dist = variant.distribution
            items.append(
                Item(
                    "trusted publisher", dist, "by hand",
                    f"{page.format(canonicalize_name(dist))}: owner {owner}, repository {repo}, "
                    f"workflow release.yml, environment {env}",
                )
            )  # fmt: skip
    for variant in plan.variants.values():
        items.append(
            Item(
                "index name", variant.distribution, "by hand",
                "yours or not yet taken on every index above (release-checks asks the index on release day)",
            )
        )  # fmt: skip
    return items


def _hardware(plan: Plan) -> list[Item]:
    tiers = {s.hardware: s.runner for s in plan.smokes}
    items = [
        Item("runner", name, "by hand", f"self-hosted runner(s) with labels {', '.join(labels)}")
        for name, labels in tiers.items()
    ]
    if tiers:
        items.append(
            Item(
                "permission", "actions: write", "by hand",
                "release.yml's hardware job starts hardware.yml (gh workflow run): Settings > Actions > "
                "General must let GITHUB_TOKEN take the permissions a job declares",
            )
        )  # fmt: skip
    return items


def _workflow(plan: Plan, workflow: Path | None) -> list[Item]:
    """release.yml passes every declared variable of a planned variant into its jobs."""
    if workflow is None or not workflow.is_file():
        return []
    import yaml  # noqa: PLC0415 (only when a workflow is there to read)

    try:
        doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return [Item("workflow", workflow.name, "fail", "unreadable", f"{workflow}: cannot read it ({exc})")]
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    items = []
    needed = {
        name: by for name, by in declared_variables(plan.loaded.backends).items()
        if any(v.backend_name in by for v in plan.variants.values())
    }  # fmt: skip
    for job in VARIABLE_JOBS["release.yml"]:
        spec = (jobs or {}).get(job)
        env = spec.get("env") if isinstance(spec, dict) else None
        env = env if isinstance(env, dict) else {}
        for name in needed:
            if env.get(name) != workflow_value(name):
                fix = (
                    f"{workflow.name}: jobs.{job}.env lacks `{name}: {workflow_value(name)}` "
                    "(`release init --ci github --force` writes it)"
                )
                items.append(Item("workflow", f"{job}: {name}", "fail", "not passed into the job", fix))
    return items


def readiness(
    plan: Plan, *, environ: Mapping[str, str], repository: str | None, workflow: Path | None = None
) -> list[Item]:
    """Every outside input the tag push needs, in the order a maintainer sets them up."""
    held = [
        Item("held back", name, "held back", f"{plan.loaded.matrix.variants[name].distribution}: {why}")
        for name, why in plan.held_back.items()
    ]
    return [
        *_variables(plan, environ),
        *_workflow(plan, workflow),
        *_images(plan),
        *_publishing(plan, repository),
        *_hardware(plan),
        *held,
    ]


def require_ready(items: list[Item]) -> None:
    """Raise `NotReady` naming what to set when a tag push would fail for configuration alone."""
    blocking = [i for i in items if i.status in BLOCKING]
    if blocking:
        lines = "\n".join(f"  {i.fix}" for i in blocking)
        msg = f"a tag push would fail for configuration alone ({len(blocking)} to set):\n{lines}"
        raise NotReady(msg)


def _names(items: list[Item], kind: str) -> str:
    return ", ".join(f"`{i.name}`" for i in items if i.kind == kind)


def markdown(plan: Plan) -> str:
    """The section of docs/release-builds.md, generated from what `release ready` checks (a test
    compares the two)."""
    loaded = plan.loaded
    matrix = loaded.matrix
    items = readiness(plan, environ={}, repository=None)
    out = [
        f"### {TITLE}",
        "",
        "`release ready` lists what a tag push needs from outside the code and fails, naming what to "
        "set, when the push would fail for configuration alone; `ci.yml` runs it on every pull "
        "request. Once per repository:",
        "",
    ]
    variables = declared_variables(loaded.backends)
    used = {
        name: by for name, by in variables.items()
        if any(v.backend in by for v in matrix.variants.values())
    }  # fmt: skip
    for name, by in used.items():
        users = [v for v, spec in matrix.variants.items() if spec.backend in by]
        held = [v for v in users if v in plan.held_back]
        idle = held and len(held) == len(users)
        state = f" (not needed while {', '.join(held)} is held back)" if idle else ""
        out.append(
            f"- **Repository variable or secret `{name}`**{state}: read by the {' and '.join(by)} "
            f"install script (`toolkit.install_env`); `release.yml` passes it to its build and smoke jobs."
        )
    envs = environments(matrix)
    out.append(
        "- **Environments** (Settings > Environments): "
        + ", ".join(f"`{env}` for uploads to {url}" for url, env in envs.items())
        + "; add required reviewers."
    )
    out.append(
        "- **Trusted publishers**, one per distribution and index (repository, workflow `release.yml`, "
        f"the environment above): {_names(items, 'index name')}. Each name must be yours or free."
    )
    images = [i for i in items if i.kind == "image" and i.status != "awaiting"]
    if images:
        out.append(
            "- **Serving images pinned by digest** (`name:tag@sha256:...`), pullable without "
            f"credentials: {_names(images, 'image')}."
        )
    awaiting = [i for i in items if i.kind == "image" and i.status == "awaiting"]
    if awaiting:
        out.append(
            "- **Serving images awaiting their digest** (`pin: probe`; no release or hardware job runs "
            "in them until ci.yml's images job records one in images.facts.json): "
            f"{_names(awaiting, 'image')}."
        )
    runners = [i for i in items if i.kind == "runner"]
    if runners:
        out.append(
            "- **Self-hosted GPU runners**: "
            + "; ".join(f"{i.name} ({i.detail.split('labels ', 1)[1]})" for i in runners)
            + "; and Actions settings that let `GITHUB_TOKEN` take `actions: write` (the release "
            "starts `hardware.yml`)."
        )
    for name, why in plan.held_back.items():
        out.append(f"- **Held back** (not released until its `held_back` is removed): `{name}`: {why}.")
    return "\n".join(out) + "\n"
