"""`release hardware`: one leg of the hardware tier on this (GPU) machine.

The exact wheel of the leg (from a wheelhouse or a named file) is checked against its verify
report, installed for the given Python with `pip install --target` (its own packages, PyTorch
among them, stay importable), then every console script's `--version` and the engine's device
selftest run in one role: `single` (one process), `prefill` (starts the master, serves a GPU
buffer and publishes the master's address in --address-file) or `decode` (finds the master there,
reads the buffer into its own GPU memory and verifies it, writes its own data back). Without a
GPU the selftest is a skip with its reason, never a pass; --require-device makes it a failure.

The wheel comes from the GitHub Release of a tag (--release, through `gh`), a wheelhouse or a
file. With --image the leg runs in one container of the serving image, with the image's own
Python and the host's GPUs (`--device /dev/kfd /dev/dri` on AMD hosts, `--gpus all` where
nvidia-smi exists). For two nodes, prefill runs with --detach (it returns once the master's
address is written) and --attach (it waits, bounded, for the served leg to end, and turns the
decode job's --done-artifact into the engine's done file); decode takes the address from
--address-artifact. The artifacts are this workflow run's, found through `gh run download`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from release import flags, process, settings
from release.config.machines import MACHINES, host_machine, machines_of_tags
from release.config.matrix import LoadedMatrix
from release.config.names import seconds, whole
from release.errors import ReleaseError, SmokeError, UsageError
from release.hardware import container as containers
from release.hardware import fetch, pair
from release.hardware.emulated import emulated_leg
from release.hardware.leg import ROLES, Check, Leg, Where, in_container, python_version, run_leg
from release.inspect.verify import verify_wheel, write_report
from release.machine.containers import STANDINS_ENV, ContainerEngine, image_python, standins
from release.machine.containers import interpreter as image_interpreter_path
from release.plan.placement import place_leg
from release.plan.resolve import ResolvedVariant
from release.plan.steps import make_plan
from release.smoke.selection import wheels_for
from release.table import render
from release.wheel.names import parse_wheel_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.variant(parser, "the variant whose wheel this leg runs", required=True)
    flags.python(parser, "the interpreter to install for (default: this one)", default=sys.executable)
    add("--role", choices=ROLES, default="single", help="single (default), prefill or decode")
    add("--address-file", type=Path, help="prefill writes the master's address here, decode reads it")
    add(
        "--master-host",
        default="",
        help="prefill: the master listens here; 0.0.0.0 for a decode on another node (the address "
        "published is then this host's own)",
    )
    flags.wheelhouse(parser, "holds <variant>/*.whl (default: wheelhouse/ beside the matrix)")
    add("--wheel", type=Path, help="this wheel file (its verify report beside it) instead of a wheelhouse")
    add("--release", metavar="TAG", help="download the leg's wheel and report from this tag's GitHub Release")
    settings.argument(
        parser, "--repo", env="GITHUB_REPOSITORY", metavar="OWNER/NAME",
        help="with --release: the GitHub repository",
    )  # fmt: skip
    add(
        "--index",
        metavar="URL",
        help="download the leg's wheel from this package index (PEP 503); verify runs here on its bytes",
    )
    add("--index-version", metavar="VERSION", help="with --index: this version (default: the newest)")
    add("--image", help="run the leg in a container of this serving image, with the image's own Python")
    add(
        "--machine",
        choices=sorted(MACHINES),
        help="the machine whose wheel this leg runs (default: this one); another machine's runs here "
        "under emulation (qemu-user) in the variant's cross image, with Debian's Python of that machine",
    )
    add(
        "--detach",
        action="store_true",
        help="prefill: start the leg in the background; return once the master's address is written",
    )
    add("--attach", action="store_true", help="prefill: wait for the leg --detach started, and report it")
    add("--address-artifact", metavar="NAME", help="decode: wait for this run's artifact NAME (the address)")
    add("--done-artifact", metavar="NAME", help="--attach: decode's artifact NAME ends prefill's serving")
    add(
        "--wait",
        type=seconds,
        default=1800.0,
        help="seconds to wait for a peer's artifact or address in total (default 1800)",
    )
    add(
        "--local",
        action="store_true",
        help="a local leg (this machine's builds): accept a verify report that fails only platform-floor",
    )
    add("--target", type=Path, help="install here (default: a fresh temporary directory)")
    add("--bench", type=whole(0, 1 << 20), default=0, metavar="MIB",
        help="then run the engine's device bench over MIB MiB")  # fmt: skip
    add(
        "--bench-gate",
        action="store_true",
        help="a bench below the engine's goal ratio fails the leg (default: the ratio is reported)",
    )
    add("--timeout", type=seconds, default=600.0, help="seconds any one step may take (default 600)")
    add("--require-device", action="store_true", help="a selftest without a GPU fails instead of skipping")
    add("--json", action="store_true", help="print the leg as JSON (progress goes to stderr)")


def matrix_path(args: argparse.Namespace, given: Path) -> Path:
    """The matrix when --matrix is not given: `matrix.yaml` here, else the nearest one above the
    invocation directory, else above --wheel's folder (a leg run from the wheel's own folder in a
    checkout); else one line naming --matrix."""
    if given.exists() or given.is_absolute() or given.parent != Path():
        return given
    here = Path.cwd()
    wheel = getattr(args, "wheel", None)
    starts = list(dict.fromkeys([here, *([Path(wheel).absolute().parent] if wheel else [])]))
    for start in starts:
        for folder in (start, *start.parents):
            if (folder / given.name).is_file():
                found = folder / given.name
                print(f"matrix: {found} (none in {here})", file=sys.stderr, flush=True)
                return found
    beside = f" nor above the wheel's folder {starts[-1]}" if len(starts) > 1 else ""
    msg = (
        f"no {given.name} in {here} or any folder above it{beside}: pass --matrix PATH "
        f"(the matrix.yaml the wheel was built from)"
    )
    raise UsageError(msg)


def _absolute(args: argparse.Namespace) -> None:
    """Paths given relative to the invocation directory, made absolute once: the leg runs its
    commands elsewhere (pip, the engine, a container's mounts), where a relative one means
    another file."""
    for name in ("wheel", "wheelhouse", "target", "address_file"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(args, name, Path(value).absolute())


def _wheel(
    args: argparse.Namespace, loaded: LoadedMatrix, version: str, scratch: Path
) -> tuple[Path, ResolvedVariant]:
    """The leg's wheel, and its variant resolved for the matrix."""
    variant = make_plan(loaded, variants=(args.variant,)).variant(args.variant)
    if args.machine and args.machine not in variant.floors:
        released = ", ".join(variant.floors)
        msg = f"--machine {args.machine}: variant {args.variant} is released for {released} only"
        raise UsageError(msg)
    if args.wheel is not None:
        return args.wheel, variant
    if args.release:
        if not args.repo:
            msg = "--release needs --repo OWNER/NAME (or $GITHUB_REPOSITORY)"
            raise UsageError(msg)
        machine = _machine(args) if len(variant.floors) > 1 else None  # this runner's own wheel
        pattern = fetch.wheel_pattern(variant.distribution, version, machine)
        return fetch.from_release(args.release, args.repo, pattern, scratch / "wheel"), variant
    if args.index:
        return _from_index(args, loaded, variant, version, scratch / "wheel"), variant
    wheelhouse = (args.wheelhouse or loaded.root / "wheelhouse") / args.variant
    found = wheels_for(wheelhouse, variant, version, other_machines=_emulated(args))
    found = [w for w in found if machines_of_tags(parse_wheel_name(w).platforms) <= {_machine(args)}]
    if len(found) != 1:
        what = "no wheel" if not found else f"{len(found)} wheels ({', '.join(w.name for w in found)})"
        msg = (
            f"{wheelhouse}: {what} of {variant.distribution} for Python {version}; this leg needs exactly one"
        )
        raise SmokeError(msg)
    return found[0], variant


def _machine(args: argparse.Namespace) -> str:
    """The machine whose wheel the leg runs: --machine, else this one."""
    return str(args.machine or host_machine())


def _emulated(args: argparse.Namespace) -> bool:
    return _machine(args) != host_machine()


def _from_index(
    args: argparse.Namespace, loaded: LoadedMatrix, variant: ResolvedVariant, version: str, dest: Path
) -> Path:
    """The variant's wheel for `version` from a PEP 503 index (pip download, this host's platform
    tags). An index carries no verify report: verify runs here, in release mode, on these bytes."""
    dest.mkdir(parents=True, exist_ok=True)
    spec = variant.distribution + (f"=={args.index_version}" if args.index_version else "")
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
            "--python-version", version, "--index-url", args.index, "--dest", str(dest), spec]  # fmt: skip
    done = process.run(argv, timeout=args.timeout)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        msg = f"{args.index}: no wheel of {spec} for Python {version} ({why})"
        raise SmokeError(msg)
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        msg = f"{args.index}: pip download gave {len(wheels)} wheels of {spec}; this leg needs exactly one"
        raise SmokeError(msg)
    report = verify_wheel(wheels[0], variant=variant, matrix=str(loaded.path), release=True)
    write_report(report)
    return wheels[0]


