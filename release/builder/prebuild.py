"""What every host build of a variant shares: the build environment, the configuration key that
invalidates cached trees, the core compiled once per variant, and cached builder venvs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit

from release import interrupts, process, settings
from release.builder.reuse import ccache_env, ccache_missing_note, tree_digest
from release.errors import BuildError
from release.machine.interpreters import require_interpreter
from release.machine.toolchain import Toolchain, require_tool
from release.machine.venv import fresh_venv_argv, pip_argv
from release.plan.resolve import ResolvedVariant
from release.wheel.names import python_tag

_print_lock = threading.Lock()

# Environment variables that change what a compiler produces.
_COMPILER_ENV = (
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "CPPFLAGS",
    "CMAKE_ARGS",
    "CMAKE_GENERATOR",
    "CMAKE_C_COMPILER_LAUNCHER",
    "CMAKE_CXX_COMPILER_LAUNCHER",
)


def say(message: str) -> None:
    with _print_lock:
        print(message, flush=True)


def source_date_epoch(root: Path) -> str:
    """`SOURCE_DATE_EPOCH` as set, else the last commit's time, so rebuilds are byte-identical."""
    if settings.raw("SOURCE_DATE_EPOCH"):
        return settings.raw("SOURCE_DATE_EPOCH")
    if shutil.which("git") is None:
        return "315532800"  # 1980-01-01: no git, no commit time to take
    proc = process.run(["git", "-C", str(root), "log", "-1", "--format=%ct"], timeout=process.QUERY_S)
    stamp = proc.stdout.strip()
    return stamp if proc.returncode == 0 and stamp.isdigit() else "315532800"


HEARTBEAT_SECONDS = 10.0
"""How often a long command says it is still running (`RELEASE_HEARTBEAT` seconds; 0: never)."""
_PROGRESS = re.compile(rb"\[\s*(\d+)\s*/\s*(\d+)\s*\]|\[\s*(\d+)%\]", re.ASCII)


def build_progress(tail: bytes) -> str | None:
    """The build's own progress from the end of its log: ninja's `[n/m]`, make's `[ p%]`."""
    matches = list(_PROGRESS.finditer(tail))
    if not matches:
        return None
    last = matches[-1]  # the current step
    return f"[{int(last[1])}/{int(last[2])}]" if last[1] else f"[{int(last[3])}%]"


def activity(cmd: list[str]) -> str:
    """What a command does, in a word or three, for the heartbeat line."""
    words = [Path(cmd[0]).name, *cmd[1:3]]
    if words[:2] == ["cmake", "--build"]:
        return "compiling"
    if words[:2] == ["cmake", "--install"]:
        return "installing"
    if words[0] == "cmake":
        return "configuring"
    if words[1:3] == ["-m", "build"]:
        return "building the wheel"
    if words[1:3] == ["-m", "pip"]:
        return "installing build requirements"
    if words[1:3] == ["-m", "venv"]:
        return "creating the build environment"
    return f"running {words[0]}"


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _heartbeat_interval() -> float:
    return settings.number("RELEASE_HEARTBEAT")


def _log_tail(log: Path, size: int = 16384) -> bytes:
    try:
        with log.open("rb") as stream:
            stream.seek(max(0, stream.seek(0, os.SEEK_END) - size))
            return stream.read()
    except OSError:
        return b""


def run_logged(cmd: list[str], *, log: Path, env: Mapping[str, str], cwd: Path | None = None) -> None:
    """Run `cmd` with its output in `log`. While it runs, a heartbeat line every few seconds says
    what it does, for how long, and the build's own progress read from the log's tail; a failure
    names the log and shows its last lines."""
    interrupts.check()
    log.parent.mkdir(parents=True, exist_ok=True)
    interval = _heartbeat_interval()
    started = time.monotonic()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()

        def heartbeat() -> None:
            progress = build_progress(_log_tail(log))
            say(
                f"  [{log.stem}] {activity(cmd)}: {_elapsed(time.monotonic() - started)}"
                + (f", {progress}" if progress else "")
                + f" (log: {log})"
            )

        try:
            done = process.stream(
                cmd, timeout=process.BUILD_S, env=env, cwd=cwd, to=out, every=interval, tick=heartbeat
            )
        except process.TimedOut as exc:
            msg = f"{exc}; its log: {log}"
            raise BuildError(msg) from None
        returncode = done.returncode
    if returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        msg = f"`{' '.join(cmd[:4])} …` failed (exit {returncode}); last lines of {log}:\n{tail}"
        raise BuildError(msg)


CCACHE_LAUNCHERS = {
    "CMAKE_C_COMPILER_LAUNCHER": "ccache", "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
    "CC": "ccache cc", "CXX": "ccache c++",
}  # fmt: skip


