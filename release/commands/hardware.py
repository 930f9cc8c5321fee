"""`release hardware`: one leg of the hardware tier on this (GPU) machine.

The exact wheel of the leg (from a wheelhouse or a named file) is checked against its verify
report, installed for the given Python with `pip install --target` (its own packages, PyTorch
among them, stay importable), then every console script's `--version` and the engine's device
selftest run in one role: `single` (one process), `prefill` (starts the master, serves a GPU
buffer and publishes the master's address in --address-file) or `decode` (finds the master there,
reads the buffer into its own GPU memory and verifies it, writes its own data back). Without a
GPU the selftest is a skip with its reason, never a pass; --require-device makes it a failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from release.config.matrix import LoadedMatrix
from release.errors import SmokeError, UsageError
from release.hardware.leg import ROLES, Leg, python_version, run_leg
from release.plan.steps import make_plan
from release.smoke.selection import wheels_for
from release.table import render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--variant", required=True, help="the variant whose wheel this leg runs")
    add("--python", default=sys.executable, help="the interpreter to install for (default: this one)")
    add("--role", choices=ROLES, default="single", help="single (default), prefill or decode")
    add("--address-file", type=Path, help="prefill writes the master's address here, decode reads it")
    add("--wheelhouse", type=Path, help="holds <variant>/*.whl (default: wheelhouse/ beside the matrix)")
    add("--wheel", type=Path, help="this wheel file (its verify report beside it) instead of a wheelhouse")
    add(
        "--local",
        action="store_true",
        help="a local leg (this machine's builds): accept a verify report that fails only platform-floor",
    )
    add("--target", type=Path, help="install here (default: a fresh temporary directory)")
    add("--bench", type=int, default=0, metavar="MIB", help="then run the engine's device bench over MIB MiB")
    add(
        "--bench-gate",
        action="store_true",
        help="a bench below the engine's goal ratio fails the leg (default: the ratio is reported)",
    )
    add("--timeout", type=float, default=600.0, help="seconds any one step may take (default 600)")
    add("--require-device", action="store_true", help="a selftest without a GPU fails instead of skipping")
    add("--json", action="store_true", help="print the leg as JSON (progress goes to stderr)")


def _wheel(args: argparse.Namespace, loaded: LoadedMatrix, version: str) -> tuple[Path, str]:
    plan = make_plan(loaded, variants=(args.variant,))
    variant = plan.variant(args.variant)
    if args.wheel is not None:
        return args.wheel, variant.import_name
    wheelhouse = (args.wheelhouse or loaded.root / "wheelhouse") / args.variant
    found = wheels_for(wheelhouse, variant, version)
    if len(found) != 1:
        what = "no wheel" if not found else f"{len(found)} wheels ({', '.join(w.name for w in found)})"
        msg = (
            f"{wheelhouse}: {what} of {variant.distribution} for Python {version}; this leg needs exactly one"
        )
        raise SmokeError(msg)
    return found[0], variant.import_name


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    if args.role != "single" and args.address_file is None:
        msg = f"--role {args.role} needs --address-file (the master's address is exchanged through it)"
        raise UsageError(msg)
    version = python_version(args.python)
    wheel, import_name = _wheel(args, loaded, version)

    def log(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    with tempfile.TemporaryDirectory(prefix="release-hardware-") as scratch:
        leg = Leg(
            wheel=wheel,
            python=args.python,
            role=args.role,
            import_name=import_name,
            target=args.target or Path(scratch) / "site",
            local=args.local,
            address_file=args.address_file,
            bench_mib=args.bench,
            bench_gate=args.bench_gate,
            timeout=args.timeout,
            require_device=args.require_device,
        )
        log(f"hardware leg: {wheel.name}, Python {version} ({args.python}), role {args.role}")
        checks = run_leg(leg, log)
    if args.json:
        record = {
            "schema_version": 1,
            "wheel": wheel.name,
            "variant": args.variant,
            "python": version,
            "role": args.role,
            "local": args.local,
            "ok": all(c.status != "fail" for c in checks),
            "checks": [
                {"step": c.step, "status": c.status, "detail": c.detail, "data": c.data} for c in checks
            ],
        }
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print()
        print(render(("step", "status", "detail"), [(c.step, c.status, c.detail) for c in checks]))
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        msg = f"hardware leg {args.role} of {wheel.name}: " + "; ".join(
            f"{c.step}: {c.detail}" for c in failed
        )
        raise SmokeError(msg)
    return 0
