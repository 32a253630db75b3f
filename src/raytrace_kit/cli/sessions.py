"""``raytrace-kit sessions``: the Ray sessions on this machine that hold kit records."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import EXIT_EMPTY, say

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``sessions`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "sessions", parents=[common], help="the sessions on this machine that hold kit records"
    )
    parser.add_argument("--json", action="store_true", help="print them as JSON")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the sessions table (or its JSON); 3 when there is none."""
    from raytrace_kit._reports.reading import sessions, sessions_line  # noqa: PLC0415

    listing = sessions()
    say(arguments, lambda: sessions_line(listing))
    if arguments.json:
        print(json.dumps([summary.to_dict() for summary in listing], indent=1))
    elif listing:
        print(listing)
    return 0 if listing else EXIT_EMPTY