def build_env(variant: ResolvedVariant, toolchain: Toolchain, epoch: str, work: Path) -> dict[str, str]:
    env = {**os.environ, **toolchain.env, "SOURCE_DATE_EPOCH": epoch}
    env.pop("PYTHONPATH", None)
    note = ccache_missing_note()
    if note:
        say(note)
    if shutil.which("ccache"):
        for key, value in ccache_env(work).items():
            env.setdefault(key, value)
        for key, value in CCACHE_LAUNCHERS.items():  # unless the environment or toolchain names one
            if key not in toolchain.env and not settings.raw(key):
                env[key] = value
    env.update(variant.build.env)
    return env


def configuration_key(variant: ResolvedVariant, toolchain: Toolchain, env: Mapping[str, str]) -> str:
    """What every compilation of a variant depends on besides its sources: the toolkit found,
    the CMake variables and the compiler environment. A change invalidates cached builds."""
    cmake = process.run(["cmake", "--version"], timeout=process.QUERY_S).stdout
    parts = {
        "toolchain": [str(toolchain.prefix), toolchain.version, sorted(toolchain.env.items())],
        "defines": sorted(variant.build.cmake_defines.items()),
        "config_settings": sorted(variant.build.config_settings.items()),
        "env": [(k, env.get(k, "")) for k in _COMPILER_ENV],
        "generator": bool(shutil.which("ninja")),
        "cmake": cmake.splitlines()[:1],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def forget_stale_builds(work: Path, key: str) -> None:
    """Drop CMake build trees made under another configuration: a CMake cache keeps a removed
    define or an old toolkit's library paths."""
    stamp = work / ".release-configuration"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        return
    for tree in [work / "core-build", work / "core-prefix", *work.glob("build-cp*")]:
        shutil.rmtree(tree, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key, encoding="utf-8")


def prebuild_core(
    variant: ResolvedVariant,
    *,
    staged: Path,
    work: Path,
    version: str,
    env: Mapping[str, str],
    configuration: str = "",
) -> Path | None:
    """Compile and install the engine core once for this variant (cached by its inputs)."""
    prebuild = variant.prebuild
    if prebuild is None:
        return None
    require_tool("cmake", "install CMake >= 3.18 (apt install cmake, or pip install cmake)")
    source = staged / prebuild.cmake_source
    args = [a.replace("{version}", version) for a in prebuild.cmake_args]
    defines = [f"-D{k}={v}" for k, v in variant.build.cmake_defines.items()]
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    prefix = work / "core-prefix"
    key = hashlib.sha256(json.dumps([tree_digest(source), args, defines, configuration]).encode()).hexdigest()
    stamp = prefix / ".release-prebuild"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        say(f"[{variant.name}] core: up to date in {prefix}")
        return prefix
    started = time.monotonic()
    say(f"[{variant.name}] core: compiling once for every Python ({' '.join(defines)})")
    core = work / "core-build"
    log = work / "logs" / "core.log"
    log.unlink(missing_ok=True)
    shutil.rmtree(prefix, ignore_errors=True)
    shutil.rmtree(core, ignore_errors=True)  # a CMake cache would keep what the key says changed
    configure = ["cmake", "-S", str(source), "-B", str(core), *generator, "-DCMAKE_BUILD_TYPE=Release"]
    run_logged([*configure, *defines, *args], log=log, env=env)
    run_logged(["cmake", "--build", str(core), "--parallel", str(os.cpu_count() or 1)], log=log, env=env)
    run_logged(["cmake", "--install", str(core), "--prefix", str(prefix)], log=log, env=env)
    stamp.write_text(key, encoding="utf-8")
    say(f"[{variant.name}] core: installed to {prefix} ({time.monotonic() - started:.1f} s)")
    return prefix


def _pyproject(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomlkit.parse((project / "pyproject.toml").read_text(encoding="utf-8")).unwrap()
    return data


def builder_python(python: str, staged: Path, venvs: Path, env: Mapping[str, str]) -> Path:
    """A cached venv for one Python with `build` and the project's build requirements."""
    interpreter = require_interpreter(python)
    pyproject = _pyproject(staged)
    requires = sorted(pyproject.get("build-system", {}).get("requires", ["setuptools", "wheel"]))
    wanted = ["build>=1.2.1", *requires]
    # A different interpreter (a new patch release, another install) needs a new environment.
    identity = [str(interpreter.resolve()), *wanted]
    venv = venvs / python_tag(python)
    stamp = venv / ".release-requirements"
    exe = venv / "bin" / "python"
    if exe.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8") == json.dumps(identity):
        return exe
    shutil.rmtree(venv, ignore_errors=True)
    log = venvs / f"{python_tag(python)}.log"
    log.unlink(missing_ok=True)
    # The venv `python -m venv` makes; the interpreter's own pip fills it where it can (no
    # ensurepip: release.machine.venv), under the venv's interpreter.
    run_logged(fresh_venv_argv(interpreter, venv), log=log, env=env)
    pip = pip_argv(interpreter, venv, seeded=(venv / "bin" / "pip").exists())
    run_logged([*pip, "install", "--quiet", "--disable-pip-version-check", *wanted], log=log, env=env)
    stamp.write_text(json.dumps(identity), encoding="utf-8")
    return exe
