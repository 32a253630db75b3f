"""``raytrace-kit replay``: a failed call run again in a new process, and its exit code."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import EXIT_FAILED, session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``replay`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "replay",
        parents=[common],
        help="run a failed call again here, in local mode (with --capture failures)",
        description="Run a failed call again in a new process, in local mode, with the "
        "run's code (its working directory and import path) and the arguments it kept "
        "(raytrace-kit run --capture failures, or @debuggable(capture='failures')): the "
        "same exception from the same line, its traceback printed, exit code 1. The "
        "replay file is unpickled only if it is yours and private (mode 0600): "
        "unpickling runs code.",
    )
    parser.add_argument("call", metavar="CALL_OR_TASK_ID", help="a call id or task id (a prefix)")
    parser.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    parser.add_argument("--pdb", action="store_true", help="stop in pdb at the failing line")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """The replay's exit code: the new process's (1 when the call fails again), or 1."""
    from raytrace_kit._driver import replay  # noqa: PLC0415 -- not for --help
    from raytrace_kit.exceptions import ReplayError, UnsafeReplayFileError  # noqa: PLC0415

    read = session(arguments)
    try:
        call = replay.find_call(arguments.call, read)
        return replay.run_in_child(call, pdb=arguments.pdb)
    except (ReplayError, UnsafeReplayFileError) as exc:
        print(f"raytrace-kit replay: {exc}", file=sys.stderr)
        return EXIT_FAILED
