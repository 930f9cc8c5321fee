"""Release-day checks: what can still go wrong between green builds and the upload.

- `tag-version`: the tag's version is the version every wheel carries (file name and METADATA);
- `expected-files`: every wheel the plan expects is there, with its verify report, and no other;
- `size-limit`: no file over the index's per-file limit (PyPI: 100 MiB unless granted more);
- `name-owner`: no distribution name already taken on the index by another project;
- `trusted-publisher`: PyPI has no public API for it, so one checklist line per distribution
  with the exact settings to enter (owner/repository, workflow file, environment).

Every failing line names the file (or name) and the fix; every check runs, so one run shows all.
"""

from __future__ import annotations

import http.client
import json
import sys
import urllib.error
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.config.machines import machine_of_tag
from release.errors import PublishError
from release.plan.machine import machine_of
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep
from release.publish import handoff, index, transport
from release.wheel.archive import WheelReadError, read_metadata
from release.wheel.files import not_regular
from release.wheel.names import InvalidWheelName, foreign_files, parse_wheel_name, platform_field

DEFAULT_SIZE_LIMIT = 100 << 20
"""PyPI's per-file upload limit unless the project was granted more."""
JSON_LIMIT = 4 << 20


@dataclass
class Check:
    id: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Publisher:
    """Where the upload runs from, as PyPI's trusted publisher form asks for it."""

    repository: str
    workflow: str
    environment: str | None


def _wheels(wheelhouse: Path, variant: str) -> list[Path]:
    directory = wheelhouse / variant
    return sorted(directory.glob("*.whl")) if directory.is_dir() else []


def check_tag_version(wheelhouse: Path, version: str, variants: Sequence[ResolvedVariant]) -> Check:
    check = Check("tag-version")
    wanted = Version(version)
    for variant in variants:
        name = variant.name
        for wheel in _wheels(wheelhouse, name):
            rel = f"{name}/{wheel.name}"
            if not_regular(wheel):
                continue  # expected-files names it
            try:
                carried = Version(parse_wheel_name(wheel).version)
                meta = read_metadata(wheel).get("Version", "")
                inside = Version(meta)
            except (InvalidWheelName, InvalidVersion, WheelReadError) as exc:
                check.problems.append(f"{rel}: cannot read its version ({exc}); rebuild it with --tag")
                continue
            if carried != wanted or inside != wanted:
                check.problems.append(
                    f"{rel}: carries {carried} (METADATA {meta or 'none'}), the tag says {wanted}: "
                    "rebuild with `release build --tag <the tag>`, or push the tag the wheels were built for"
                )
    return check


def check_expected_files(
    builds: Sequence[BuildStep], wheelhouse: Path, version: str, variants: Sequence[ResolvedVariant]
) -> Check:
    check = Check("expected-files")
    for variant in variants:
        name = variant.name
        stem = canonicalize_name(variant.distribution).replace("-", "_")
        wheels = _wheels(wheelhouse, name)
        steps = [s for s in builds if s.variant.name == name]
        for step in steps:
            prefix = f"{stem}-{version}-{'-'.join(step.wheel_tags)}-"
            machine = machine_of(step.variant)
            found = [
                w
                for w in wheels
                if w.name.startswith(prefix) and machine_of_tag(platform_field(w)) == machine
            ]
            if not found:
                check.problems.append(
                    f"{name}/{prefix}*.whl: missing (build job {step.identifier}); re-run that job"
                )
            elif len(found) > 1:
                check.problems.append(
                    f"{name}/: {len(found)} wheels for build job {step.identifier}: "
                    f"{', '.join(w.name for w in found)} (one wheel per build step: keep one)"
                )
            for wheel in found:
                refused = not_regular(wheel)
                if refused:
                    check.problems.append(f"{name}/{wheel.name}: {refused}: only a regular file is a wheel")
                    continue
                # The report re-validated and the bytes re-hashed: a report is never trusted alone.
                check.problems.extend(handoff.check_wheel(wheel)[2])
        expected = tuple(f"{stem}-{version}-{'-'.join(s.wheel_tags)}-" for s in steps)
        for wheel in wheels:
            if not wheel.name.startswith(expected):
                check.problems.append(f"{name}/{wheel.name}: not a wheel of this release's plan; remove it")
        check.notes.append(f"{name}: {len(wheels)} of {len(steps)} wheel(s)")
    return check


def check_sizes(wheelhouse: Path, variants: Sequence[ResolvedVariant], limit: int | None) -> Check:
    check = Check("size-limit")
    for variant in variants:
        name = variant.name
        granted = getattr(variant, "size_limit", None)
        most = limit or granted or DEFAULT_SIZE_LIMIT
        for wheel in _wheels(wheelhouse, name):
            if not_regular(wheel):
                continue  # expected-files names it
            size = wheel.stat().st_size
            if size > most:
                check.problems.append(
                    f"{name}/{wheel.name}: {size / 2**20:.1f} MiB is over the index's {most / 2**20:.0f} MiB "
                    "per-file limit: strip it (verify's debug-info rule) or ask the index for a larger limit "
                    "and declare it"
                )
    return check