def _source(args: argparse.Namespace, wheel: Path) -> str:
    if args.release:
        return f"{wheel.name} from the GitHub Release {args.release} of {args.repo}"
    if args.index:
        return f"{wheel.name} from {args.index}; no report there: verify ran here on these bytes"
    return str(wheel)


def _check_arguments(args: argparse.Namespace) -> None:
    sources = [f for f in ("wheel", "release", "index") if getattr(args, f, None)]
    if len(sources) > 1:
        msg = f"give one of --{', --'.join(sources)}: the leg's wheel comes from one place"
        raise UsageError(msg)
    if _emulated(args) and (args.image or args.index):
        given = "--image" if args.image else "--index"
        msg = (
            f"--machine {args.machine} with {given}: this machine is {host_machine()}; another "
            f"machine's leg runs here only under emulation, from --release, --wheelhouse or --wheel"
        )
        raise UsageError(msg)
    if args.role != "single" and args.address_file is None:
        msg = f"--role {args.role} needs --address-file (the master's address is exchanged through it)"
        raise UsageError(msg)
    if (args.detach or args.attach) and args.role != "prefill":
        msg = "--detach and --attach are for --role prefill (the side that serves)"
        raise UsageError(msg)
    if args.detach and args.attach:
        msg = "--detach starts the prefill leg, --attach waits for it: give one"
        raise UsageError(msg)
    if args.address_artifact and args.role != "decode":
        msg = "--address-artifact is for --role decode (prefill writes the address)"
        raise UsageError(msg)
    if args.done_artifact and not args.attach:
        msg = "--done-artifact goes with --attach (prefill waits for decode's artifact there)"
        raise UsageError(msg)


