"""The ``raytrace-kit`` command (also ``python -m raytrace_kit``): run a program, read runs.

Subcommands:
    run [OPTIONS] [--] SCRIPT|-m MODULE [ARGS]
                        run a program with every remote of its code instrumented
    report [SOURCE]     what failed and where, what died, where time and memory went
    events [SOURCE]     the events, one readable line each (or JSON lines with --json)
    timeline [SOURCE]   write a Chrome trace / Perfetto file of the calls
    explain [SOURCE]    what a Ray error (on stdin, or --task ID) means, and what to do
    collect             copy every node's files from a running cluster to here
    stuck               what every call in flight waits on, now; deadlocks named
    top, tail           a running cluster live; its events as they are written
    memory              the object store's use, and the lines whose refs hold it, now
    export otlp|otlp-json [SOURCE]
                        send the calls as OpenTelemetry spans to an endpoint, or a file
    sessions            the Ray sessions on this machine that hold kit records
    profile [SOURCE]    the sampling profiler's samples: speedscope, folded stacks, pprof
    replay ID [SOURCE]  run a failed call again here (kept by run --capture failures)

``SOURCE`` is what :func:`raytrace_kit.open_session` takes; it defaults to the newest Ray
session on this machine that has kit records and belongs to this user. Each command first
says which session, folder or cluster it read, in one line on stderr (``--quiet`` hides
it): stdout stays the command's data, for ``--json`` and pipes. Exit codes: 0 done, 1
failed (the message says why), 2 bad usage (and ``collect``/``stuck --address auto`` with
several clusters running), 3 nothing to read (no such source, or no events in it).

Each verb is a module of this package with the same two functions: ``add(commands,
common)`` adds its parser to ``commands`` (with ``common``, the ``-q/--quiet`` parent, as
its parent if it reads a run) and sets ``handler=run`` on it; ``run(arguments) -> int``
does the verb and returns its exit code. What the verbs share is in :mod:`.common`.
Importing the package imports no Ray: a verb imports what it reads or runs when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from raytrace_kit.cli import (
    collect,
    events,
    explain,
    export,
    memory,
    profile,
    replay,
    report,
    run,
    sessions,
    stuck,
    tail,
    timeline,
    top,
)
from raytrace_kit.cli.common import (
    EXIT_EMPTY,
    EXIT_FAILED,
    EXIT_USAGE,
    CommandExit,
    NoEventsError,
    quiet_parent,
)

__all__ = ["main"]

# In the order --help lists them.
VERBS = (
    run,
    report,
    events,
    timeline,
    explain,
    collect,
    stuck,
    top,
    tail,
    memory,
    export,
    profile,
    replay,
    sessions,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raytrace-kit",
        description="Run a Ray program instrumented (run), and read what raytrace_kit recorded.",
        epilog="SOURCE: a Ray session dir, a raytrace_kit log dir, a collected dir, an event "
        "file, or 'latest' (the default: the newest Ray session on this machine that has "
        "kit records and is yours; `raytrace-kit sessions` lists them).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = quiet_parent()
    for verb in VERBS:
        verb.add(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    given = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if given[:1] == ["run"]:  # the program and its arguments are never parsed by us
        given, rest = run.split_argv(given)
    arguments = _parser().parse_args(given)
    handler: Callable[[argparse.Namespace], int] = arguments.handler  # the verb's run()
    if arguments.command == "run":  # what the program raises is the program's own
        arguments.program = [*arguments.program, *rest]
        return handler(arguments)
    return _outcome(handler, arguments)


def _outcome(handler: Callable[[argparse.Namespace], int], arguments: argparse.Namespace) -> int:
    """The verb's exit code: what stops it that the user can act on is said on stderr."""
    from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError  # noqa: PLC0415

    try:
        return handler(arguments)
    except CommandExit as exc:  # the verb said why it stops
        print(exc, file=sys.stderr)
        return exc.code
    except (EventsNotFoundError, NoEventsError) as exc:
        print(f"raytrace-kit: {exc}", file=sys.stderr)
        return EXIT_EMPTY
    except InvalidValueError as exc:  # a bad --since, an ambiguous --task: the user's input
        print(f"raytrace-kit {arguments.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # piped into head: the reader is done; quiet at exit too
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- replaces the closed pipe
        return 0
    except (ValueError, OSError) as exc:
        print(f"raytrace-kit {arguments.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
