"""The ``txlake`` command line (skeleton: the full CLI comes with its own issue)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from txlake import __version__
from txlake.bench import WORKLOADS
from txlake.cli import demo


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txlake", description="Multi-table ACID transactions over Delta Lake.")
    parser.add_argument("--version", action="version", version=f"txlake {__version__}")
    parser.add_argument("--debug", action="store_true", help="show stack traces on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo_parser = sub.add_parser("demo", help="concurrent bank transfers on a local lakehouse (the main job)")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(run=demo.run)
    bench = sub.add_parser("bench", help="run a benchmark workload (writes JSON + PNG)")
    bench_sub = bench.add_subparsers(dest="workload", metavar="WORKLOAD", required=True)
    for name, workload in sorted(WORKLOADS.items()):
        wp = bench_sub.add_parser(name, help=workload.help)
        wp.add_argument("--out", default="bench-results", help="directory for the JSON and PNG results")
        workload.add_arguments(wp)
        wp.set_defaults(run=workload.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        result: int = args.run(args)
        return result
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
