"""``raytrace-kit events``: a run's events, one readable line each (or JSON lines)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``events`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser("events", parents=[common], help="print the events, one line each")
    parser.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    parser.add_argument("--function", help="only this function (or a suffix after a dot)")
    parser.add_argument(
        "--status",
        choices=["ok", "error", "interrupted"],
        help="only call.end of this status; interrupted: the call.start of calls with no end",
    )
    parser.add_argument("--event", help="only events of this name, e.g. call.end")
    parser.add_argument("--since", help="only events at or after this ISO 8601 time")
    parser.add_argument("--until", help="only events before this ISO 8601 time")
    parser.add_argument("--json", action="store_true", help="JSON lines (for jq)")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the events asked for, one line each."""
    from raytrace_kit._output.lines import readable  # noqa: PLC0415

    found = session(arguments).events(
        event=arguments.event,
        function=arguments.function,
        status=arguments.status,
        since=arguments.since,
        until=arguments.until,
    )
    out = sys.stdout
    for event in found:
        out.write((json.dumps(event) if arguments.json else readable(event)) + "\n")
    return 0
