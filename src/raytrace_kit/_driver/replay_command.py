"""``raytrace-kit replay``: its options, and the failed call run again in a new process.

Importing this module imports no Ray: the ``raytrace-kit`` command builds its parser from it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["add_command", "run"]

_EXIT_FAILED = 1


def add_command(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``replay`` to the ``raytrace-kit`` command's subcommands."""
    replay = add(
        "replay",
        help="run a failed call again here, in local mode (with --capture failures)",
        description="Run a failed call again in a new process, in local mode, with the "
        "run's code (its working directory and import path) and the arguments it kept "
        "(raytrace-kit run --capture failures, or @debuggable(capture='failures')): the "
        "same exception from the same line, its traceback printed, exit code 1. The "
        "replay file is unpickled only if it is yours and private (mode 0600): "
        "unpickling runs code.",
    )
    replay.add_argument("call", metavar="CALL_OR_TASK_ID", help="a call id or task id (a prefix)")
    replay.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    replay.add_argument("--pdb", action="store_true", help="stop in pdb at the failing line")


def run(arguments: argparse.Namespace, session_of: Callable[[argparse.Namespace], Any]) -> int:
    """The replay's exit code: the new process's (1 when the call fails again), or 1."""
    from raytrace_kit._driver import replay  # noqa: PLC0415 -- not for --help
    from raytrace_kit.exceptions import ReplayError, UnsafeReplayFileError  # noqa: PLC0415

    session = session_of(arguments)
    try:
        call = replay.find_call(arguments.call, session)
        return replay.run_in_child(call, pdb=arguments.pdb)
    except (ReplayError, UnsafeReplayFileError) as exc:
        print(f"raytrace-kit replay: {exc}", file=sys.stderr)
        return _EXIT_FAILED
