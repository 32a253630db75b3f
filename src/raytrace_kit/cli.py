"""The ``raytrace-kit`` command (also ``python -m raytrace_kit``): read runs from a shell.

Subcommands:
    report [SOURCE]     what failed and where, what died, where time and memory went
    events [SOURCE]     the events, one readable line each (or JSON lines with --json)
    timeline [SOURCE]   write a Chrome trace / Perfetto file of the calls
    explain [SOURCE]    what a Ray error (on stdin, or --task ID) means, and what to do
    collect             copy every node's files from a running cluster to here

``SOURCE`` is what :func:`raytrace_kit.open_session` takes; it defaults to the latest Ray
session on this machine. Exit codes: 0 done, 1 failed (the message says why), 2 bad usage,
3 nothing to read (no such source, or no events in it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

EXIT_FAILED, EXIT_USAGE, EXIT_EMPTY = 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raytrace-kit",
        description="Read what raytrace_kit recorded of a Ray run.",
        epilog="SOURCE: a Ray session dir, a raytrace_kit log dir, a collected dir, an event "
        "file, or 'latest' (the default: the newest Ray session on this machine).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    report = commands.add_parser("report", help="what failed, what died, where time went")
    report.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    report.add_argument(
        "--html", type=Path, help="write it as one HTML file (and print its path, not the text)"
    )
    report.add_argument("--json", action="store_true", help="print it as JSON")
    report.add_argument("--since", help="only calls started at or after this ISO 8601 time")
    report.add_argument("--until", help="only calls started before this ISO 8601 time")

    events = commands.add_parser("events", help="print the events, one line each")
    events.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    events.add_argument("--function", help="only this function (or a suffix after a dot)")
    events.add_argument(
        "--status",
        choices=["ok", "error", "interrupted"],
        help="only call.end of this status; interrupted: the call.start of calls with no end",
    )
    events.add_argument("--event", help="only events of this name, e.g. call.end")
    events.add_argument("--since", help="only events at or after this ISO 8601 time")
    events.add_argument("--until", help="only events before this ISO 8601 time")
    events.add_argument("--json", action="store_true", help="JSON lines (for jq)")

    timeline = commands.add_parser("timeline", help="write a Perfetto / Chrome trace file")
    timeline.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    timeline.add_argument("-o", "--output", type=Path, help="the file (default: in SOURCE)")

    explain = commands.add_parser(
        "explain",
        help="say what a Ray error means and what to do",
        description="Explain a Ray error: paste its text on stdin (raytrace-kit explain < "
        "error.txt), or name a task by its id (--task). The failing call's record, "
        "traceback and Ray's account of a worker's death come from SOURCE.",
    )
    explain.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    explain.add_argument("--task", metavar="TASK_ID", help="a task id (or its first characters)")

    collect = commands.add_parser("collect", help="copy every node's files to here")
    collect.add_argument("--address", default="auto", help="the cluster (default: auto)")
    collect.add_argument("-o", "--output", type=Path, help="destination directory")
    collect.add_argument("--no-profiles", action="store_true", help="leave profile captures")
    return parser


class _NoEventsError(Exception):
    """The source exists and holds no event files (exit code 3)."""


def _session(source: str) -> Any:
    """The session of ``source``, which must hold event files.

    Raises:
        _NoEventsError: It holds none.
    """
    import raytrace_kit  # noqa: PLC0415 -- imports Ray: not for --help

    session = raytrace_kit.open_session(source)
    if not session.files:
        msg = f"no event files in {session.root}"
        raise _NoEventsError(msg)
    return session


def _events(arguments: argparse.Namespace) -> int:
    from raytrace_kit._output.lines import readable  # noqa: PLC0415

    session = _session(arguments.source)
    found = session.events(
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


def _report(arguments: argparse.Namespace) -> int:
    import raytrace_kit  # noqa: PLC0415

    made = raytrace_kit.report(
        _session(arguments.source), since=arguments.since, until=arguments.until
    )
    if arguments.html is not None:
        made.save_html(arguments.html)
        print(json.dumps(made.to_dict(), indent=1) if arguments.json else arguments.html)
    else:
        print(json.dumps(made.to_dict(), indent=1) if arguments.json else str(made))
    return 0 if made.overview["calls"] else EXIT_EMPTY


def _timeline(arguments: argparse.Namespace) -> int:
    import raytrace_kit  # noqa: PLC0415

    path = raytrace_kit.timeline(_session(arguments.source), arguments.output)
    print(path)
    return 0


def _explain(arguments: argparse.Namespace) -> int:
    from raytrace_kit._reports.explain import explain, explain_task  # noqa: PLC0415

    if arguments.task:
        print(explain_task(arguments.task, _session(arguments.source)))
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
        session = _session(arguments.source)
    except Exception:
        session = None
    explained = explain(text, session)
    print(explained)
    return 0 if explained.kind != "Not a Ray error" else EXIT_FAILED


def _collect(arguments: argparse.Namespace) -> int:
    import ray  # noqa: PLC0415

    import raytrace_kit  # noqa: PLC0415

    try:
        ray.init(address=arguments.address, log_to_driver=False, logging_level="ERROR")
    except ConnectionError as exc:
        print(
            f"raytrace-kit collect: no Ray cluster at {arguments.address}: {exc}", file=sys.stderr
        )
        return EXIT_FAILED
    try:
        dest = raytrace_kit.collect(arguments.output, profiles=not arguments.no_profiles)
    finally:
        ray.shutdown()
    nodes = json.loads((dest / "collect.json").read_text())["nodes"]
    for record in nodes.values():
        copied = record.get("bytes_copied")
        detail = f"{copied:,} bytes copied" if copied is not None else record.get("error", "")
        print(f"node {record['node_id'][:12]}: {record['status']} {detail}".rstrip())
    print(dest)
    return 0


_COMMANDS = {
    "report": _report,
    "events": _events,
    "timeline": _timeline,
    "explain": _explain,
    "collect": _collect,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    arguments = _parser().parse_args(argv)
    from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError  # noqa: PLC0415

    try:
        return _COMMANDS[arguments.command](arguments)
    except (EventsNotFoundError, _NoEventsError) as exc:
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


if __name__ == "__main__":
    sys.exit(main())