def _named_version(python: str) -> str:
    """`3.12` from `python3.12`: in an image or under emulation, the version picks the wheel
    before the interpreter runs."""
    found = re.fullmatch(r"(?a)(?:.*/)?python(\d+\.\d+)", python)
    if found is None:
        msg = (
            f"--image and another machine's --machine need --python named with its version "
            f"(python3.12), not {python!r}"
        )
        raise UsageError(msg)
    return found.group(1)


def _declared_at(loaded: LoadedMatrix, reference: str) -> str:
    """Where the matrix names a serving image: `matrix.yaml:112: images.vllm-rocm.container`."""
    for name, image in loaded.matrix.images.items():
        if image.container == reference:
            key = f"images.{name}.container"
            line = loaded.lines.get(key)
            return f"{loaded.path.name}{f':{line}' if line else ''}: {key}"
    return f"{loaded.path.name} (no image declares it; --image {reference})"


@contextlib.contextmanager
def _where(
    args: argparse.Namespace, loaded: LoadedMatrix, variant: ResolvedVariant, wheel: Path, *,
    target: Path, log: Callable[[str], None],
) -> Iterator[tuple[Where | None, str, list[Check]]]:  # fmt: skip
    """Here, or in a container of --image: (where, the python to run, what was decided)."""
    if not args.image:
        yield None, args.python, []
        return
    engine = ContainerEngine.answering()
    if engine is None:
        msg = f"--image {args.image}: no container engine (docker or podman) answers on this runner"
        raise SmokeError(msg)
    notes: list[Check] = []
    reference = standins(settings.text(STANDINS_ENV)).get(args.image)
    if reference is not None:
        detail = f"{reference} stands in for {args.image} (no registry here; {STANDINS_ENV})"
        notes.append(Check("serving image", "pass", detail, {"declared": args.image, "stand_in": reference}))
    else:
        reference = args.image
        containers.ensure_image(engine, reference, log, _declared_at(loaded, reference))
        notes.append(Check("serving image", "pass", reference, {"declared": reference, "stand_in": None}))
    version = _named_version(args.python)
    python = image_python(engine, reference, args.python, image_interpreter_path(version))
    if python is None:
        where = image_interpreter_path(version)
        msg = f"{reference} has no Python {version} (neither {args.python} on its PATH nor {where})"
        raise SmokeError(msg)
    target.mkdir(parents=True, exist_ok=True)
    mounts: list[tuple[Path, bool]] = [(wheel.parent.resolve(), False), (target.resolve(), True)]
    if args.address_file is not None:
        exchange = Path(args.address_file).resolve().parent
        exchange.mkdir(parents=True, exist_ok=True)
        mounts.append((exchange, True))
    notes.append(Check("image python", "pass", f"{reference}: {python} (the image's own)"))
    box = containers.Container(engine, reference, mounts=mounts, devices=variant.backend.container)
    log(f"container: {engine} run {args.image}, its backend's needs: {' '.join(box.devices) or 'none here'}")
    try:
        yield in_container(target, box.prefix), python, notes
    finally:
        box.close()


