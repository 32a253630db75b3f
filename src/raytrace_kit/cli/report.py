"""``raytrace-kit report``: of a run's files, or with ``--address`` of a running cluster's."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit.cli.common import EXIT_EMPTY, EXIT_USAGE, CommandExit, on_cluster, say, session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``report`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "report", parents=[common], help="what failed, what died, where time went"
    )
    parser.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    parser.add_argument(
        "--html", type=Path, help="write it as one HTML file (and print its path, not the text)"
    )
    parser.add_argument("--json", action="store_true", help="print it as JSON")
    parser.add_argument("--since", help="only calls started at or after this ISO 8601 time")
    parser.add_argument("--until", help="only calls started before this ISO 8601 time")
    parser.add_argument(
        "--address",
        help="report on a running cluster (HOST:PORT, or auto): each node tallies its own "
        "files and only the tallies travel; the same report as collect, then report",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the report (or its JSON, or write its HTML); 3 when it holds no calls."""
    made = _made(arguments)
    if arguments.html is not None:
        made.save_html(arguments.html)
        print(json.dumps(made.to_dict(), indent=1) if arguments.json else arguments.html)
    else:
        print(json.dumps(made.to_dict(), indent=1) if arguments.json else str(made))
    return 0 if made.overview["calls"] else EXIT_EMPTY


def _made(arguments: argparse.Namespace) -> Any:
    """The report of ``SOURCE``, or with ``--address`` of a cluster's nodes.

    The line naming ``SOURCE`` is said after the report, with its counts: the files are
    read once, not counted first (:func:`session` leaves the line to us unless a time
    window cuts the report short of the whole run).
    """
    from raytrace_kit._driver.cluster_report import report  # noqa: PLC0415 -- not for --help

    if arguments.address is None:
        later: list[Any] = []
        made = report(session(arguments, later), since=arguments.since, until=arguments.until)
        if later:
            from raytrace_kit._reports.reading import counted, session_line  # noqa: PLC0415

            read, choice = later[0]
            say(arguments, lambda: session_line(read, choice, counted(made)))
        return made
    if arguments.source != "latest":
        raise CommandExit(EXIT_USAGE, "raytrace-kit report: give SOURCE or --address, not both")
    return on_cluster(
        arguments,
        lambda: report(since=arguments.since, until=arguments.until, address=arguments.address),
    )
