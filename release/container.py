"""Release builds in the manylinux_2_28 image through cibuildwheel, where docker or podman runs.

The configuration is the one CI uses (`release.cibw`); cibuildwheel runs from the matrix's
directory so the toolkit itself is inside the container at /project for the repair step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from release.build import remove_previous_wheels, say, source_date_epoch
from release.cibw import cibuildwheel_env
from release.errors import BuildError
from release.matrix import LoadedMatrix
from release.plan import BuildStep
from release.stage import check_wheel_identity, stage_project
from release.verify import verify_wheel, write_report


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


def run_cibuildwheel(
    loaded: LoadedMatrix,
    variant_name: str,
    steps: tuple[BuildStep, ...],
    *,
    wheelhouse: Path,
    version: str,
    engine: str,
) -> int:
    variant = loaded.variant(variant_name)
    wheelhouse = wheelhouse.resolve()  # cibuildwheel runs from the matrix's directory
    wheelhouse.mkdir(parents=True, exist_ok=True)
    remove_previous_wheels(wheelhouse, {step.python_tag for step in steps})
    staged = stage_project(loaded, variant_name, version, loaded.root / "build" / variant_name / "src")
    pythons = tuple(step.python for step in steps)
    env = {**os.environ, **cibuildwheel_env(loaded, variant_name, pythons)}
    env["CIBW_CONTAINER_ENGINE"] = engine
    env["SOURCE_DATE_EPOCH"] = source_date_epoch(loaded.root)
    say(
        f"[{variant_name}] cibuildwheel in the manylinux image through {engine} "
        f"for Python {', '.join(pythons)}"
    )
    proc = subprocess.run(
        cibuildwheel_command(staged.relative_to(loaded.root), wheelhouse),
        cwd=loaded.root,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        msg = f"cibuildwheel failed for {variant_name} (exit {proc.returncode})"
        raise BuildError(msg)
    built = sorted(wheelhouse.glob("*.whl"))
    if not built:
        msg = f"cibuildwheel reported success but left no wheel in {wheelhouse}"
        raise BuildError(msg)
    failed = []
    for wheel in built:
        check_wheel_identity(wheel, distribution=variant.distribution, version=version)
        report = verify_wheel(wheel, loaded=loaded, variant=variant_name, release=True)
        write_report(report, wheel.with_name(wheel.name + ".verify.json"))
        say(f"  {wheel.name}: verify {'pass' if report.ok else 'FAIL'}")
        if not report.ok:
            failed.append(wheel.name)
    if failed:
        msg = f"release verification failed: {', '.join(failed)}"
        raise BuildError(msg)
    return 0
