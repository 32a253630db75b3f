"""``raytrace-kit tail``: every node's events of a running cluster, as they are written."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import on_cluster

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``tail`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "tail",
        parents=[common],
        help="follow every node's events as they are written",
        description="Attach to a running cluster and print each event as it is written on "
        "any node, one readable line each (JSON lines with --json), in order of time and "
        "each process's in its own order, until Ctrl-C.",
    )
    parser.add_argument("--address", default="auto", help="the cluster, HOST:PORT (default: auto)")
    parser.add_argument("--function", help="only this function (or a suffix after a dot)")
    parser.add_argument("--status", choices=["ok", "error"], help="only call.end of this status")
    parser.add_argument("--json", action="store_true", help="JSON lines as written (for jq)")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the events as they are written, until Ctrl-C."""
    from raytrace_kit._driver import live  # noqa: PLC0415

    def work() -> int:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how tail ends
            live.tail(function=arguments.function, status=arguments.status, raw=arguments.json)
        return 0

    return on_cluster(arguments, work)
