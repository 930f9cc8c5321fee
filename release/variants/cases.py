"""Which installs `release check-resolution` makes: every (index setup, installer, Python) case,
in report order, from the resolved variants and the variant set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.version import Version

from release.plan.resolve import ResolvedVariant
from release.variants.make import VariantSet
from release.variants.resolution import FORCE_CUDA, Case

INSTALLERS = ("pip", "uv")
SETUPS = ("per-name", "partial-index", "held-name", "variants")
NVIDIA_DRIVER = Path("/sys/module/nvidia/version")
"""Where uv's NVIDIA provider reads the driver version."""


def plan_cases(
    variants: Mapping[str, ResolvedVariant],
    pythons: Sequence[str],
    installers: Sequence[str],
    setups: Sequence[str],
    shared: VariantSet | None,
    *,
    nvidia_driver: bool,
    newest: str | None = None,
    held: Mapping[str, Sequence[str]] | None = None,
) -> list[Case]:
    """Every install the report covers, in report order. `newest` is the matrix's newest Python
    (the one the partial index holds), when only some Pythons are checked; `held`: distribution
    -> another project's files under that name on the public index."""
    cases: list[Case] = []
    newest = newest or max(pythons, key=Version)

    def add(setup: str, installer: str, python: str, requirement: str, **how: Any) -> None:
        if setup in setups and installer in installers:
            cases.append(Case(setup, installer, python, requirement, **how))

    for variant in variants.values():
        for python in (p for p in pythons if p in variant.pythons):
            for installer in INSTALLERS:
                add("per-name", installer, python, variant.distribution, indexes=("release",), expect=variant)
                if python != newest:
                    add(
                        "partial-index", installer, python, variant.distribution,
                        indexes=("release", "newest-only"), expect=variant, may_fail=True,
                    )  # fmt: skip
                theirs = (held or {}).get(variant.distribution)
                if theirs:
                    add(
                        "held-name", installer, python, variant.distribution,
                        indexes=("public", "release"), expect=variant, note=", ".join(sorted(theirs)[:3]),
                    )  # fmt: skip
    if shared is None:
        return cases
    null = next((shared.variants[d.variant] for d in shared.descriptions if d.is_null), None)
    cuda = next((d for d in shared.descriptions if "nvidia" in d.properties), None)
    cuda_env = (
        {FORCE_CUDA: cuda.properties["nvidia"].get("cuda_version_lower_bound", ("13.0",))[0]} if cuda else {}
    )
    plain = shared.variants[cuda.variant] if (nvidia_driver and cuda) else null
    installs: list[tuple[str, ResolvedVariant | None, dict[str, str], str]] = [
        ("uv", plain, {}, "this machine's own hardware, as uv detects it"),
        ("pip", None, {}, "pip does not read variant wheels"),
    ]
    if cuda is not None:
        installs.insert(1, ("uv", shared.variants[cuda.variant], cuda_env, ""))
    for python in pythons:
        for installer, expect, env, note in installs:
            add(
                "variants",
                installer,
                python,
                shared.distribution,
                indexes=("variants",),
                expect=expect,
                env=env,
                note=note,
            )
    return cases
