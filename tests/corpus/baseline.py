"""Measure today's `release verify` and `auditwheel show` on the real-world corpus.

    python3 tests/corpus/baseline.py [--cache DIR] [--only PROJECT ...] [--json OUT] [--markdown OUT]

For each wheel of tests/corpus/wheels.toml (fetched by tests/corpus/fetch.py) this records the
unpacked size, the ELF files (how many, how many keep a .symtab, how many carry .debug_* sections),
the vendored libraries (files under an auditwheel `<name>.libs/` directory), then runs

    python3 -m release --matrix <none> verify --json WHEEL
    auditwheel show WHEEL

each under /usr/bin/time -v (wall seconds, peak RSS) and a timeout. verify runs without a matrix,
the way it runs on any wheel that is not one of ours. Stripping is judged with `readelf -S` on an
extracted copy in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch import cache_dir, load_manifest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 900


def _timed(command: list[str], *, cwd: Path, timeout: int = TIMEOUT) -> dict[str, object]:
    """Run under /usr/bin/time -v; return rc, wall seconds, peak RSS (KiB), stdout, stderr tail."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
        started = time.monotonic()
        try:
            proc = subprocess.run(
                ["/usr/bin/time", "-v", "-o", stats.name, *command],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            rc: int | str = proc.returncode
            stdout, stderr = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = "timeout"
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        wall = time.monotonic() - started
        text = Path(stats.name).read_text()
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return {
        "rc": rc,
        "seconds": round(wall, 2),
        "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None,
        "stdout": stdout,
        "stderr_tail": stderr.strip().splitlines()[-12:],
    }


def _sections(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=False)
    return re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", out.stdout, flags=re.MULTILINE)


def _needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", "-W", str(path)], capture_output=True, text=True, check=False)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def inspect_contents(wheel: Path) -> dict[str, object]:
    """Unpacked size, ELF files, stripping and vendored libraries of one wheel."""
    with zipfile.ZipFile(wheel) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        unpacked = sum(i.file_size for i in infos)
        methods = sorted({i.compress_type for i in infos})
        with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
            elf: list[dict[str, object]] = []
            for info in infos:
                with zf.open(info) as fh:
                    if fh.read(4) != b"\x7fELF":
                        continue
                target = Path(tmp) / "x.elf"
                with zf.open(info) as src, target.open("wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                names = _sections(target)
                debug = [n for n in names if n.startswith((".debug_", ".zdebug_"))]
                elf.append(
                    {
                        "path": info.filename,
                        "size": info.file_size,
                        "symtab": ".symtab" in names,
                        "debug_sections": len(debug),
                        "needed": _needed(target),
                    }
                )
                target.unlink()
    vendored = [e["path"] for e in elf if re.search(r"^[^/]+\.libs/", str(e["path"]))]
    return {
        "members": len(infos),
        "unpacked": unpacked,
        "compress_types": methods,
        "elf_count": len(elf),
        "elf_with_symtab": sum(1 for e in elf if e["symtab"]),
        "elf_with_debug": sum(1 for e in elf if e["debug_sections"]),
        "largest_elf": max((e["size"] for e in elf), default=0),
        "vendored": vendored,
        "elf": elf,
    }


def run_verify(wheel: Path) -> dict[str, object]:
    result = _timed(
        [sys.executable, "-m", "release", "--matrix", "/nonexistent/matrix.yaml", "verify", "--json",
         str(wheel)],
        cwd=ROOT,
    )
    report = None
    stdout = str(result.pop("stdout"))
    if stdout.strip():
        try:
            report = json.loads(stdout)
        except ValueError:
            report = None
    result["rules"] = (
        {r["id"]: {"status": r["status"], "message": r["message"]} for r in report["rules"]}
        if report
        else None
    )
    result["elf_files_read"] = len(report["elf_files"]) if report else None
    result["traceback"] = any("Traceback" in line for line in result["stderr_tail"])  # type: ignore[union-attr]
    return result


def _consistent_tag(summary: str) -> str | None:
    tag = re.search(r'is consistent with the following platform\s+tag:\s*"([^"]+)"', summary)
    return tag.group(1) if tag else None


def run_auditwheel(wheel: Path) -> dict[str, object]:
    result = _timed(["auditwheel", "show", str(wheel)], cwd=ROOT)
    stdout = str(result.pop("stdout"))
    result["summary"] = " ".join(stdout.split())[:400]
    result["consistent_tag"] = _consistent_tag(str(result["summary"]))
    return result


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def _verify_outcome(v: dict[str, object]) -> str:
    rules = v.get("rules")
    if v["rc"] == "timeout":
        return "timeout"
    if v.get("traceback"):
        return "traceback: " + str((v["stderr_tail"] or [""])[-1])[:120]  # type: ignore[index]
    if isinstance(rules, dict):
        failed = [k for k, r in rules.items() if r["status"] == "fail"]
        warned = [k for k, r in rules.items() if r["status"] == "warn"]
        text = "report; fail: " + (", ".join(failed) or "none")
        return text + (f"; warn: {', '.join(warned)}" if warned else "")
    tail = v.get("stderr_tail") or [""]
    return "error: " + str(tail[-1]).removeprefix("error: ")[:200]  # type: ignore[index]


def render(results: list[dict[str, object]]) -> str:
    """The Markdown baseline from the JSON this script writes."""
    lines = [
        "# Real-world corpus: today's `release verify` and `auditwheel show`",
        "",
        "Generated by `python3 tests/corpus/baseline.py` then `--render` (wheels:",
        "`tests/corpus/wheels.toml`, fetched by `tests/corpus/fetch.py`). verify ran as",
        "`python3 -m release --matrix <none> verify --json",
        "WHEEL` (no matrix: the rules that need one say n/a), both tools under `/usr/bin/time -v`.",
        "ELF facts come from `readelf -S/-d` on each ELF member extracted to a temporary file.",
        "",
        "| wheel | MB zipped | MB unpacked | members | ELF files | ELF with .symtab | ELF with .debug_* "
        "| vendored (`*.libs/`) | largest ELF MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in results:
        c = e["contents"]
        assert isinstance(c, dict)
        lines.append(
            f"| {e['project']} {e['version']} | {_mb(e['size'])} | {_mb(c['unpacked'])} | {c['members']} | "  # type: ignore[arg-type]
            f"{c['elf_count']} | {c['elf_with_symtab']} | {c['elf_with_debug']} | {len(c['vendored'])} | "
            f"{_mb(c['largest_elf'])} |"
        )
    lines += [
        "",
        "| wheel | verify outcome | verify s | verify peak RSS MB | auditwheel show s "
        "| auditwheel peak RSS MB "
        "| auditwheel says |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for e in results:
        v, a = e["verify"], e["auditwheel"]
        assert isinstance(v, dict) and isinstance(a, dict)
        tag = _consistent_tag(str(a.get("summary") or ""))
        said = f"consistent with {tag}" if tag else str(a.get("summary") or "")[:100]
        if a["rc"] != 0:
            said = f"rc {a['rc']}: {' '.join(a['stderr_tail'][-1:])[:200]}"
        lines.append(
            f"| {e['project']} | {_verify_outcome(v)} | {v['seconds']} | {v['peak_rss_mb']} | "
            f"{a['seconds']} | "
            f"{a['peak_rss_mb']} | {said} |"
        )
    rule_ids: list[str] = []
    for e in results:
        rules = e["verify"].get("rules") or {}  # type: ignore[union-attr]
        rule_ids += [r for r in rules if r not in rule_ids]
    if rule_ids:
        lines += ["", "Per-rule status (verify without a matrix):", ""]
        lines.append("| wheel | " + " | ".join(rule_ids) + " |")
        lines.append("|---|" + "---|" * len(rule_ids))
        for e in results:
            rules = e["verify"].get("rules")  # type: ignore[union-attr]
            cells = [rules.get(r, {}).get("status", "-") if rules else "(no report)" for r in rule_ids]
            lines.append(f"| {e['project']} | " + " | ".join(cells) + " |")
        lines += ["", "Findings (failed rules, message as verify printed it, cut at 400 characters):", ""]
        for e in results:
            rules = e["verify"].get("rules") or {}  # type: ignore[union-attr]
            for rid, r in rules.items():
                if r["status"] in ("fail", "warn"):
                    lines.append(f"- {e['project']} `{rid}` {r['status']}: {r['message'][:400]}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache")
    parser.add_argument("--only", nargs="*", default=())
    parser.add_argument("--json", default=str(Path(tempfile.gettempdir()) / "corpus-baseline.json"))
    parser.add_argument("--render", metavar="MARKDOWN", help="only render the JSON (--json) into this file")
    args = parser.parse_args()
    if args.render:
        Path(args.render).write_text(render(json.loads(Path(args.json).read_text())))
        return 0
    cache = cache_dir(args.cache)
    results = []
    for wheel in load_manifest():
        if args.only and not {wheel.project, wheel.name} & set(args.only):
            continue
        path = cache / wheel.filename
        if not path.is_file():
            print(f"skip {wheel.filename}: not cached (run tests/corpus/fetch.py)", file=sys.stderr)
            continue
        print(f"== {wheel.filename}", file=sys.stderr, flush=True)
        entry: dict[str, object] = {"project": wheel.name, "version": wheel.version,
                                    "filename": wheel.filename, "size": wheel.size}
        entry["contents"] = inspect_contents(path)
        entry["verify"] = run_verify(path)
        entry["auditwheel"] = run_auditwheel(path)
        results.append(entry)
        Path(args.json).write_text(json.dumps(results, indent=1))
        v = entry["verify"]
        a = entry["auditwheel"]
        print(f"   verify rc={v['rc']} {v['seconds']}s {v['peak_rss_mb']}MB; "  # type: ignore[index]
              f"auditwheel rc={a['rc']} {a['seconds']}s {a['peak_rss_mb']}MB", file=sys.stderr, flush=True)  # type: ignore[index]
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
