"""What every verb of ``raytrace-kit`` shares: exit codes, the session, the header, the cluster.

Importing this module imports no Ray (the command builds its parser first): what a verb
reads or attaches to is imported when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from raytrace_kit.exceptions import ClusterConnectionError

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = [
    "EXIT_EMPTY",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "CommandExit",
    "NoEventsError",
    "on_cluster",
    "quiet_parent",
    "say",
    "session",
]

EXIT_FAILED, EXIT_USAGE, EXIT_EMPTY = 1, 2, 3
_T = TypeVar("_T")


def quiet_parent() -> argparse.ArgumentParser:
    """The options every verb that reads a run shares: ``-q/--quiet``."""
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "-q", "--quiet", action="store_true", help="do not say which run was read (on stderr)"
    )
    return quiet


class NoEventsError(Exception):
    """The source exists and holds no event files (exit code 3)."""


class CommandExit(Exception):  # noqa: N818 -- an exit, as SystemExit is, not an error
    """The command stops here: ``message`` on stderr, ``code`` its exit code (``main``'s)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def say(arguments: argparse.Namespace, line: Callable[[], str]) -> None:
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


def session(
    arguments: argparse.Namespace, later: list[Any] | None = None, *, follow: bool = False
) -> Any:
    """The session of ``arguments.source``, which must hold event files; said on stderr.

    With ``later`` (a report's), ``(session, choice)`` goes there to be said with the
    report's own counts, unless a time window cuts the report short of the whole run.
    With ``follow``, a directory with no event files yet will do: a follower started
    before the run's first event waits for it.

    Raises:
        NoEventsError: It holds none.
    """
    from raytrace_kit._reports.reading import (  # noqa: PLC0415 -- not for --help
        choose_latest,
        open_session,
        session_line,
    )

    choice = None
    if arguments.source == "latest":
        choice = choose_latest()
        opened = open_session(choice.path)
    else:
        opened = open_session(arguments.source)
    if not opened.files and not (follow and opened.root.is_dir()):
        msg = (
            f"no event files in {opened.root} (`raytrace-kit sessions` lists the sessions "
            "on this machine that have some)"
        )
        raise NoEventsError(msg)
    if later is not None and arguments.since is None and arguments.until is None:
        later.append((opened, choice))
    else:
        say(arguments, lambda: session_line(opened, choice))
    return opened


def _address(arguments: argparse.Namespace) -> tuple[str, str]:
    """The cluster to attach to and how it was chosen (for the header).

    Raises:
        CommandExit: Several clusters run here and ``--address auto`` would pick one.
    """
    from raytrace_kit._reports.reading import cluster_listing, clusters, ray_processes  # noqa: PLC0415

    address, how = arguments.address, "as given"
    if address == "auto" and os.environ.get("RAY_ADDRESS"):  # where ray.init goes then
        how = "chosen by RAY_ADDRESS"
    elif address == "auto":
        found = clusters(ray_processes() or [])
        if len(found) > 1:
            listing = "\n".join(cluster_listing(found))
            msg = (
                f"raytrace-kit {arguments.command}: {len(found)} Ray clusters are running on "
                "this machine, and --address auto would attach to one of them without saying "
                f"which. Choose one with --address HOST:PORT:\n{listing}"
            )
            raise CommandExit(EXIT_USAGE, msg)
        if found:  # attach to the very cluster the line will name
            address, how = found[0].address, "the only cluster running here"
    return address, how


def on_cluster(arguments: argparse.Namespace, work: Callable[[], _T]) -> _T:
    """Attach to ``--address``, say which cluster, do ``work``, detach.

    Token authentication as Ray's own command line.

    Raises:
        CommandExit: Several clusters run here and ``--address auto`` was given (they are
            listed; exit code 2), or the cluster cannot be reached (exit code 1).
    """
    from raytrace_kit._driver.attach import attached  # noqa: PLC0415

    address, how = _address(arguments)
    try:
        with attached(address):
            say(arguments, lambda: _attached(how))
            return work()
    except ClusterConnectionError as exc:
        raise CommandExit(EXIT_FAILED, f"raytrace-kit {arguments.command}: {exc}") from exc


def _attached(how: str) -> str:
    """The line naming the cluster Ray is connected to, as Ray reports it."""
    import ray  # noqa: PLC0415

    from raytrace_kit._output import paths  # noqa: PLC0415
    from raytrace_kit._reports.reading import (  # noqa: PLC0415
        cluster_line,
        ray_processes,
        summarize,
    )

    context = ray.get_runtime_context()
    session_dir = paths.session_dir()
    alive = sum(1 for node in ray.nodes() if node.get("Alive"))
    summary = None
    if session_dir.is_dir():  # on this machine: its drivers and their scripts
        summary = summarize(session_dir, ray_processes(), [], not_driver=os.getpid())
    return cluster_line(context.gcs_address, session_dir, alive, how, summary)
