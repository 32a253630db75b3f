"""How a run is named to its reader: the one line a command prints first, and the sessions table.

Every ``raytrace-kit`` command says which session, folder or cluster it read before its
output, in one line (the CLI writes it on stderr): where it is, when that run started,
whether it still runs, its driver's script where known, its nodes, calls and failures,
and, when it was the default, what was passed over to choose it. Times are this machine's
local time, as Ray names its sessions.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from raytrace_kit._html import card, table
from raytrace_kit._reports import running
from raytrace_kit._reports.columns import first_last_stamps
from raytrace_kit._reports.counts import Counts, count
from raytrace_kit._reports.session import Session
from raytrace_kit._reports.sessions import (
    Choice,
    SessionList,
    SessionSummary,
    session_dir_of,
    session_start,
    summarize,
)

__all__ = [
    "PREFIX",
    "cluster_line",
    "cluster_listing",
    "counted",
    "session_line",
    "sessions_html",
    "sessions_line",
    "sessions_table",
    "shown_time",
]

PREFIX = "raytrace-kit: "


def shown_time(when: datetime | None) -> str:
    """A time as the line shows it: this machine's local time, to the second."""
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S") if when is not None else "?"


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _driver(summary: SessionSummary) -> str:
    """``pipeline.py`` (``+N more`` drivers), or the pid: a script is known while it runs."""
    drivers = summary.drivers
    if not drivers:
        return ""
    script = summary.script
    first = running.shown_script(script) if script else f"pid {drivers[0].pid}"
    return first + (f" +{len(drivers) - 1} more" if len(drivers) > 1 else "")


def _facts(summary: SessionSummary) -> list[str]:
    """What the line says of a session: start, state, driver (its counts come after)."""
    facts = [f"started {shown_time(summary.started)}"] if summary.started else []
    if summary.running is not None:
        facts.append("running" if summary.running else "ended")
    driver = _driver(summary)
    if driver:
        facts.append(f"driver: {driver}")
    return facts


def _chosen(choice: Choice) -> str:
    """What the default passed over, and what else there is."""
    said = "; the newest of yours with kit records"
    skipped = [
        f"{choice.newer_without_records} without kit records"
        if choice.newer_without_records
        else "",
        f"{choice.newer_of_others} of other users" if choice.newer_of_others else "",
    ]
    newer = choice.newer_without_records + choice.newer_of_others
    if newer:
        said += f", skipped {newer} newer ({', '.join(s for s in skipped if s)})"
    if choice.others_with_records:
        said += f"; {_plural(choice.others_with_records, 'other')}: raytrace-kit sessions"
    return said


def session_line(
    session: Session, choice: Choice | None = None, counts: Counts | None = None
) -> str:
    """The line for a command that reads ``session``; ``choice``: it was the default.

    A session directory, or anything inside one, is named with its session's facts; a
    folder made by ``collect()`` with the cluster it came from; anything else by its first
    event's time. ``counts``: its calls, failures and nodes, if the command counted them
    (a report does); else they are counted here.
    """
    root = session.root
    collected = _collected(root)
    home = session_dir_of(root) if root.is_dir() and not collected else None
    if home is not None:
        summary = summarize(home, running.ray_processes(), session.files, counts=counts)
        facts = _facts(summary)
        sizes = [_plural(summary.nodes, "node"), _plural(summary.calls, "call")]
        sizes.append(f"{summary.failures:,} failed")
        said = ", ".join([*facts, *sizes])
        return f"{PREFIX}{root} ({said}){_chosen(choice) if choice else ''}"
    tally = counts or count(session.files)
    sizes = [
        _plural(tally.nodes, "node"),
        _plural(tally.calls, "call"),
        f"{tally.failures:,} failed",
    ]
    origin = collected or _first_event(session)
    return f"{PREFIX}{root} ({', '.join([origin, *sizes])})"


def counted(report: Any) -> Counts | None:
    """A report's calls, failures, nodes and processes, as :func:`count` gives the files'."""
    overview = getattr(report, "overview", None)
    if overview is None:
        return None
    return Counts(overview["calls"], overview["failed"], overview["nodes"], overview["processes"])


