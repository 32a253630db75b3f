"""``report()``: a run's answers: what failed and where, what died, where time and memory went.

Sections appear only when they have something to say. Findings each carry their evidence
and a fix, from the debugging method of Ray's guides: tasks too small, calls submitted and
waited on one at a time, CPU oversubscription, retries hiding a flaky function, calls cut
off by a dying process. ``str()`` renders for a terminal (rich), ``_repr_html_()`` for
notebooks, with pictures drawn from ``charts`` (``charts.py``), ``to_dict()`` for machines,
``save_html()`` one file that renders offline.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.profiles.sample_calls import add_straggler_lines
from raytrace_kit._reports.profiles.samples import SampleRow, add_hot_lines, read_samples
from raytrace_kit._reports.reading.calls import StartLine, distinct_processes, iter_calls
from raytrace_kit._reports.reading.columns import seconds
from raytrace_kit._reports.reading.driver import DriverRecord, read_driver
from raytrace_kit._reports.reading.session import Session, instant, open_session
from raytrace_kit._reports.run import render, rules, store_refs
from raytrace_kit._reports.run.blocked import BlockedLoops, each, explained
from raytrace_kit._reports.run.data_findings import data_explained
from raytrace_kit._reports.run.data_ops import DataOps
from raytrace_kit._reports.run.driver_waits import driver_findings
from raytrace_kit._reports.run.finding import Finding
from raytrace_kit._reports.run.flame import flame_data
from raytrace_kit._reports.run.flight_findings import flight_findings
from raytrace_kit._reports.run.interrupted import RayLogs, death_findings
from raytrace_kit._reports.run.lanes import lanes_data
from raytrace_kit._reports.run.queues import Queues, has_submissions
from raytrace_kit._reports.run.rules import (
    STRAGGLER_EXCESS_S,
    STRAGGLER_MIN_CALLS,
    STRAGGLER_RATIO,
    straggler_floor,
)
from raytrace_kit._reports.run.spread import spread
from raytrace_kit._reports.run.tally import Tally
from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "Finding",
    "Report",
    "add_samples",
    "finish",
    "report",
]

SPREADS = 12  # functions whose durations are pictured: the slowest ones, stragglers' too


@dataclass
class Report:
    """The answers about one run (see :func:`report`)."""

    overview: dict[str, Any]
    failures: list[dict[str, Any]] = field(default_factory=list)
    interrupted: list[dict[str, Any]] = field(default_factory=list)
    slowest: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    charts: dict[str, Any] = field(default_factory=dict)  # what the pictures draw
    driver: dict[str, Any] = field(default_factory=dict)  # the driver's runs and waits
    # From the in-flight records: time in queue, calls never started, stuck calls.
    queued: list[dict[str, Any]] = field(default_factory=list)
    never_started: list[dict[str, Any]] = field(default_factory=list)
    stuck: list[dict[str, Any]] = field(default_factory=list)
    # Async methods whose calls held their actor's event loop (call.blocked records).
    blocked_loops: list[dict[str, Any]] = field(default_factory=list)
    # Ray Data's operators, in plan order: batches, time, rows, memory (data_ops.py).
    data_pipeline: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain data (JSON-ready)."""
        data = asdict(self)
        data["findings"] = [asdict(f) for f in self.findings]
        return data

    def __str__(self) -> str:
        return render.text(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``, not the fields."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        return render.html_card(self)

    def save_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as one self-contained HTML file (renders offline)."""
        target = Path(path)
        target.write_text(render.html_page(self), encoding="utf-8")
        return target


def _failures(tally: Tally) -> list[dict[str, Any]]:
    return [group.row() for group in sorted(tally.failures.values(), key=lambda g: -g.count)]


def _slowest(tally: Tally) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The slowest functions' rows, and the spreads of their durations (sorted once)."""
    rows: list[dict[str, Any]] = []
    spreads: dict[str, dict[str, Any]] = {}
    for function, aggregate in tally.functions.items():
        if not aggregate.durations:
            continue
        durations = sorted(aggregate.durations)
        total, median = math.fsum(durations), statistics.median(durations)
        few = len(durations) < STRAGGLER_MIN_CALLS
        spreads[function] = spread(
            function, durations, math.inf if few else straggler_floor(median), aggregate.slowest
        )
        rows.append(
            {
                "function": function,
                "count": len(durations),
                "p50_s": median,
                "p95_s": durations[min(len(durations) - 1, int(0.95 * len(durations)))],
                "max_s": durations[-1],
                "total_s": total,
            }
        )
    # Of all calls' time, not of the run's span: calls run side by side (8 workers busy
    # all along are 800% of the span), and a column that tops 100% reads as a bug.
    everything = math.fsum(r["total_s"] for r in rows)
    for row in rows:
        row["share"] = row["total_s"] / everything if everything > 0 else 0.0
    rows.sort(key=lambda r: -r["total_s"])
    # Pictured: the functions with stragglers, then the slowest, in the table's order.
    ordered = [r["function"] for r in rows]
    straggling = {f for f in ordered if spreads[f]["stragglers"]}
    pictured = set([f for f in ordered if f in straggling][:SPREADS])
    pictured |= set([f for f in ordered if f not in straggling][: SPREADS - len(pictured)])
    return rows[:10], [spreads[f] for f in ordered if f in pictured]


def _medians(tally: Tally, rows: list[dict[str, Any]]) -> dict[str, float]:
    """The median duration of each function named in ``rows``."""
    found = {}
    for row in rows:
        aggregate = tally.functions.get(row["function"])
        if aggregate is not None and aggregate.durations:
            found[row["function"]] = statistics.median(aggregate.durations)
    return found


def _memory(tally: Tally) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"function": f, "max_growth_bytes": a.growth, "max_private_bytes": a.private}
        for f, a in tally.functions.items()
        if a.growth is not None or a.private is not None
    ]
    rows.sort(key=lambda r: -(r["max_growth_bytes"] or 0))
    return rows[:10]


