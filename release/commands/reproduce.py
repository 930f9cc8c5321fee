"""`release reproduce`: rebuild wheels of a release from its manifest and compare the bytes.

    release reproduce release-manifest.json [--identifier 'cp312-cpu-*'] [--published DIR]

It checks out nothing: run it in a checkout of the recorded commit (the tag). The wheels are built
with the recorded `SOURCE_DATE_EPOCH` and version into `--out` (default `build/reproduce/`, a
build root of its own: nothing is reused from an earlier build), on the host or, with
`--container`, in the variant's build image, exactly as `release build` builds them. Every wheel's
sha256 is compared with the manifest's; with `--published DIR` (the release's wheels, flat or in
`<variant>/`) a wheel that differs is unpacked beside the published one and its first differing
members named, with the ELF sections that differ in a library.

With `--container` in a local image (not `--release-image`), the Debian packages installed in the
image are compared with the ones the manifest records, after the variant's build (the image is
then the one the rebuild used, made or kept by make-image.sh): the differing ones are printed
(`name: recorded -> here`) and the rebuild goes on; when a wheel then differs, the closing error
names the package differences as the likely cause. A difference alone is not a refusal: it often
leaves the bytes unchanged, and remaking the image cannot restore the old versions.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from release import table
from release.builder.host import build_variant
from release.config.machines import host_machine
from release.config.matrix import LoadedMatrix
from release.config.names import whole
from release.errors import ReproduceError, ToolchainError, UsageError
from release.machine.containers import ContainerEngine, require_engine
from release.machine.toolchain import host_toolkit
from release.plan.machine import machine_of
from release.plan.placement import Placement, place
from release.plan.resolve import ResolvedVariant
from release.plan.steps import BuildStep, make_plan
from release.reproduce import inputs, rebuild
from release.settings import in_github_actions

MARKER = ".release-reproduce"
"""Marks `--out` as ours: only such a directory (or an empty one) is cleared before a rebuild."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("manifest", type=Path, help="the release manifest (release-manifest.json of the GitHub Release)")
    add("--identifier", action="append", metavar="ID",
        help="only the wheels of this build identifier (repeatable, patterns; default: all)")  # fmt: skip
    add("--published", type=Path, metavar="DIR",
        help="the published wheels (flat or <variant>/): a differing wheel is compared with")  # fmt: skip
    add(
        "--out",
        type=Path,
        metavar="DIR",
        help="build root of the rebuild (default: build/reproduce beside the matrix)",
    )
    add("--jobs", type=whole(1, 1024), default=1,
        help="wheels built at once on the host (default: %(default)s)")  # fmt: skip
    add("--container", action="store_true",
        help="rebuild through cibuildwheel in the variant's build image")  # fmt: skip
    add("--image", help="with --container: this build image instead of the matrix's")
    add("--release-image", action="store_true", default=in_github_actions(),
        help="with --container: the release image, as release.yml (default in GitHub Actions)")  # fmt: skip


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    release = rebuild.read(args.manifest)
    plan = make_plan(loaded, include_held_back=True)
    notes = rebuild.check_checkout(release, loaded.root, [v.engine_dir for v in plan.variants.values()])
    chosen = rebuild.choose(release, args.identifier)
    grouped = rebuild.steps_for(chosen, plan.builds)
    notes += rebuild.input_notes(release, {n: inputs.variant_inputs(plan.variants[n]) for n in grouped})
    for note in notes:
        print(note)
    out = _fresh(args.out or loaded.root / "build" / "reproduce")
    where = "in the build image" if args.container else "on the host"
    print(f"rebuilding {len(chosen)} wheel(s) of {release.tag} {where} into {out} "
          f"(SOURCE_DATE_EPOCH={release.inputs.get('source_date_epoch')})", flush=True)  # fmt: skip
    differing_packages: list[int] = []
    here = _builder(args, out, release, differing_packages)
    outcomes = rebuild.reproduce(
        release, grouped, chosen, rebuild=by_machine(args, here), out=out,
        published=args.published,
    )  # fmt: skip
    rows = [
        (o.recorded.identifier, o.recorded.name, o.recorded.sha256[:16], (o.sha256 or "-")[:16],
         "identical" if o.identical else "DIFFERS")
        for o in outcomes
    ]  # fmt: skip
    print(table.render(("identifier", "wheel", "manifest sha256", "rebuilt sha256", "result"), rows))
    differing = [o for o in outcomes if not o.identical]
    if differing:
        msg = f"{len(differing)} of {len(outcomes)} wheel(s) did not rebuild the same:\n" + "\n".join(
            o.report for o in differing
        )
        if sum(differing_packages):
            msg += (
                f"\nthe likely cause: {sum(differing_packages)} package(s) of the build image are not "
                "the recorded ones (listed above)"
            )
        raise ReproduceError(msg)
    print(f"{len(outcomes)} wheel(s) rebuilt from {args.manifest.name}: identical, byte for byte")
    return 0


