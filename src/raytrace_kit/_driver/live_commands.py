"""``raytrace-kit stuck``, ``top``, ``tail``, ``report --address``: a running cluster.

Importing this module imports no Ray: the ``raytrace-kit`` command builds its parser from
it. Each command attaches as ``stuck`` and ``collect`` do (``cli._on_cluster``: the
cluster named on stderr, token authentication as Ray's own command line) and detaches.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_commands", "commands", "report"]

OnCluster = Callable[[argparse.Namespace, Callable[[], Any]], Any]
_EXIT_USAGE = 2


def add_commands(
    add: Callable[..., argparse.ArgumentParser], report: argparse.ArgumentParser
) -> None:
    """Add ``stuck``, ``top``, ``tail`` to ``raytrace-kit``, and ``--address`` to ``report``."""
    report.add_argument(
        "--address",
        help="report on a running cluster (HOST:PORT, or auto): each node tallies its own "
        "files and only the tallies travel; the same report as collect, then report",
    )
    stuck = add(
        "stuck",
        help="what every call in flight waits on, now; deadlocks named",
        description="Attach to a running cluster (through Ray: no dashboard, SSH or ptrace) "
        "and say, for every call in flight, where it is and why it is not done: what a "
        "pending call waits for, which calls a running call waits on, every deadlock.",
    )
    stuck.add_argument(
        "--address",
        default="auto",
        help="the cluster, HOST:PORT (default: auto, the one running here; with several "
        "running, it lists them and stops)",
    )
    stuck.add_argument("--json", action="store_true", help="print it as JSON")
    stuck.add_argument("--html", type=Path, help="also write it as an HTML file")
    stuck.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the nodes (30)"
    )

    top = add(
        "top",
        help="watch a running cluster live: functions, stragglers, failures, nodes",
        description="Attach to a running cluster (through Ray: one small reader per node, no "
        "dashboard, no port) and show, refreshed in place: per function the calls running, "
        "pending, done and failed with p50/p95 durations; the oldest calls in flight, "
        "stragglers, the latest failures, each node's processes and memory; events per "
        "second. q or Ctrl-C quits. Without a terminal (or with --once) it prints one "
        "snapshot.",
    )
    top.add_argument("--address", default="auto", help="the cluster, HOST:PORT (default: auto)")
    top.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (1)")
    top.add_argument("--once", action="store_true", help="print one snapshot and stop")
    top.add_argument("--json", action="store_true", help="print one snapshot as JSON")

    tail = add(
        "tail",
        help="follow every node's events as they are written",
        description="Attach to a running cluster and print each event as it is written on "
        "any node, one readable line each (JSON lines with --json), in order of time and "
        "each process's in its own order, until Ctrl-C.",
    )
    tail.add_argument("--address", default="auto", help="the cluster, HOST:PORT (default: auto)")
    tail.add_argument("--function", help="only this function (or a suffix after a dot)")
    tail.add_argument("--status", choices=["ok", "error"], help="only call.end of this status")
    tail.add_argument("--json", action="store_true", help="JSON lines as written (for jq)")


def report(
    arguments: argparse.Namespace,
    on_cluster: OnCluster,
    session: Callable[[argparse.Namespace, list[Any]], Any],
    say: Callable[[argparse.Namespace, Callable[[], str]], None],
) -> Any:
    """``report``: of ``SOURCE`` (its ``session``), or with ``--address`` of a cluster's nodes.

    The line naming ``SOURCE`` is said after the report, with its counts: the files are
    read once, not counted first (``session`` leaves the line to us unless a time window
    cuts the report short of the whole run). The report, or an exit code.
    """
    import raytrace_kit  # noqa: PLC0415

    if arguments.address is None:
        later: list[Any] = []
        made = raytrace_kit.report(
            session(arguments, later), since=arguments.since, until=arguments.until
        )
        if later:
            from raytrace_kit._reports import header  # noqa: PLC0415

            read, choice = later[0]
            say(arguments, lambda: header.session_line(read, choice, header.counted(made)))
        return made
    if arguments.source != "latest":
        print("raytrace-kit report: give SOURCE or --address, not both", file=sys.stderr)
        return _EXIT_USAGE
    return on_cluster(
        arguments,
        lambda: raytrace_kit.report(
            since=arguments.since, until=arguments.until, address=arguments.address
        ),
    )


def _top(arguments: argparse.Namespace, on_cluster: OnCluster) -> int:
    if not arguments.interval > 0:
        print("raytrace-kit top: --interval must be above 0 seconds", file=sys.stderr)
        return _EXIT_USAGE
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

    return int(on_cluster(arguments, work))


def _tail(arguments: argparse.Namespace, on_cluster: OnCluster) -> int:
    from raytrace_kit._driver import live  # noqa: PLC0415

    def work() -> int:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how tail ends
            live.tail(function=arguments.function, status=arguments.status, raw=arguments.json)
        return 0

    return int(on_cluster(arguments, work))


def commands(on_cluster: OnCluster) -> dict[str, Callable[[argparse.Namespace], int]]:
    """``top`` and ``tail``, each attached to its cluster by ``on_cluster``."""
    return {
        "top": lambda arguments: _top(arguments, on_cluster),
        "tail": lambda arguments: _tail(arguments, on_cluster),
    }
