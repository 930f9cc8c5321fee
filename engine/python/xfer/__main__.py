"""python -m xfer {selftest,bench,version}"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xfer", description="xfer transfer engine tools")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("selftest", help="master + two engines on 127.0.0.1, verified transfers both ways")
    st.add_argument("--json", action="store_true", help="print one JSON object")
    st.add_argument("--device", action="store_true", help="also move GPU buffers (torch if importable)")
    st.add_argument("--size", type=float, default=4.0, help="MiB per transfer (default 4)")
    st.add_argument("--role", choices=("prefill", "decode"),
                    help="two roles: prefill serves a buffer, decode reads and writes it")
    st.add_argument("--master", help="HOST:PORT of an xfer-master both roles reach "
                    "(prefill without it starts its own and writes the address to --address-file)")
    st.add_argument("--address-file", help="prefill writes the master address here; decode waits for it")
    st.add_argument("--master-host", default="127.0.0.1",
                    help="prefill's own master listens here (0.0.0.0 for two machines; default 127.0.0.1)")
    st.add_argument("--wait-seconds", type=float, default=120.0,
                    help="decode: wait at most this long for --address-file (default 120)")
    st.add_argument("--serve-seconds", type=float, default=1800.0,
                    help="prefill: serve at most this long before checking what decode wrote (default 1800)")
    b = sub.add_parser("bench", help="loopback throughput beside a plain TCP socket")
    b.add_argument("--total-mib", type=int, default=1024)
    b.add_argument("--block-mib", type=int, default=4)
    b.add_argument("--json", action="store_true")
    b.add_argument("--device", action="store_true", help="GPU buffers on both sides (host buffers without a GPU)")
    sub.add_parser("version", help="print version and backend")
    args = parser.parse_args(argv)

    if args.command == "version":
        from . import _build_info

        print(f"xfer {_build_info.VERSION} (backend {_build_info.BACKEND})")
        return 0
    if args.command == "selftest":
        import faulthandler

        from ._selftest import print_report, run

        faulthandler.enable()

        if args.role:
            if not args.master and not args.address_file:
                parser.error("--role needs --master HOST:PORT or --address-file FILE")
            from . import _pair

            n = max(1, int(args.size * (1 << 20)))
            if args.role == "prefill":
                report = _pair.prefill(args.master, n, args.device, args.serve_seconds, ready=sys.stderr,
                                       address_file=args.address_file, master_host=args.master_host)
            else:
                report = _pair.decode(args.master, n, args.device, address_file=args.address_file,
                                      wait_seconds=args.wait_seconds)
            print(json.dumps(report, indent=2, sort_keys=True))
            return 0 if report["ok"] else 1
        report = run(size_mib=args.size, device=args.device)
        if args.json:
            print(json.dumps(report, indent=2, sort_keys=True))
        else:
            print_report(report)
        return 0 if report["ok"] else 1
    from ._bench import print_report as print_bench, run as run_bench

    result = run_bench(total_mib=args.total_mib, block_mib=args.block_mib, device=args.device)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print_bench(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
