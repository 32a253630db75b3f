"""How a run is named to its reader: the one line a command prints first, and the sessions table.

Every ``raytrace-kit`` command says which session, folder or cluster it read before its
output, in one line (the CLI writes it on stderr): where it is, when that run started,
whether it still runs, its driver's script where known, its nodes, calls and failures,
and, when it was the default, what was passed over to choose it. When the default is not
your newest run because that one has no kit records (it failed before its first remote
call, or the kit was not on in it), a line before says so: that run, its script, how it
ended where the kit's driver record says, and which run is read instead. Times are this
machine's local time, as Ray names its sessions.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from raytrace_kit._reports.reading import running
from raytrace_kit._reports.reading.columns import first_last_stamps
from raytrace_kit._reports.reading.counts import Counts, count
from raytrace_kit._reports.reading.driver import read_driver
from raytrace_kit._reports.reading.session import Session, open_session
from raytrace_kit._reports.reading.session_list import (
    Choice,
    SessionSummary,
    session_dir_of,
    session_start,
    summarize,
)
from raytrace_kit._reports.reading.session_table import PREFIX, driver_shown, plural, shown_time

__all__ = [
    "PREFIX",
    "cluster_line",
    "cluster_listing",
    "counted",
    "passed_over_line",
    "session_line",
    "shown_time",
]


def _facts(summary: SessionSummary) -> list[str]:
    """What the line says of a session: start, state, driver (its counts come after)."""
    facts = [f"started {shown_time(summary.started)}"] if summary.started else []
    if summary.running is not None:
        facts.append("running" if summary.running else "ended")
    driver = driver_shown(summary)
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
        said += f"; {plural(choice.others_with_records, 'other')}: raytrace-kit sessions"
    return said


def session_line(
    session: Session, choice: Choice | None = None, counts: Counts | None = None
) -> str:
    """The line for a command that reads ``session``; ``choice``: it was the default.

    A session directory, or anything inside one, is named with its session's facts; a
    folder made by ``collect()`` with the cluster it came from; anything else by its first
    event's time. ``counts``: its calls, failures and nodes, if the command counted them
    (a report does); else they are counted here. When the default passed over your
    newest run (it has no kit records), a line naming that run comes first
    (:func:`passed_over_line`).
    """
    root = session.root
    collected = _collected(root)
    home = session_dir_of(root) if root.is_dir() and not collected else None
    if home is not None:
        processes = running.ray_processes()
        summary = summarize(home, processes, session.files, counts=counts)
        facts = _facts(summary)
        sizes = [plural(summary.nodes, "node"), plural(summary.calls, "call")]
        sizes.append(f"{summary.failures:,} failed")
        said = ", ".join([*facts, *sizes])
        line = f"{PREFIX}{root} ({said}){_chosen(choice) if choice else ''}"
        newest = choice.newest_without_records if choice is not None else None
        if newest is not None:
            return f"{passed_over_line(newest, root, processes)}\n{line}"
        return line
    tally = counts or count(session.files)
    sizes = [
        plural(tally.nodes, "node"),
        plural(tally.calls, "call"),
        f"{tally.failures:,} failed",
    ]
    origin = collected or _first_event(session)
    return f"{PREFIX}{root} ({', '.join([origin, *sizes])})"


def passed_over_line(newest: Path, read: Path, processes: list[running.RayNode] | None) -> str:
    """The line said first when your ``newest`` run has no kit records and ``read`` is read.

    It names that run (its directory, start, state, script) and how it ended where the
    kit's driver record says (``raytrace-kit run`` and ``instrument()`` keep one), why it
    may have no records, and which run is read instead. ``processes``: the Ray processes
    running here (:func:`running.ray_processes`).
    """
    summary = summarize(newest, processes, [])
    runs = read_driver(open_session(newest).driver_files()).runs
    run = max(runs, key=lambda r: str(r.get("started") or ""), default={})
    facts = [f"started {shown_time(summary.started)}"] if summary.started else []
    script = run.get("script")
    # Once its process has ended, only the kit's record knows its script.
    driver = running.shown_script(str(script)) if script and not summary.script else ""
    driver = driver or driver_shown(summary)
    if driver:
        facts.append(f"driver: {driver}")
    if "ended" in run:
        facts.append(_how_it_ended(run))
    elif summary.running is not None:
        facts.append("running" if summary.running else "ended")
    return (
        f"{PREFIX}your newest run, {newest} ({', '.join(facts)}), has no kit records: "
        f"{_why_none(run, summary.running)}; read instead: {read.name}, the newest "
        "of yours with kit records"
    )


def _how_it_ended(run: dict[str, Any]) -> str:
    """``ended with ValueError (exit status 1)``, from a driver record's ``run.end``."""
    status = run.get("exit_status")
    if run.get("error_type"):
        said = f"ended with {run['error_type']}"
        return said + (f" (exit status {status})" if status is not None else "")
    return f"ended with exit status {status}" if status is not None else "ended"


def _why_none(run: dict[str, Any], runs: bool | None) -> str:
    """Why a run may have no kit records, from its driver record (``{}``: none)."""
    if "ended" in run:
        failed = run.get("error_type") or run.get("exit_status") not in {0, None}
        if failed:
            return "it failed before its first remote call"
        return "it ended without a remote call of its code"
    if run:  # started under the kit, and never said how it ended
        if runs:
            return "it runs and has made no remote call yet"
        return "it stopped before its first remote call, and before saying how (killed?)"
    how = "raytrace-kit run, instrument() or @debuggable"
    if runs:
        return f"it has made no remote call yet, or the kit is not on in it ({how})"
    return f"it failed before its first remote call, or the kit was not on in it ({how})"


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
    said = ", ".join([*facts, plural(nodes, "node") + " alive"])
    return f"{PREFIX}cluster {address}, {session_dir} ({said}); {how}"


def cluster_listing(listed: list[running.Cluster]) -> list[str]:
    """One line per running cluster: address, session directory, start, nodes here."""
    lines = []
    for cluster in listed:
        local = cluster.session_dir.is_dir()
        summary = summarize(cluster.session_dir, None, []) if local else None
        facts = _facts(summary) if summary else []
        facts.append(plural(cluster.nodes_here, "node") + " here")
        lines.append(f"  {cluster.address}  {cluster.session_dir} ({', '.join(facts)})")
    return lines