def _collected(root: Path) -> str | None:
    """``collected <when> from <session> at <address>``, from a collection's record."""
    record = root / "collect.json" if root.is_dir() else None
    if record is None or not record.is_file():
        return None
    try:
        cluster = json.loads(record.read_text()).get("cluster") or {}
        when = datetime.fromtimestamp(record.stat().st_mtime).astimezone()
    except (OSError, ValueError, AttributeError):
        return None
    said = f"collected {shown_time(when)}"
    if isinstance(cluster, dict) and cluster.get("session_dir"):
        said += f" from {cluster['session_dir']}"
        if cluster.get("address"):
            said += f" at {cluster['address']}"
        started = _session_started(Path(str(cluster["session_dir"])).name)
        if started:
            said += f", started {started}"
    return said


def _session_started(name: str) -> str | None:
    when = session_start(name)
    return shown_time(when) if when else None


def _first_event(session: Session) -> str:
    stamps = [stamp for file in session.files[:200] for stamp in first_last_stamps(file)]
    if not stamps:
        return "event files"
    when = datetime.fromisoformat(min(stamps)).replace(tzinfo=timezone.utc)  # written in UTC
    return f"event files, first event {shown_time(when)}"


def cluster_line(
    address: str, session_dir: Path, nodes: int, how: str, summary: SessionSummary | None
) -> str:
    """The line ``collect`` prints once attached: the cluster, its session, its nodes.

    ``how`` says how it was chosen (``"the only cluster running here"``, ``"as given"``).
    """
    if summary is not None:  # attached: it runs, and its state goes without saying
        facts = [f for f in _facts(summary) if f not in {"running", "ended"}]
    else:
        started = _session_started(session_dir.name)
        facts = [f"started {started}"] if started else []
    said = ", ".join([*facts, _plural(nodes, "node") + " alive"])
    return f"{PREFIX}cluster {address}, {session_dir} ({said}); {how}"


def cluster_listing(listed: list[running.Cluster]) -> list[str]:
    """One line per running cluster: address, session directory, start, nodes here."""
    lines = []
    for cluster in listed:
        local = cluster.session_dir.is_dir()
        summary = summarize(cluster.session_dir, None, []) if local else None
        facts = _facts(summary) if summary else []
        facts.append(_plural(cluster.nodes_here, "node") + " here")
        lines.append(f"  {cluster.address}  {cluster.session_dir} ({', '.join(facts)})")
    return lines


def sessions_line(listing: SessionList) -> str:
    """The line ``raytrace-kit sessions`` prints first: what was found, and the default."""
    runs = sum(1 for s in listing if s.running)
    said = f"{PREFIX}{listing.root}: {_plural(len(listing), 'session')} with kit records"
    said += f" ({runs} running), {listing.without_records:,} without"
    default = listing.default
    if default is None:
        return said + "; none of them is yours: pass a SOURCE to the commands"
    return said + f"; the default (*) is {default.name}, the newest of yours with kit records"


_HEADERS = ("", "session", "started", "state", "driver", "nodes", "calls", "failed", "owner")


def _row(summary: SessionSummary) -> tuple[str, ...]:
    state = {True: "running", False: "ended", None: "?"}[summary.running]
    if summary.running and summary.address:
        state += f" at {summary.address}"
    return (
        "*" if summary.default else "",
        summary.name,
        shown_time(summary.started),
        state,
        _driver(summary),
        f"{summary.nodes:,}",
        f"{summary.calls:,}",
        f"{summary.failures:,}",
        summary.owner,
    )


def sessions_table(listing: SessionList) -> str:
    """The sessions as a text table (rich, no colours), newest first."""
    from rich.console import Console  # noqa: PLC0415 -- rich loads on first render
    from rich.table import Table  # noqa: PLC0415

    shown = Table(box=None, pad_edge=False)
    for index, header in enumerate(_HEADERS):
        shown.add_column(header, justify="right" if 5 <= index <= 7 else "left", no_wrap=True)
    for summary in listing:
        shown.add_row(*_row(summary))
    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink, color_system=None, force_jupyter=False)
        console.print(shown)
        return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def sessions_html(listing: SessionList) -> str:
    """The sessions as a notebook card."""
    summary = f"{len(listing)} with kit records under {listing.root}"
    return card("Sessions", summary, table(_HEADERS, [_row(s) for s in listing]))
