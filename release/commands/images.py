"""`release images probe`: read each serving image's facts from the image and hold the matrix's
declarations against them.

    release images probe                 probe the images here (pulled or local); others are
                                         checked against their recorded facts
    release images probe --pull          pull registry images first (bounded by --pull-timeout)
    release images probe --write         record the probed registry images' facts, keyed by digest,
                                         in images.facts.json beside the matrix
    release images probe --require       also fail when a pinned image has no facts for its digest
    release images probe --changed-since REV
                                         nothing to do unless matrix.yaml or the facts file
                                         changed since REV (a pull request's base)

Exit 1 on any disagreement; each names the matrix line, what the image has and the edit to make.
"""

from __future__ import annotations

import argparse

from release import table
from release.config.facts import FACTS_FILE, facts_path, load_facts, save_facts
from release.config.matrix import LoadedMatrix
from release.config.names import seconds
from release.errors import UsageError
from release.machine.containers import ContainerEngine
from release.smoke.probe import changed_since, probe_matrix


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["probe"], help="probe: read the images' facts and compare")
    parser.add_argument(
        "--image", action="append", default=[], metavar="NAME", help="only this image (repeatable)"
    )
    parser.add_argument("--pull", action="store_true", help="pull registry images this engine does not hold")
    parser.add_argument(
        "--pull-timeout",
        type=seconds,
        default=1800.0,
        metavar="SECONDS",
        help="per pull (default: %(default)s)",
    )
    parser.add_argument("--write", action="store_true", help=f"record probed registry images in {FACTS_FILE}")
    parser.add_argument(
        "--require", action="store_true", help="fail when a pinned registry image has no facts for its digest"
    )
    parser.add_argument(
        "--changed-since",
        metavar="REV",
        help="do nothing unless matrix.yaml or the facts file changed since REV ('' : always probe)",
    )


def _nothing_to_probe(args: argparse.Namespace, loaded: LoadedMatrix) -> bool:
    unknown = [n for n in args.image if n not in loaded.matrix.images]
    if unknown:
        known = ", ".join(loaded.matrix.images)
        msg = f"--image {unknown[0]}: {loaded.path.name} declares no such image ({known})"
        raise UsageError(msg)
    if not args.changed_since:
        return False
    changed = changed_since(loaded, args.changed_since)
    if not changed:
        files = f"{loaded.path.name} nor {FACTS_FILE}"
        print(f"images probe: neither {files} changed since {args.changed_since}: nothing to probe")
        return True
    print(f"images probe: {', '.join(changed)} changed since {args.changed_since}")
    return False


def run(args: argparse.Namespace, loaded: LoadedMatrix) -> int:
    if _nothing_to_probe(args, loaded):
        return 0
    path = facts_path(loaded.path)
    recorded = load_facts(path)
    result = probe_matrix(
        loaded,
        ContainerEngine.answering(),
        recorded,
        names=args.image or None,
        pull=args.pull,
        pull_timeout=args.pull_timeout,
        log=print,
    )
    print(
        table.render(
            ("image", "fact", "declared", "image has", "from", "status"),
            result.rows,
            title="Serving images: declared vs what they hold",
        )
    )
    if args.write and result.probed:
        merged = {**recorded, **result.probed}
        save_facts(path, merged)
        print(f"recorded the facts of {', '.join(sorted(result.probed))} in {path}")
    elif args.write:
        print(f"{FACTS_FILE}: nothing probed from a registry image, nothing recorded")
    result.require_agreement(path.name, require_facts=args.require)
    print("images probe: every fact the matrix declares agrees with its image")
    return 0
