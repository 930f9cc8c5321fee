"""Release builds in the variant's build image through cibuildwheel, where docker or podman runs.

The configuration is the one CI uses (`release.build.cibw`), derived from the same resolved steps
as a host build; cibuildwheel runs from the matrix's directory so the toolkit itself is inside the
container at /project for the repair step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from release.build.cibw import cibuildwheel_env
from release.build.host import one_variant, remove_previous_wheels
from release.build.prebuild import say, source_date_epoch
from release.build.stage import check_wheel_identity, stage_project
from release.errors import BuildError
from release.inspect.verify import verify_wheel, write_report
from release.plan.steps import BuildStep
from release.wheel.names import report_path


def cibuildwheel_command(package_dir: Path, output_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cibuildwheel",
        "--platform",
        "linux",
        "--output-dir",
        str(output_dir),
        str(package_dir),
    ]


def run_cibuildwheel(steps: tuple[BuildStep, ...], *, wheelhouse: Path, version: str, engine: str) -> int:
    variant = one_variant(steps)
    root = variant.matrix_root
    wheelhouse = wheelhouse.resolve()  # cibuildwheel runs from the matrix's directory
    wheelhouse.mkdir(parents=True, exist_ok=True)
    remove_previous_wheels(wheelhouse, {step.python_tag for step in steps})
    staged = stage_project(variant, version, root / "build" / variant.name / "src")
    env = {**os.environ, **cibuildwheel_env(steps)}
    env["CIBW_CONTAINER_ENGINE"] = engine
    env["SOURCE_DATE_EPOCH"] = source_date_epoch(root)
    pythons = ", ".join(s.python for s in steps)
    say(f"[{variant.name}] cibuildwheel in the manylinux image through {engine} for Python {pythons}")
    proc = subprocess.run(
        cibuildwheel_command(staged.relative_to(root), wheelhouse), cwd=root, env=env, check=False
    )
    if proc.returncode != 0:
        msg = f"cibuildwheel failed for {variant.name} (exit {proc.returncode})"
        raise BuildError(msg)
    built = sorted(wheelhouse.glob("*.whl"))
    if not built:
        msg = f"cibuildwheel reported success but left no wheel in {wheelhouse}"
        raise BuildError(msg)
    failed = []
    for wheel in built:
        check_wheel_identity(wheel, distribution=variant.distribution, version=version)
        report = verify_wheel(wheel, variant=variant, release=True)
        write_report(report, report_path(wheel))
        say(f"  {wheel.name}: verify {'pass' if report.ok else 'FAIL'}")
        if not report.ok:
            failed.append(wheel.name)
    if failed:
        msg = f"release verification failed: {', '.join(failed)}"
        raise BuildError(msg)
    return 0