def report(
    source: str | os.PathLike[str] | Session | None = None,
    *,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
) -> Report:
    """The answers about a run: overview, failures, interrupted calls, time, memory, findings.

    It streams over the events once and keeps aggregates, so its work grows as the events
    do, whatever their shape, and a million events take well under 256 MB
    (``benchmarks/report.py``).

    Args:
        source: What :func:`raytrace_kit.open_session` takes, or a session.
        since: Only calls that started at or after this time (ISO 8601 text, ``Z`` or an
            offset, or a ``datetime``; naive ones are UTC): one run of a long session.
        until: Only calls that started before this time (as ``since``).
    """
    session = source if isinstance(source, Session) else open_session(source)
    if not session.files:
        msg = (
            f"no event files in {session.root}: nothing to report (pass 'latest' for your "
            "newest Ray session with kit records; raytrace-kit sessions lists them)"
        )
        raise EventsNotFoundError(msg)
    start, end = instant(since), instant(until)
    if start is not None and end is not None and start >= end:
        msg = f"since={since!r} is not before until={until!r}: the window is empty"
        raise InvalidValueError(msg)
    driver = read_driver(session.driver_files())
    queues = Queues(joined=has_submissions(session.files), since=start, until=end)
    tally = Tally(start, end, waited=driver.wanted, queues=queues)
    line, blocked, data = StartLine(), BlockedLoops(start, end), DataOps(start, end)
    others = each(queues.line, blocked.line)
    for files in distinct_processes(session.files):
        tally.process(data.calls(iter_calls(files, line, others, data.event)), line)
    flights = queues.results(tally.stuck_status.get)
    made = finish(
        tally,
        driver,
        queues,
        flights,
        RayLogs.here(session.root),
        source=str(session.root),
        files=len(session.files),
        blocked=blocked,
        data=data,
    )
    add_samples(made, tally, read_samples(session.sample_files()))  # where it was sampled
    return made


def add_samples(made: Report, tally: Tally, rows: list[SampleRow]) -> None:
    """Where the run was sampled, added to its report (one pass, two readers, or nodes').

    Each slowest function's hot line, the stragglers' lines, the flame graph.
    """
    if not rows:
        return
    add_hot_lines(made.slowest, rows)
    slowest = {
        function: aggregate.slowest.call_id
        for function, aggregate in tally.functions.items()
        if aggregate.slowest is not None and aggregate.slowest.call_id
    }
    made.findings = add_straggler_lines(made.findings, slowest, rows)
    made.charts["flame"] = flame_data(rows)


