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
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from raytrace_kit._driver import launch, live_commands, memory_command, replay_command
from raytrace_kit._reports import profile_command
from raytrace_kit._reports.otel import command as otel_command
from raytrace_kit.exceptions import ClusterConnectionError

__all__ = ["main"]

EXIT_FAILED, EXIT_USAGE, EXIT_EMPTY = 1, 2, 3
_T = TypeVar("_T")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raytrace-kit",
        description="Run a Ray program instrumented (run), and read what raytrace_kit recorded.",
        epilog="SOURCE: a Ray session dir, a raytrace_kit log dir, a collected dir, an event "
        "file, or 'latest' (the default: the newest Ray session on this machine that has "
        "kit records and is yours; `raytrace-kit sessions` lists them).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    launch.add_command(commands)
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "-q", "--quiet", action="store_true", help="do not say which run was read (on stderr)"
    )
    add = functools.partial(commands.add_parser, parents=[quiet])

    report = add("report", help="what failed, what died, where time went")
    report.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    report.add_argument(
        "--html", type=Path, help="write it as one HTML file (and print its path, not the text)"
    )
    report.add_argument("--json", action="store_true", help="print it as JSON")
    report.add_argument("--since", help="only calls started at or after this ISO 8601 time")
    report.add_argument("--until", help="only calls started before this ISO 8601 time")

    events = add("events", help="print the events, one line each")
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

    timeline = add("timeline", help="write a Perfetto / Chrome trace file")
    timeline.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    timeline.add_argument("-o", "--output", type=Path, help="the file (default: in SOURCE)")

    explain = add(
        "explain",
        help="say what a Ray error means and what to do",
        description="Explain a Ray error: paste its text on stdin (raytrace-kit explain < "
        "error.txt), or name a task by its id (--task). The failing call's record, "
        "traceback and Ray's account of a worker's death come from SOURCE.",
    )
    explain.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    explain.add_argument("--task", metavar="TASK_ID", help="a task id (or its first characters)")

    collect = add("collect", help="copy every node's files to here")
    collect.add_argument(
        "--address",
        default="auto",
        help="the cluster, HOST:PORT (default: auto, the one running here; with several "
        "running, collect lists them and stops)",
    )
    collect.add_argument("-o", "--output", type=Path, help="destination directory")
    collect.add_argument("--no-profiles", action="store_true", help="leave profile captures")

    live_commands.add_commands(add, report)
    memory_command.add_command(add)
    otel_command.add_command(commands, [quiet])
    profile_command.add_command(commands, [quiet])

    replay_command.add_command(add)
    listed = add("sessions", help="the sessions on this machine that hold kit records")
    listed.add_argument("--json", action="store_true", help="print them as JSON")
    return parser


class _NoEventsError(Exception):
    """The source exists and holds no event files (exit code 3)."""


def _say(arguments: argparse.Namespace, line: Callable[[], str]) -> None:
    """Say which run is read, on stderr: stdout stays the command's data (``--json``, pipes).

    ``line`` makes the line (it counts calls): with ``--quiet`` it is never made. The line
    never fails the command: files it cannot read (a foreign timestamp) make a shorter one.
    """
    if arguments.quiet:
        return
    try:
        said = line()
    except (ValueError, OSError, KeyError, TypeError) as exc:
        said = f"raytrace-kit: (cannot say which run: {type(exc).__name__}: {exc})"
    print(said, file=sys.stderr, flush=True)


def _session(
    arguments: argparse.Namespace, later: list[Any] | None = None, *, follow: bool = False
) -> Any:
    """The session of ``arguments.source``, which must hold event files; said on stderr.

    With ``later`` (a report's), ``(session, choice)`` goes there to be said with the
    report's own counts, unless a time window cuts the report short of the whole run.
    With ``follow``, a directory with no event files yet will do: a follower started
    before the run's first event waits for it.

    Raises:
        _NoEventsError: It holds none.
    """
    from raytrace_kit._reports import header  # noqa: PLC0415 -- not for --help
    from raytrace_kit._reports.session import open_session  # noqa: PLC0415
    from raytrace_kit._reports.sessions import choose_latest  # noqa: PLC0415

    choice = None
    if arguments.source == "latest":
        choice = choose_latest()
        session = open_session(choice.path)
    else:
        session = open_session(arguments.source)
    if not session.files and not (follow and session.root.is_dir()):
        msg = (
            f"no event files in {session.root} (`raytrace-kit sessions` lists the sessions "
            "on this machine that have some)"
        )
        raise _NoEventsError(msg)
    if later is not None and arguments.since is None and arguments.until is None:
        later.append((session, choice))
    else:
        _say(arguments, lambda: header.session_line(session, choice))
    return session


def _events(arguments: argparse.Namespace) -> int:
    from raytrace_kit._output.lines import readable  # noqa: PLC0415

    session = _session(arguments)
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
    made = live_commands.report(arguments, _on_cluster, _session, _say)  # --address: nodes
    if isinstance(made, int):
        return made
    if arguments.html is not None:
        made.save_html(arguments.html)
        print(json.dumps(made.to_dict(), indent=1) if arguments.json else arguments.html)
    else:
        print(json.dumps(made.to_dict(), indent=1) if arguments.json else str(made))
    return 0 if made.overview["calls"] else EXIT_EMPTY


def _timeline(arguments: argparse.Namespace) -> int:
    import raytrace_kit  # noqa: PLC0415

    path = raytrace_kit.timeline(_session(arguments), arguments.output)
    print(path)
    return 0


