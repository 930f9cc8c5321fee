"""One leg of the hardware tier: the exact verified wheel, installed for a given Python, then every
console script's `--version` and the engine's device selftest in one role.

Where no container engine exists the wheel is installed with `pip install --target` and found
through `PYTHONPATH`, so the Python's own packages (PyTorch on a GPU machine) stay importable.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from release import process, settings
from release.errors import SmokeError
from release.table import printable
from release.wheel.files import file_sha256, read_json, reason
from release.wheel.names import report_path as wheel_report_path

Role = Literal["single", "prefill", "decode"]
ROLES: tuple[Role, ...] = ("single", "prefill", "decode")
LOCAL_ONLY_RULES = frozenset({"platform-floor"})
"""Rules a local leg (this machine's own builds) may fail or warn on: the host's tag, not the floor."""

SELFTEST = ("{python}", "-m", "{import_name}", "selftest", "--json", "--device")
"""The engine's selftest protocol: one JSON object with `ok`, `device` and, when skipped, a reason."""
PAIR = ("--role", "{role}", "--address-file", "{address_file}")
MASTER_HOST = ("--master-host", "{master_host}")
BENCH = ("{python}", "-m", "{import_name}", "bench", "--json", "--device", "--total-mib", "{total_mib}")


@dataclass(frozen=True)
class Check:
    """One row of a leg's table."""

    step: str
    status: Literal["pass", "fail", "skip"]
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Leg:
    """What one leg runs; resolved by the command, carried here unchanged."""

    wheel: Path
    python: str
    role: Role
    import_name: str
    target: Path
    local: bool
    address_file: Path | None = None
    master_host: str = ""
    """prefill: where its master listens (0.0.0.0 for another node; the published address is then
    this host's own); empty: the engine's default (this host only)."""
    bench_mib: int = 0
    bench_gate: bool = False
    timeout: float = 600.0
    require_device: bool = False


def sha256_of(path: Path) -> str:
    return file_sha256(path)


MAX_REPORT_BYTES = 16 << 20
"""The largest verify report read (one wheel's report is a few hundred KiB at most)."""


def _report(report_path: Path, wheel: Path) -> dict[str, Any]:
    """The verify report, read by the one reader and held to its shape; one line otherwise."""
    try:
        report = read_json(report_path, MAX_REPORT_BYTES)
    except OSError as exc:
        why = reason(exc)
    except ValueError as exc:
        why = str(exc)
    else:
        rules = report.get("rules", []) if isinstance(report, dict) else None
        rules = rules if isinstance(rules, list) else [None]
        ids = [r.get("id") if isinstance(r, dict) else None for r in rules]
        if all(isinstance(i, str) for i in ids):
            return report  # type: ignore[return-value]  # (a dict, checked above)
        why = "not a verify report (an object with a list of rules)"
    msg = f"{wheel.name}: no readable verify report beside it ({report_path}: {why})"
    raise SmokeError(msg)


def check_report(wheel: Path, *, local: bool) -> Check:
    """The wheel's bytes are the verified ones, and the report allows this leg."""
    report_path = wheel_report_path(wheel)
    report = _report(report_path, wheel)
    try:
        digest = sha256_of(wheel)
    except OSError as exc:
        msg = f"{wheel}: cannot read the wheel ({reason(exc)})"
        raise SmokeError(msg) from None
    if report.get("sha256") != digest:
        recorded = report.get("sha256")
        shown = printable(repr(recorded))[:80]
        msg = f"{wheel.name}: sha256 {digest} is not the verified one ({shown} in {report_path.name})"
        raise SmokeError(msg)
    flagged = sorted({r["id"] for r in report.get("rules", ()) if r.get("status") in ("fail", "warn")})
    data = {"sha256": digest, "releasable": bool(report.get("releasable")), "flagged_rules": flagged}
    if report.get("releasable") and not flagged:
        return Check("verify report", "pass", f"sha256 {digest[:16]}… matches; releasable", data)
    if local and set(flagged) <= LOCAL_ONLY_RULES:
        detail = (
            f"sha256 {digest[:16]}… matches; local leg: accepted although not releasable "
            f"({', '.join(flagged)} only: this host's tag, not the release floor)"
        )
        return Check("verify report", "pass", detail, data)
    kind = "local leg accepts only platform-floor" if local else "a release leg needs a releasable report"
    msg = f"{wheel.name}: its verify report flags {', '.join(flagged) or 'not releasable'} ({kind})"
    raise SmokeError(msg)


@dataclass(frozen=True)
class Where:
    """Where the leg's commands run: here with `env`, or behind `prefix` (a container's `exec`
    carrying its own environment)."""

    env: dict[str, str]
    prefix: tuple[str, ...] = ()


CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def leg_env(target: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment that finds the `--target` install beside the Python's own packages."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    env["PATH"] = os.pathsep.join((str(target / "bin"), env.get("PATH", "")))
    env["PYTHONNOUSERSITE"] = "1"
    env.pop("PYTHONHOME", None)
    return env


def here(target: Path) -> Where:
    return Where(leg_env(target, settings.environment()))


def in_container(target: Path, prefix: Callable[[dict[str, str]], list[str]]) -> Where:
    """The leg's commands in a container: its own PATH, the install found the same way."""
    env = leg_env(target, {"PATH": CONTAINER_PATH, "HOME": "/tmp"})  # noqa: S108 (the container's own /tmp)
    return Where(settings.environment(), tuple(prefix(env)))


def _run(argv: Sequence[str], where: Where, timeout: float) -> process.Result:
    try:
        return process.run([*where.prefix, *argv], env=where.env, timeout=timeout)
    except process.TimedOut:
        msg = f"{' '.join(argv)}: still running after {timeout:g}s"
        raise SmokeError(msg) from None
    except OSError as exc:
        msg = f"{argv[0]}: cannot run ({exc.strerror or exc})"
        raise SmokeError(msg) from None


def python_version(python: str, where: Where | None = None) -> str:
    """`3.12` for the interpreter `python` (a path or a command)."""
    probe = [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    done = _run(probe, where or Where(settings.environment()), 60)
    if done.returncode != 0:
        msg = f"{python}: not a working Python ({last_line(done)})"
        raise SmokeError(msg)
    return done.stdout.strip()


def install(leg: Leg, where: Where) -> Check:
    """`pip install --target`: beside the Python's own packages, never over them."""
    argv = [
        leg.python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "--upgrade",
        "--target",
        str(leg.target),
        str(leg.wheel),
    ]
    done = _run(argv, where, leg.timeout)
    if done.returncode != 0:
        return Check("install", "fail", f"pip install --target failed: {last_line(done)}")
    return Check(
        "install", "pass", f"pip install --target {leg.target} (PYTHONPATH)", {"target": str(leg.target)}
    )


def scripts(leg: Leg, where: Where) -> list[Check]:
    bindir = leg.target / "bin"
    found = sorted(p for p in bindir.iterdir() if p.is_file()) if bindir.is_dir() else []
    if not found:
        return [Check("scripts", "fail", f"the wheel installed no console script in {bindir}")]
    checks = []
    for script in found:
        done = _run([str(script), "--version"], where, 60)
        out = (done.stdout.strip() or done.stderr.strip()).splitlines()
        line = out[0] if out else ""
        status: Literal["pass", "fail"] = "pass" if done.returncode == 0 else "fail"
        checks.append(Check(f"{script.name} --version", status, line or f"exit {done.returncode}"))
    return checks


def _argv(template: Sequence[str], leg: Leg, **extra: str) -> list[str]:
    values = {
        "python": leg.python,
        "import_name": leg.import_name,
        "role": leg.role,
        "address_file": str(leg.address_file or ""),
        "master_host": leg.master_host,
        "total_mib": str(leg.bench_mib),
        **extra,
    }
    return [word.format(**values) for word in template]


def last_line(done: process.Result) -> str:
    """What a failed program said last (a traceback's exception line), one line of at most 300
    characters: a check's detail, and the leg's one error line, never carry a raw traceback."""
    lines = [ln.strip() for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "no output"


def _json_out(done: process.Result) -> dict[str, Any] | None:
    text = done.stdout
    start = text.find("{")
    try:
        value = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def selftest(leg: Leg, where: Where) -> Check:
    argv = _argv(SELFTEST, leg)
    if leg.role != "single":
        argv += _argv(PAIR, leg)
    if leg.role == "prefill" and leg.master_host:
        argv += _argv(MASTER_HOST, leg)
    done = _run(argv, where, leg.timeout)
    report = _json_out(done)
    step = f"selftest ({leg.role})"
    if report is None:
        return Check(step, "fail", f"exit {done.returncode}, no JSON report: {last_line(done)}")
    if not report.get("ok") or done.returncode != 0:
        return Check(
            step, "fail", f"exit {done.returncode}: {report.get('error', 'data not verified')}", report
        )
    host_detail = _transfers(report)
    if not report.get("device"):
        reason = report.get("device_reason") or "no GPU visible to the engine's runtime"
        status: Literal["pass", "fail", "skip"] = "fail" if leg.require_device else "skip"
        return Check(step, status, f"device: no GPU ({reason}); host memory only: {host_detail}", report)
    return Check(step, "pass", f"device memory: {host_detail}{_registration(report)}", report)


def _transfers(report: dict[str, Any]) -> str:
    parts = []
    for key in ("write", "read", "received"):
        part = report.get(key)
        if isinstance(part, dict) and "verified" in part:
            parts.append(
                f"{key} {part.get('bytes', 0)} B {'verified' if part['verified'] else 'NOT verified'}"
            )
    return ", ".join(parts) or "no transfer reported"


def _registration(report: dict[str, Any]) -> str:
    reg = report.get("registration", {})
    local = reg.get("device_local") if isinstance(reg, dict) else None
    if not isinstance(local, dict):
        local = reg if isinstance(reg, dict) and "offset" in reg else None
    if not local:
        return ""
    allocator = reg.get("allocator", "engine")
    return (
        f"; {allocator} allocation, offset {local.get('offset')} in {local.get('alloc_size')} B, "
        f"dmabuf {local.get('dmabuf')} ({local.get('dmabuf_reason')})"
    )


def bench(leg: Leg, where: Where) -> Check:
    done = _run(_argv(BENCH, leg), where, leg.timeout)
    report = _json_out(done)
    if report is None or done.returncode != 0:
        return Check("bench", "fail", f"exit {done.returncode}: {last_line(done)}")
    return bench_check(report, gate=leg.bench_gate)


def bench_check(report: dict[str, Any], *, gate: bool) -> Check:
    """The bench's numbers as a check. A missed goal fails the leg only when gated (--bench-gate):
    a shared or noisy machine measures, a dedicated GPU runner may gate."""
    met = bool(report.get("ok"))
    goal = report.get("goal_ratio")
    verdict = "met" if met else ("NOT met" if gate else "not met (reported; --bench-gate fails the leg)")
    detail = (
        f"{report.get('memory', 'host')} buffers: write {report['write_gib_s']:.2f} GiB/s "
        f"(ratio {report['write_ratio']:.2f}), read {report['read_gib_s']:.2f} GiB/s "
        f"(ratio {report['read_ratio']:.2f}), plain socket {report['tcp_gib_s']:.2f} GiB/s; "
        f"goal ratio >= {goal}: {verdict}"
    )
    return Check("bench", "fail" if gate and not met else "pass", detail, report)


def run_leg(leg: Leg, log: Callable[[str], None], where: Where | None = None) -> list[Check]:
    """Every check of the leg, in order; stops at the first failure that makes the rest meaningless."""
    started = time.monotonic()
    checks = [check_report(leg.wheel, local=leg.local)]
    log(f"[{leg.role}] {checks[-1].detail}")
    env = where or here(leg.target)
    checks.append(install(leg, env))
    log(f"[{leg.role}] {checks[-1].detail}")
    if checks[-1].status == "fail":
        return checks
    checks += scripts(leg, env)
    log(f"[{leg.role}] console scripts: {', '.join(c.status for c in checks[2:])}")
    checks.append(selftest(leg, env))
    log(f"[{leg.role}] selftest: {checks[-1].status} ({time.monotonic() - started:.1f}s)")
    if leg.bench_mib > 0:
        checks.append(bench(leg, env))
        log(f"[{leg.role}] bench: {checks[-1].status}")
    return checks