def _place(
    args: argparse.Namespace,
    loaded: LoadedMatrix,
    variant: ResolvedVariant,
    wheel: Path,
    *,
    target: Path,
    log: Callable[[str], None],
) -> contextlib.AbstractContextManager[tuple[Where | None, str, list[Check]]]:
    """Carry out where the leg runs (`release.plan.placement.place_leg`, the decision `release plan
    --smoke` shows): here, in a container of --image, or, for another machine's wheel, under
    emulation (`release.hardware.emulated`)."""
    if place_leg(image=args.image, machine=_machine(args), host=host_machine()).where != "emulated":
        return _where(args, loaded, variant, wheel, target=target, log=log)
    folder = Path(args.address_file).resolve().parent if args.address_file is not None else None
    machine, version = _machine(args), _named_version(args.python)
    return emulated_leg(variant, machine, version, wheel=wheel, target=target, exchange=folder)


def _record(args: argparse.Namespace, wheel: str, version: str, checks: list[Check]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "wheel": wheel,
        "variant": args.variant,
        "python": version,
        "role": args.role,
        "local": args.local,
        "image": args.image or "",
        "ok": all(c.status != "fail" for c in checks),
        "checks": [{"step": c.step, "status": c.status, "detail": c.detail, "data": c.data} for c in checks],
    }


def _report(args: argparse.Namespace, record: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print()
        print(
            render(
                ("step", "status", "detail"),
                [(c["step"], c["status"], c["detail"]) for c in record["checks"]],
            )
        )
    failed = [c for c in record["checks"] if c["status"] == "fail"]
    if failed or not record["checks"]:
        msg = f"hardware leg {record['role']} of {record['wheel']}: " + (
            "; ".join(f"{c['step']}: {c['detail']}" for c in failed) or "no checks ran"
        )
        raise SmokeError(msg)
    return 0


def _pair_options(args: argparse.Namespace) -> pair.PairOptions:
    """What the pair's exchange takes from the flags: no Namespace enters the stage."""
    return pair.PairOptions(
        address_file=args.address_file, wait=args.wait, timeout=args.timeout,
        done_artifact=args.done_artifact, address_artifact=args.address_artifact or "", repo=args.repo or "",
    )  # fmt: skip


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    _check_arguments(args)

    def log(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    _absolute(args)
    exchange = _pair_options(args)
    pair.make_folder(exchange)
    if args.attach:
        return _report(args, pair.attach(exchange, log))
    if args.detach:
        return pair.detach(sys.argv[1:], exchange)
    if args.role == "prefill":
        # A stale address from an earlier run would send decode to a master that is gone.
        for old in (Path(args.address_file), Path(str(args.address_file) + ".done")):
            old.unlink(missing_ok=True)
    try:
        return _leg(args, loaded, log)
    except ReleaseError as exc:
        if args.role == "prefill" and not Path(args.address_file).exists():
            pair.publish_failure(Path(args.address_file), str(exc))
        raise
    finally:
        if args.role == "decode" and args.address_file is not None:
            # The engine writes it when it ran; if it never did, prefill must stop waiting too.
            done = Path(str(args.address_file) + ".done")
            if not done.exists():
                with contextlib.suppress(OSError):
                    done.write_text("failed\n", encoding="utf-8")


def _leg(args: argparse.Namespace, loaded: LoadedMatrix, log: Callable[[str], None]) -> int:
    if args.address_artifact:
        pair.await_address_artifact(_pair_options(args), log)
    elif args.role == "decode":
        pair.await_address_file(_pair_options(args), log)
    with tempfile.TemporaryDirectory(prefix="release-hardware-") as scratch_dir:
        scratch = Path(scratch_dir)
        named = args.image or _emulated(args)  # the Python is the image's or the emulated machine's
        version = _named_version(args.python) if named else python_version(args.python)
        wheel, variant = _wheel(args, loaded, version, scratch)
        target = (args.target or scratch / "site").resolve()
        with _place(args, loaded, variant, wheel, target=target, log=log) as (where, python, notes):
            notes.insert(0, Check("wheel", "pass", _source(args, wheel)))
            if where is not None:
                found = python_version(python, where)
                if found != version:
                    msg = f"{args.image or _machine(args)}: {python} is Python {found}, not {version}"
                    raise SmokeError(msg)
            leg = Leg(
                wheel=wheel,
                python=python,
                role=args.role,
                import_name=variant.import_name,
                target=target,
                local=args.local,
                address_file=Path(args.address_file).resolve() if args.address_file else None,
                master_host=args.master_host,
                bench_mib=args.bench,
                bench_gate=args.bench_gate,
                timeout=args.timeout,
                require_device=args.require_device,
            )
            shown = f"Debian's python{version} of {_machine(args)}" if _emulated(args) else python
            log(f"hardware leg: {wheel.name}, Python {version} ({shown}), role {args.role}")
            checks = notes + run_leg(leg, log, where)
    return _report(args, _record(args, wheel.name, version, checks))