def _explain(arguments: argparse.Namespace) -> int:
    from raytrace_kit._reports.explain import explain, explain_task  # noqa: PLC0415

    if arguments.task:
        print(explain_task(arguments.task, _session(arguments)))
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
        session = _session(arguments)
    except Exception as exc:  # the error is explained all the same, without a run's records
        why = str(exc)
        _say(arguments, lambda: f"raytrace-kit: no run's records read ({why})")
        session = None
    explained = explain(text, session)
    print(explained)
    return 0 if explained.kind != "Not a Ray error" else EXIT_FAILED


def _address(arguments: argparse.Namespace) -> tuple[str, str] | int:
    """The cluster to attach to and how it was chosen (for the header), or an exit code."""
    from raytrace_kit._reports import header, running  # noqa: PLC0415

    address, how = arguments.address, "as given"
    if address == "auto" and os.environ.get("RAY_ADDRESS"):  # where ray.init goes then
        how = "chosen by RAY_ADDRESS"
    elif address == "auto":
        found = running.clusters(running.ray_processes() or [])
        if len(found) > 1:
            listing = "\n".join(header.cluster_listing(found))
            print(
                f"raytrace-kit {arguments.command}: {len(found)} Ray clusters are running on "
                "this machine, and --address auto would attach to one of them without saying "
                f"which. Choose one with --address HOST:PORT:\n{listing}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if found:  # attach to the very cluster the line will name
            address, how = found[0].address, "the only cluster running here"
    return address, how


def _on_cluster(arguments: argparse.Namespace, work: Callable[[], _T]) -> _T | int:
    """Attach to ``--address``, say which cluster, do ``work``, detach (or an exit code)."""
    from raytrace_kit._driver.attach import attached  # noqa: PLC0415

    chosen = _address(arguments)
    if isinstance(chosen, int):
        return chosen
    address, how = chosen
    try:
        with attached(address):
            _say(arguments, lambda: _attached(how))
            return work()
    except ClusterConnectionError as exc:
        print(f"raytrace-kit {arguments.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _collect(arguments: argparse.Namespace) -> int:
    import raytrace_kit  # noqa: PLC0415

    dest = _on_cluster(
        arguments,
        lambda: raytrace_kit.collect(arguments.output, profiles=not arguments.no_profiles),
    )
    if isinstance(dest, int):
        return dest
    nodes = json.loads((dest / "collect.json").read_text())["nodes"]
    for record in nodes.values():
        copied = record.get("bytes_copied")
        detail = f"{copied:,} bytes copied" if copied is not None else record.get("error", "")
        print(f"node {record['node_id'][:12]}: {record['status']} {detail}".rstrip())
    print(dest)
    return 0


def _stuck(arguments: argparse.Namespace) -> int:
    import raytrace_kit  # noqa: PLC0415

    found = _on_cluster(arguments, lambda: raytrace_kit.stuck(timeout=arguments.timeout))
    if isinstance(found, int):
        return found
    if arguments.html:
        found.save_html(arguments.html)
    if arguments.json:
        print(json.dumps(found.to_dict(), indent=1, default=str))
    else:
        print(found)
    return 0


def _attached(how: str) -> str:
    """The line naming the cluster Ray is connected to, as Ray reports it."""
    import ray  # noqa: PLC0415

    from raytrace_kit._output import paths  # noqa: PLC0415
    from raytrace_kit._reports import header, running  # noqa: PLC0415
    from raytrace_kit._reports.sessions import summarize  # noqa: PLC0415

    context = ray.get_runtime_context()
    session_dir = paths.session_dir()
    alive = sum(1 for node in ray.nodes() if node.get("Alive"))
    summary = None
    if session_dir.is_dir():  # on this machine: its drivers and their scripts
        summary = summarize(session_dir, running.ray_processes(), [], not_driver=os.getpid())
    return header.cluster_line(context.gcs_address, session_dir, alive, how, summary)


def _export(arguments: argparse.Namespace) -> int:
    follow = getattr(arguments, "follow", False)
    return otel_command.run(arguments, _session(arguments, follow=follow))


def _profile(arguments: argparse.Namespace) -> int:
    return profile_command.run(arguments, _session(arguments))


def _sessions(arguments: argparse.Namespace) -> int:
    from raytrace_kit._reports import header  # noqa: PLC0415
    from raytrace_kit._reports.sessions import sessions  # noqa: PLC0415

    listing = sessions()
    _say(arguments, lambda: header.sessions_line(listing))
    if arguments.json:
        print(json.dumps([summary.to_dict() for summary in listing], indent=1))
    elif listing:
        print(listing)
    return 0 if listing else EXIT_EMPTY


_COMMANDS = {
    "report": _report,
    "events": _events,
    "timeline": _timeline,
    "explain": _explain,
    "collect": _collect,
    "stuck": _stuck,
    "export": _export,
    "sessions": _sessions,
    "replay": lambda arguments: replay_command.run(arguments, _session),
    "profile": _profile,
    **live_commands.commands(_on_cluster),  # top, tail: attached as stuck and collect are
    "memory": memory_command.command(_on_cluster),  # attached as stuck is
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    given = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if given[:1] == ["run"]:
        given, rest = launch.split_argv(given)
    arguments = _parser().parse_args(given)
    from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError  # noqa: PLC0415

    if arguments.command == "run":
        return launch.command(arguments, [*arguments.program, *rest])
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
