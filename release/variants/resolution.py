"""Resolution checks: serve a release set from local indexes on 127.0.0.1, install it the way a
user would (pip, uv) into fresh environments, and judge what was installed from the data the
wheel carries: its `Requires-External` runtime sonames and, for a variant wheel, its label.

"Another backend's build" is a wheel whose runtime sonames (or label) are another variant's;
for an engine the toolkit did not build, the same data decides (METADATA and `variant.json`).

"Another project's wheel" comes first: an installed distribution of our name is this engine's
only if its wheel name (rebuilt from the dist-info's `WHEEL` tag) passes the release-day
`name-owner` rule (`foreign_files`: a CPython platform wheel of the name) and its RECORD holds
the engine's import package. Anything else installed under our name is reported as the name
held by another project, never judged by its (absent) runtime sonames: a pure-Python wheel of
someone else's binds no GPU runtime and would otherwise pass as the CPU build.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name

from release import process, settings
from release.config.machines import machine_of_tags
from release.plan.resolve import ResolvedVariant
from release.variants.metadata import DIST_INFO_FILE, INDEX_SUFFIX, VariantDataError, describe
from release.wheel.archive import parse_metadata
from release.wheel.names import (
    InvalidWheelName,
    foreign_files,
    parse_platform_tag,
    parse_wheel_name,
    split_variant_label,
    variants_index_fields,
)

INSTALL_TIMEOUT = 300.0
"""Seconds one install may take (a local index: seconds are normal)."""
FORCE_CUDA = "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"
"""What uv's built-in NVIDIA provider reads instead of the driver (`13.0`: a CUDA 13 machine)."""


def project_of(path: Path) -> str | None:
    """The canonical project a release file belongs to (a wheel, a variant wheel, `-variants.json`)."""
    if path.name.endswith(INDEX_SUFFIX):
        return canonicalize_name(variants_index_fields(path)[0])
    try:
        return parse_wheel_name(split_variant_label(path)[0]).distribution
    except InvalidWheelName:
        return None


def lay_out(root: Path, files: Iterable[Path]) -> Path:
    """A simple index at `root`: `<project>/<file>` (the directory listing is the project page)."""
    for path in files:
        project = project_of(path)
        if project is None:
            continue
        target = root / project / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copyfile(path, target)
    root.mkdir(parents=True, exist_ok=True)
    return root


