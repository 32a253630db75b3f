"""``raytrace-kit top``: a running cluster live, refreshed in place (or one snapshot)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import EXIT_USAGE, on_cluster

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``top`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "top",
        parents=[common],
        help="watch a running cluster live: functions, stragglers, failures, nodes",
        description="Attach to a running cluster (through Ray: one small reader per node, no "
        "dashboard, no port) and show, refreshed in place: per function the calls running, "
        "pending, done and failed with p50/p95 durations; the oldest calls in flight, "
        "stragglers, the latest failures, each node's processes and memory; events per "
        "second; in a sampled run (--sample), the hottest lines so far. q or Ctrl-C quits. "
        "Without a terminal (or with --once) it prints one snapshot.",
    )
    parser.add_argument("--address", default="auto", help="the cluster, HOST:PORT (default: auto)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (1)")
    parser.add_argument("--once", action="store_true", help="print one snapshot and stop")
    parser.add_argument("--json", action="store_true", help="print one snapshot as JSON")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Show the view until q or Ctrl-C (or print one snapshot); 2 for a bad ``--interval``."""
    if not arguments.interval > 0:
        print("raytrace-kit top: --interval must be above 0 seconds", file=sys.stderr)
        return EXIT_USAGE
    from raytrace_kit._driver import live  # noqa: PLC0415

    def work() -> int:
        watch = None
        try:
            watch = live.Watch()
            if arguments.json or arguments.once or not sys.stdout.isatty():
                view = watch.refresh()
                print(live.dumps(view) if arguments.json else str(view))
            else:
                live.terminal(watch, arguments.interval, None)
        except KeyboardInterrupt:  # Ctrl-C before the view was up: the way out too
            pass
        finally:
            if watch is not None:
                watch.close()
        return 0

    return on_cluster(arguments, work)