def finish(
    tally: Tally,
    driver: DriverRecord,
    queues: Queues,
    flights: dict[str, Any],
    ray_logs: RayLogs,
    *,
    source: str,
    files: int,
    blocked: BlockedLoops,
    data: DataOps | None = None,
) -> Report:
    """The report of a tally that took in every call: its sections and findings.

    ``flights`` is what ``queues.results()`` made of the in-flight records; ``blocked``
    the event loops held by calls; a cluster's report (``_driver/cluster_report.py``)
    merges its nodes' tallies and finishes here too.
    """
    span = seconds(tally.last) - seconds(tally.first) if tally.last else 0.0
    tally.interrupted.sort(key=lambda i: i["started"])
    died = death_findings(tally, ray_logs, queues.killed)
    running = sum(row.get("state") == "running" for row in tally.interrupted)
    slowest, spreads = _slowest(tally)
    overview = _overview(tally, span, running, source=source, files=files)
    data = data or DataOps()
    of_driver = driver_findings(driver, tally.waited, flights["called"])
    return Report(
        overview=overview,
        failures=_failures(tally),
        interrupted=tally.interrupted,
        slowest=slowest,
        memory=_memory(tally),
        findings=_findings(
            tally,
            driver,
            queues,
            flights,
            span=span,
            of_driver=of_driver,
            died=died,
            blocked=blocked,
            data=data,
        ),
        charts=_charts(tally, span, spreads),
        driver=driver.overview() if driver.runs or driver.waits else {},
        queued=flights["queued"],
        never_started=flights["never_started"],
        stuck=flights["stuck"],
        blocked_loops=blocked.rows(),
        data_pipeline=data.rows(),
    )


def _overview(
    tally: Tally, span: float, running: int, *, source: str, files: int
) -> dict[str, Any]:
    """The report's first lines: how many calls, failures, nodes, processes, over what span."""
    return {
        "calls": tally.calls,
        "failed": tally.failed,
        "failed_tasks": len(tally.failed_tasks - tally.recovered),
        "interrupted": tally.interrupted_count - running,
        "running": running,
        "retried": tally.retried,
        "nodes": len(tally.nodes),
        "processes": tally.processes,
        "span_s": span,
        "functions": len(tally.functions),
        "source": source,
        "files": files,
    }


def _findings(
    tally: Tally,
    driver: DriverRecord,
    queues: Queues,
    flights: dict[str, Any],
    *,
    span: float,
    of_driver: list[Finding],
    died: list[Finding],
    blocked: BlockedLoops,
    data: DataOps,
) -> list[Finding]:
    """Every finding, the driver's first (a loop its record names is not said twice)."""
    said = {finding.subject for finding in of_driver}
    return data_explained(
        explained(
            [
                *of_driver,
                *rules.tiny_tasks(tally),
                *rules.stragglers(tally),
                *rules.one_at_a_time(tally),
                *rules.serializing_actors(
                    tally, span, flights["actor_queues"], flights["actors_made"]
                ),
                *tally.leaks,
                *died,
                *rules.other_findings(tally),
                *flight_findings(flights, _medians(tally, flights["queued"]), said),
                *queues.by_value.findings(),
                *blocked.findings(),
                *data.findings(),
                *store_refs.held_findings(driver.held),
            ]
        ),
        data.udfs(),
    )


def _charts(tally: Tally, span: float, spreads: list[dict[str, Any]]) -> dict[str, Any]:
    """What the pictures draw: each process's lane over time, each function's spread."""
    rule = f"at least {STRAGGLER_RATIO:g}x its median and {STRAGGLER_EXCESS_S:g} s over it"
    if not tally.last:
        return {
            "span_s": 0.0,
            "lanes": [],
            "lanes_not_drawn": 0,
            "spreads": spreads,
            "straggler_rule": rule,
        }
    gone = "the process is gone; no Ray record says why"
    causes = {row["call_id"]: row.get("cause") or gone for row in tally.interrupted}
    lanes, more = lanes_data(tally.lanes, seconds(tally.first), causes)
    return {
        "origin": tally.first,
        "span_s": span,
        "lanes": lanes,
        "lanes_not_drawn": more,
        "spreads": spreads,
        "straggler_rule": rule,
    }
