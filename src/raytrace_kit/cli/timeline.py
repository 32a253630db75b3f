"""``raytrace-kit timeline``: a run's calls as a Perfetto / Chrome trace file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``timeline`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "timeline", parents=[common], help="write a Perfetto / Chrome trace file"
    )
    parser.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    parser.add_argument("-o", "--output", type=Path, help="the file (default: in SOURCE)")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Write the trace file and print its path."""
    from raytrace_kit._reports.timeline import timeline  # noqa: PLC0415 -- not for --help

    print(timeline(session(arguments), arguments.output))
    return 0