_Server = TypeVar("_Server", bound="LoopbackServer")


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (an ephemeral port) run in a thread while the `with` lasts."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], name: str = "index") -> None:
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name=name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def __enter__(self: _Server) -> _Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class IndexServer(LoopbackServer):
    """A directory served over HTTP on 127.0.0.1 (an ephemeral port) in a thread; it records
    which files were fetched, so a report can say which index a wheel came from."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root
        self.fetched: list[str] = []
        lock = threading.Lock()
        fetched = self.fetched

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def log_message(self, format: str, *args: object) -> None:
                del format, args

            def do_GET(self) -> None:
                if self.path.endswith(".whl"):
                    with lock:
                        fetched.append(self.path.rsplit("/", 1)[-1])
                super().do_GET()

        super().__init__(Handler, name=f"index-{name}")


@dataclass(frozen=True)
class Case:
    """One install a user would type, and what it must give."""

    setup: str
    """The index setup (`per-name`, `partial-index`, `held-name`, `variants`)."""
    installer: str
    python: str
    requirement: str
    indexes: tuple[str, ...]
    """Index names: the first is `--index-url` (PyPI, for a user), the others `--extra-index-url`
    (which uv prefers, and pip merges with it)."""
    expect: ResolvedVariant | None
    """The variant whose build must be installed; None: the install must fail."""
    may_fail: bool = False
    """A failure is acceptable (uv's first-index rule on an index that lacks this Python)."""
    env: Mapping[str, str] = field(default_factory=dict)
    note: str = ""
    machine: str = ""
    """The machine the install resolves for, when the set holds several ('' when one): its wheel
    must be installed, never another machine's."""

    @property
    def label(self) -> str:
        forced = " ".join(f"{k}={v}" for k, v in self.env.items())
        on = f" on {self.machine}" if self.machine else ""
        return f"{self.installer} install {self.requirement}{on}{' (' + forced + ')' if forced else ''}"


@dataclass(frozen=True)
class Installed:
    """What an environment holds of one project: from METADATA and `variant.json`."""

    name: str
    version: str
    runtimes: tuple[str, ...]
    label: str | None
    wheel: str
    """The wheel's file name as the dist-info gives it back (`WHEEL`'s first tag)."""
    packages: tuple[str, ...]
    """Top-level names its RECORD installs."""

    def not_ours(self, import_name: str) -> str | None:
        """Why this is not the engine's wheel (another project's under our name), or None."""
        if foreign_files(self.name, [self.wheel]):
            return f"{self.wheel} is not a CPython platform wheel of this engine"
        if import_name not in self.packages:
            return f"it installs {', '.join(self.packages) or 'nothing'}, not the {import_name} package"
        return None

    def text(self) -> str:
        label = f" [{self.label}]" if self.label else ""
        binds = f"binds {', '.join(self.runtimes)}" if self.runtimes else "binds no GPU runtime"
        return f"{self.name} {self.version}{label} ({binds})"


@dataclass(frozen=True)
class Outcome:
    case: Case
    ok: bool
    detail: str

    def to_json(self) -> dict[str, object]:
        c = self.case
        return {
            "setup": c.setup,
            "installer": c.installer,
            "python": c.python,
            "requirement": c.requirement,
            "indexes": list(c.indexes),
            "env": dict(c.env),
            "expect": c.expect.name if c.expect else None,
            "machine": c.machine or None,
            "ok": self.ok,
            "detail": self.detail,
        }


def installed(site_packages: Path, project: str) -> Installed | None:
    """The installed distribution `project` in `site_packages`, from its dist-info."""
    wanted = canonicalize_name(project)
    for info in sorted(site_packages.glob("*.dist-info")):
        try:
            meta = parse_metadata((info / "METADATA").read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if canonicalize_name(meta.get("Name") or "") != wanted:
            continue
        runtimes = tuple(sorted(r.split(";")[0].strip() for r in meta.get_all("Requires-External") or []))
        label = None
        variant_file = info / DIST_INFO_FILE
        if variant_file.is_file():
            with contextlib.suppress(OSError, ValueError, AttributeError):
                label = next(iter(json.loads(variant_file.read_text(encoding="utf-8"))["variants"]))
        name, version = meta.get("Name") or project, meta.get("Version") or "?"
        return Installed(name, version, runtimes, label, _wheel_name(info, name, version), _packages(info))
    return None


def _wheel_name(info: Path, name: str, version: str) -> str:
    try:
        tag = parse_metadata((info / "WHEEL").read_text(encoding="utf-8", errors="replace")).get("Tag")
    except OSError:
        tag = None
    stem = canonicalize_name(name).replace("-", "_")
    return f"{stem}-{version}-{tag or 'unknown'}.whl"


def _packages(info: Path) -> tuple[str, ...]:
    try:
        lines = (info / "RECORD").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    tops = {ln.split(",", 1)[0].split("/", 1)[0] for ln in lines if "/" in ln.split(",", 1)[0]}
    return tuple(sorted(t for t in tops if not t.endswith((".dist-info", ".data"))))


def _label_of(variant: ResolvedVariant) -> str | None:
    try:
        return describe(variant).label
    except VariantDataError:
        return None


def build_of(found: Installed, variants: Mapping[str, ResolvedVariant]) -> ResolvedVariant | None:
    """The matrix variant whose build `found` is, by the runtime sonames it binds (the CPU
    variant binds none); a label must agree with them: a `null` label on a build that binds
    libcudart is no variant's build. The GPU driver's libraries a build may also bind (libcuda.so.1)
    are the driver's, the same for every build of that backend, and do not tell builds apart."""
    same = [
        v
        for v in variants.values()
        if tuple(sorted(v.runtime_sonames))
        == tuple(r for r in found.runtimes if r not in v.backend.driver_sonames)
    ]
    if found.label is not None:
        same = [v for v in same if _label_of(v) == found.label]
    return same[0] if len(same) == 1 else None


def judge(
    case: Case,
    *,
    rc: int,
    output: str,
    found: Installed | None,
    served: Sequence[str],
    variants: Mapping[str, ResolvedVariant],
) -> Outcome:
    """Whether the install gave what the case wants; the detail names what was installed and
    from which index, or why nothing was."""
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "no output")
    where = f" from index {', '.join(served)}" if served else ""
    if rc != 0 or found is None:
        if case.setup == "held-name":
            return Outcome(case, False, f"the name is held by another project ({case.note}): {last[:200]}")
        if case.expect is None:
            return Outcome(case, True, f"refused, as it must: {last[:200]}")
        if case.may_fail:
            return Outcome(case, True, f"failed visibly (acceptable here): {last[:200]}")
        return Outcome(case, False, f"install failed (exit {rc}): {last[:300]}")
    engine = next(iter(variants.values())).import_name if variants else ""
    foreign = found.not_ours(engine) if engine else None
    if foreign is not None:
        return Outcome(
            case,
            False,
            f"the name is held by another project: installed {found.name} {found.version}{where}, "
            f"not this engine's wheel ({foreign})",
        )
    if case.setup == "held-name":
        return Outcome(
            case,
            False,
            f"the name is held by another project on the index ({case.note}); this install gave "
            f"{found.text()}{where}, but theirs wins whenever its version is higher",
        )
    got = build_of(found, variants)
    machine = _wheel_machine(found.wheel)
    if case.expect is not None and case.machine and machine != case.machine:
        return Outcome(
            case, False, f"another machine's wheel: {found.wheel}{where} is for {machine}, not {case.machine}"
        )
    if case.expect is None:
        return Outcome(case, False, f"installed {found.text()}{where}, but this install must fail")
    if got is None or got.name != case.expect.name:
        other = f"variant {got.name}'s build" if got else "no variant's build"
        if got is None and found.label is not None:
            other += " (its label and runtime disagree)"
        return Outcome(
            case,
            False,
            f"another backend's build: {found.text()}{where} is {other}, not {case.expect.name} "
            f"({case.expect.backend_name}, binds {_binds(case.expect)})",
        )
    return Outcome(case, True, f"{found.text()}{where}")


def _wheel_machine(wheel: str) -> str | None:
    """The machine of a wheel file name's platform tags (None when they name none, or several)."""
    try:
        return machine_of_tags(parse_wheel_name(wheel).platforms)
    except InvalidWheelName:
        return None


def _binds(variant: ResolvedVariant) -> str:
    return ", ".join(variant.runtime_sonames) or "no GPU runtime"


@functools.cache
def uv_binary() -> str | None:
    try:
        from uv import find_uv_bin  # noqa: PLC0415 (optional: the `variants` extra)

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    return found[0] if found else venv / "lib" / "site-packages"


def install_command(
    case: Case, venv: Path, urls: Mapping[str, str], pip_runner: str, platform: str | None = None
) -> list[str]:
    """pip's or uv's install of the case into `venv`; with `platform` (a manylinux tag newer than
    this host's C library allows), both resolve as a machine of that platform would."""
    python = str(venv / "bin" / "python")
    index_args = ["--index-url", urls[case.indexes[0]]]
    for extra in case.indexes[1:]:
        index_args += ["--extra-index-url", urls[extra]]
    if case.installer == "uv":
        uv = uv_binary() or "uv"
        if platform is not None:  # manylinux_2_39_x86_64 -> x86_64-manylinux_2_39
            tag = parse_platform_tag(platform)
            index_args += ["--python-platform", f"{tag.arch}-{tag.text.removesuffix('_' + tag.arch)}"]
        return [
            uv,
            "pip",
            "install",
            "--preview",
            "--python",
            python,
            "--no-cache",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--index-strategy",
            "first-index",
            *index_args,
            case.requirement,
        ]
    return [
        pip_runner,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--isolated",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary",
        ":all:",
        *(["--platform", platform, "--target", str(_site_packages(venv))] if platform else []),
        *index_args,
        case.requirement,
    ]


def run_case(
    case: Case,
    interpreter: Path,
    servers: Mapping[str, IndexServer],
    variants: Mapping[str, ResolvedVariant],
    *,
    work: Path,
    pip_runner: str,
    outside: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> Outcome:
    """Make a fresh venv of `interpreter`, install the case's requirement, judge the result.
    `outside`: index URLs not served here (the public index of the `held-name` setup);
    `platform`: resolve as a machine of that manylinux platform (see `install_command`)."""
    uv = uv_binary()
    if uv is None:
        return Outcome(case, False, "uv is not installed: pip install 'uv>=0.13.8' (a toolkit dependency)")
    with tempfile.TemporaryDirectory(dir=work, prefix="venv-") as scratch:
        venv = Path(scratch) / "env"
        env = settings.environment(without=("PIP_", "UV_", "NV_VARIANT"))
        env |= {"UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never", "PIP_NO_INPUT": "1"}
        # uv and pip run tracked in their own process group: stopped and reaped at the deadline
        # or on SIGTERM/SIGINT, whatever they started.
        made_rc, made_output = process.run_bounded(
            [str(uv), "venv", "--quiet", "--python", str(interpreter), str(venv)],
            timeout=INSTALL_TIMEOUT,
            env=env,
        )
        if made_rc != 0:
            return Outcome(case, False, f"cannot make a venv of {interpreter}: {made_output.strip()[-300:]}")
        before = {name: len(s.fetched) for name, s in servers.items()}
        command = install_command(
            case, venv, {**(outside or {}), **{n: s.url for n, s in servers.items()}}, pip_runner, platform
        )
        rc, output = process.run_bounded(list(command), timeout=INSTALL_TIMEOUT, env=env | dict(case.env))
        # An index outside (the public one) is not observed: it is named when none of ours served.
        served = [n for n, s in servers.items() if len(s.fetched) > before[n]] or [
            n for n in case.indexes if n not in servers
        ]
        project = case.requirement.split("@")[0].split("=")[0].strip()
        found = installed(_site_packages(venv), project) if rc == 0 else None
        return judge(case, rc=rc, output=output, found=found, served=served, variants=variants)


@contextlib.contextmanager
def serving(indexes: Mapping[str, Path]) -> Iterator[dict[str, IndexServer]]:
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(IndexServer(name, root)) for name, root in indexes.items()}
