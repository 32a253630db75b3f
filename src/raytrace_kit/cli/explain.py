"""``raytrace-kit explain``: a Ray error (on stdin, or a task's) in plain words, and the fix."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from raytrace_kit.cli.common import EXIT_FAILED, EXIT_USAGE, say, session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``explain`` to the ``raytrace-kit`` command's subcommands."""
    parser = commands.add_parser(
        "explain",
        parents=[common],
        help="say what a Ray error means and what to do",
        description="Explain a Ray error: paste its text on stdin (raytrace-kit explain < "
        "error.txt), or name a task by its id (--task). The failing call's record, "
        "traceback and Ray's account of a worker's death come from SOURCE.",
    )
    parser.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    parser.add_argument("--task", metavar="TASK_ID", help="a task id (or its first characters)")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Print the explanation; 1 when the text is not a Ray error, 2 with nothing to explain."""
    from raytrace_kit._reports.explain import explain, explain_task  # noqa: PLC0415

    if arguments.task:
        print(explain_task(arguments.task, session(arguments)))
        return 0
    if sys.stdin.isatty():
        print(
            "raytrace-kit explain: paste the error on stdin (raytrace-kit explain < error.txt), "
            "or pass --task TASK_ID",
            file=sys.stderr,
        )
        return EXIT_USAGE
    text = sys.stdin.read()
    try:
        read = session(arguments)
    except Exception as exc:  # the error is explained all the same, without a run's records
        why = str(exc)
        say(arguments, lambda: f"raytrace-kit: no run's records read ({why})")
        read = None
    explained = explain(text, read)
    print(explained)
    return 0 if explained.kind != "Not a Ray error" else EXIT_FAILED