def _fresh(out: Path) -> Path:
    """`out`, emptied when it is ours (or absent); another non-empty directory is refused."""
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        msg = f"{out}: not empty and not a rebuild's directory: name another with --out"
        raise UsageError(msg)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / MARKER).touch()
    return out


def _require_host(variant: ResolvedVariant) -> None:
    """A rebuild on the host takes the recorded path: the declared toolkit, no image fallback."""
    placed: tuple[Placement[ContainerEngine], ...] = place(
        {variant.name: variant}, {variant.name: host_toolkit(variant, allow=False)}, engine=None
    )
    (placement,) = placed
    if placement.where != "host":
        raise ToolchainError(placement.why)


def _builder(
    args: argparse.Namespace, out: Path, release: rebuild.RecordedRelease, differing_packages: list[int]
) -> rebuild.Rebuild:
    """The build path `release build` would take: the host (its toolkit must be the declared one),
    or with --container cibuildwheel in the variant's build image (a local one's packages are then
    compared with the recorded ones: the differences printed, their count kept in
    `differing_packages`)."""
    read_packages = inputs.package_reader()

    def on_host(steps: tuple[BuildStep, ...], wheelhouse: Path, version: str) -> list[Path]:
        _require_host(steps[0].variant)
        results = build_variant(
            steps, wheelhouse=wheelhouse, version=version, jobs=args.jobs, work_root=out / "work"
        )
        return [r.wheel for r in results]

    def in_container(steps: tuple[BuildStep, ...], wheelhouse: Path, version: str) -> list[Path]:
        from release.builder.container import run_cibuildwheel  # noqa: PLC0415

        results, lacking = run_cibuildwheel(
            steps, wheelhouse=wheelhouse, version=version, engine=require_engine(),
            image=args.image, release_image=args.release_image,
        )  # fmt: skip
        if lacking:
            msg = f"the build image lacks CPython {', '.join(lacking)}: cannot rebuild those wheels"
            raise ToolchainError(msg)
        variant = steps[0].variant
        if args.image or not args.release_image:  # a local image: the release image has a digest
            notes, count = rebuild.image_notes(
                release, variant.name, args.image or variant.build_image.local, read_packages
            )
            differing_packages.append(count)
            for note in notes:
                print(note, flush=True)
        return [r.wheel for r in results]

    return in_container if args.container else on_host


def by_machine(args: argparse.Namespace, here: rebuild.Rebuild) -> rebuild.Rebuild:
    """`here` for this machine's steps; another machine's are cross-compiled, as `release build
    --arch` built them (the release image builds them on that machine's runner)."""

    def chosen(steps: tuple[BuildStep, ...], wheelhouse: Path, version: str) -> list[Path]:
        if machine_of(steps[0].variant) == host_machine():
            return here(steps, wheelhouse, version)
        from release.builder.cross import rebuild_cross  # noqa: PLC0415

        image = bool(args.release_image or args.image)
        return rebuild_cross(
            steps, wheelhouse=wheelhouse, version=version, image=image, engine=require_engine
        )

    return chosen