def _project_json(
    index_url: str, project: str, timeout: float = index.DEFAULT_TIMEOUT
) -> dict[str, object] | None:
    """The index's JSON API page of a project (PyPI, pypiserver), or None where it has none or
    gives no complete answer within `timeout` seconds for the whole request (an index that drips
    a byte at a time ends there too)."""
    base = index_url.rstrip("/")
    base = base[: -len("/simple")] if base.endswith("/simple") else base
    url = f"{base}/pypi/{canonicalize_name(project)}/json"
    try:
        with transport.Deadline(timeout) as deadline:
            answer = transport.fetch(url, deadline, JSON_LIMIT)
        data = json.loads(answer.body)
    except (
        urllib.error.URLError, OSError, ValueError, RecursionError, http.client.HTTPException,
        transport.TooLarge, transport.ForeignRedirect,
    ):  # fmt: skip
        return None
    return data if isinstance(data, dict) else None


def check_names(
    variants: Sequence[ResolvedVariant],
    index_url: str,
    repository: str,
    timeout: float = index.DEFAULT_TIMEOUT,
) -> Check:
    """A name with files on the index is ours only if those files are this engine's wheels
    (its import package's platform wheels) and, where the index says, its project links name
    our repository."""
    check = Check("name-owner")
    for variant in variants:
        name, dist = variant.name, variant.distribution
        try:
            files = index.list_files(index_url, dist, timeout=timeout)
        except PublishError as exc:
            check.problems.append(f"{dist}: cannot ask the index ({exc}); re-run when it answers")
            continue
        if not files:
            check.notes.append(f"{dist}: free on the index (the first upload creates it)")
            continue
        foreign = foreign_files(dist, files)
        ours = [f for f in files if f not in foreign]
        links = _links(_project_json(index_url, dist, timeout))
        repo_named = any(repository.lower() in link.lower() for link in links)
        if foreign or (links and not repo_named):
            shown = ", ".join(sorted(foreign)[:3]) or ", ".join(sorted(links)[:3])
            check.problems.append(
                f"{dist}: the name is taken on the index by another project ({shown}); choose another "
                f"distribution name in variants.{name}.distribution (or get the name transferred)"
            )
        else:
            check.notes.append(f"{dist}: already ours ({len(ours)} file(s) of this engine)")
    return check


def _links(data: dict[str, object] | None) -> list[str]:
    info = data.get("info") if data else None
    if not isinstance(info, dict):
        return []
    urls = info.get("project_urls")
    found = [str(v) for v in urls.values()] if isinstance(urls, dict) else []
    return found + [
        str(info[k])
        for k in ("home_page", "project_url")
        if isinstance(info.get(k), str) and "github" in str(info[k])
    ]


def trusted_publishers(variants: Sequence[ResolvedVariant], publisher: Publisher, index_url: str) -> Check:
    """PyPI has no public API for a project's trusted publishers: the settings to check by hand."""
    check = Check("trusted-publisher")
    owner, _, repo = publisher.repository.partition("/")
    where = "https://pypi.org/manage/project/{}/settings/publishing/"
    if "test.pypi.org" in index_url:
        where = "https://test.pypi.org/manage/project/{}/settings/publishing/"
    for variant in variants:
        dist = variant.distribution
        check.notes.append(
            f"[ ] {dist}: {where.format(canonicalize_name(dist))} -> GitHub: owner {owner}, repository "
            f"{repo}, workflow {publisher.workflow}, environment {publisher.environment or '(any)'}"
        )
    return check


def run_checks(
    builds: Sequence[BuildStep],
    wheelhouse: Path,
    version: str,
    *,
    variants: Sequence[ResolvedVariant],
    index_url: str | None,
    repository: str,
    publisher: Publisher,
    size_limit: int | None = None,
    timeout: float = index.DEFAULT_TIMEOUT,
) -> list[Check]:
    checks = [
        check_tag_version(wheelhouse, version, variants),
        check_expected_files(builds, wheelhouse, version, variants),
        check_sizes(wheelhouse, variants, size_limit),
    ]
    if index_url is not None:
        checks.append(check_names(variants, index_url, repository, timeout))
        checks.append(trusted_publishers(variants, publisher, index_url))
    return checks


def held_names(
    repository: str | None, variants: Mapping[str, ResolvedVariant]
) -> tuple[str | None, dict[str, list[str]]]:
    """The public index's simple URL and, per distribution held there by another project, its
    files (the `name-owner` rule of `check_names`), for check-resolution's `held-name` setup; one
    line per distribution on standard error."""
    if not repository:
        print("held-name: no --repository: who holds the names on the index is not checked", file=sys.stderr)
        return None, {}
    simple = repository if repository.rstrip("/").endswith("/simple") else index.simple_url_for(repository)
    index.check_transport(simple)
    held: dict[str, list[str]] = {}
    for variant in variants.values():
        dist = variant.distribution
        files = index.list_files(simple, dist)
        foreign = foreign_files(dist, files)
        if foreign:
            held[dist] = foreign
        state = "held by another project" if foreign else "ours" if files else "free"
        print(f"held-name: {dist} on {index.redact_url(simple)}: {state}", file=sys.stderr)
    return simple, held
