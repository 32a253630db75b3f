"""``report()``: a run's answers: what failed and where, what died, where time and memory went.

Sections appear only when they have something to say. Findings each carry their evidence
and a fix, from the debugging method of Ray's guides: tasks too small, calls submitted and
waited on one at a time, CPU oversubscription, retries hiding a flaky function, calls cut
off by a dying process. ``str()`` renders for a terminal (rich), ``_repr_html_()`` for
notebooks, with pictures drawn from ``charts`` (``charts.py``), ``to_dict()`` for machines,
``save_html()`` one file that renders offline.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports import render
from raytrace_kit._reports.calls import StartLine, distinct_processes, iter_calls
from raytrace_kit._reports.deaths import death_finding, find_ray_logs, worker_deaths
from raytrace_kit._reports.driver import read_driver
from raytrace_kit._reports.finding import Finding
from raytrace_kit._reports.lanes import lanes_data
from raytrace_kit._reports.linking import still_running
from raytrace_kit._reports.session import Session, instant, open_session
from raytrace_kit._reports.spread import spread
from raytrace_kit._reports.tally import Tally, seconds
from raytrace_kit.exceptions import EventsNotFoundError, InvalidValueError

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["Finding", "Report", "report"]

TINY_SECONDS = 0.010  # a median call shorter than this: scheduling costs more than the work
TINY_MIN_CALLS = 20
SERIAL_MIN_CHILDREN = 5
STRAGGLER_MIN_CALLS = 5  # a function's slowest call, among at least this many...
STRAGGLER_RATIO = 5.0  # ...this many times its median...
STRAGGLER_EXCESS_S = 1.0  # ...and this much longer: one call holds up what waits for all
SERIAL_ACTOR_SHARE = 0.5  # an actor busy at least this share of the run...
SERIAL_GAP_S = 0.002  # ...its calls this close (or a tenth of a call)...: it is the queue
SPREADS = 12  # functions whose durations are pictured: the slowest ones, stragglers' too


def straggler_floor(median: float) -> float:
    """How long a call of a function with this median takes to be a straggler."""
    return max(STRAGGLER_RATIO * median, median + STRAGGLER_EXCESS_S)


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
    groups = sorted(tally.failures.values(), key=lambda g: -g["count"])
    for group in groups:
        group["task_ids"] = sorted(set(group["task_ids"]))
        group["nodes"] = sorted(group["nodes"])
    return groups


def _slowest(tally: Tally, span: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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
        rows.append({
            "function": function,
            "count": len(durations),
            "p50_s": median,
            "p95_s": durations[min(len(durations) - 1, int(0.95 * len(durations)))],
            "max_s": durations[-1],
            "total_s": total,
            "share": total / span if span > 0 else 0.0,
        })  # fmt: skip
    rows.sort(key=lambda r: -r["total_s"])
    # Pictured: the functions with stragglers, then the slowest, in the table's order.
    ordered = [r["function"] for r in rows]
    straggling = {f for f in ordered if spreads[f]["stragglers"]}
    pictured = set([f for f in ordered if f in straggling][:SPREADS])
    pictured |= set([f for f in ordered if f not in straggling][: SPREADS - len(pictured)])
    return rows[:10], [spreads[f] for f in ordered if f in pictured]


def _memory(tally: Tally) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"function": f, "max_growth_bytes": a.growth, "max_private_bytes": a.private}
        for f, a in tally.functions.items()
        if a.growth is not None or a.private is not None
    ]
    rows.sort(key=lambda r: -(r["max_growth_bytes"] or 0))
    return rows[:10]


def _tiny_tasks(tally: Tally) -> list[Finding]:
    found = []
    for function, aggregate in sorted(tally.functions.items()):
        values = aggregate.durations
        if not aggregate.task or len(values) < TINY_MIN_CALLS:
            continue
        median = statistics.median(values)
        if median < TINY_SECONDS:
            found.append(Finding(
                f"Tasks too small: {function}",
                f"{len(values)} calls, median {median * 1000:.2f} ms: Ray's cost of "
                "scheduling a task (about a millisecond) outweighs the work",
                "batch the work: one task per chunk of items instead of one per item",
                "tiny_tasks", function,
            ))  # fmt: skip
    return found


def _stragglers(tally: Tally) -> list[Finding]:
    found = []
    for function, aggregate in sorted(tally.functions.items()):
        values, call = aggregate.durations, aggregate.slowest
        if call is None or call.duration_s is None or len(values) < STRAGGLER_MIN_CALLS:
            continue
        median, took = statistics.median(values), call.duration_s
        if took < straggler_floor(median):
            continue
        task = (call.task_id or "")[:16]
        where = f"task {task or '?'}, node {(call.node_id or '?')[:12]}, pid {call.pid}"
        start = aggregate.start_event() or {}
        if "args" in start or "kwargs" in start:
            where += f", arguments {start.get('args', [])} {start.get('kwargs', {})}"
        found.append(Finding(
            f"A straggler: {function}",
            f"one call took {took:.2f} s where its {len(values)} calls' median is "
            f"{median:.2f} s ({where})",
            "look at what sets that call apart: its input, its node"
            + (f" (raytrace-kit explain --task {task})" if task else "")
            + "; split skewed inputs so that no call gets far more work, or collect results "
            "with ray.wait(refs, timeout=...) so one slow call does not hold up the rest",
            "straggler", function,
        ))  # fmt: skip
    return found


def _one_at_a_time(tally: Tally) -> list[Finding]:
    """Parents whose task calls never overlapped: one finding per parent function."""
    kids_of: dict[str, int] = {}  # parent call id -> its task calls, none overlapping
    for parent, times in tally.children.items():
        kids = len(times) // 2
        if kids < SERIAL_MIN_CHILDREN:
            continue
        spans = sorted(zip(times[::2], times[1::2], strict=True))
        if all(later[0] >= earlier[1] - 1e-4 for earlier, later in itertools.pairwise(spans)):
            kids_of[parent] = kids
    serial: dict[str, list[Any]] = {}  # function -> [parents, their children, one parent]
    for parent, function in tally.names_of(list(kids_of)).items():
        counts = serial.setdefault(function, [0, 0, parent])
        counts[0] += 1
        counts[1] += kids_of[parent]
    found = []
    for function, (parents, kids, one) in sorted(serial.items(), key=lambda item: -item[1][1]):
        if parents == 1:
            evidence = f"one of its calls ({one}) waited on its {kids} task calls one at a time"
        else:
            evidence = f"{parents:,} of its calls waited on their {kids:,} task calls one at a time"
        found.append(Finding(
            f"Calls submitted and waited on one at a time by {function}",
            f"{evidence}: each started after the previous ended (the ray.get-in-a-loop "
            "pattern)" + (f". One of them: call {one}" if parents > 1 else ""),
            "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
            "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef on "
            "instead of its value (x = f.remote(x)): Ray chains them without a round trip "
            "through the caller",
            "one_at_a_time", function,
        ))  # fmt: skip
    return found


def _serializing_actors(tally: Tally, span: float) -> list[Finding]:
    """One actor running the work back to back while the rest of the run idles."""
    if span <= 0:
        return []
    total_busy = math.fsum(math.fsum(a.durations) for a in tally.functions.values())
    found = []
    for actor_id, run in tally.actors.items():
        if run.calls < SERIAL_MIN_CHILDREN or run.overlapped:
            continue
        share = run.busy / span
        mean_gap = run.gaps / (run.calls - 1)
        others = max(total_busy - run.busy, 0.0) / span  # processes busy on average
        if share < SERIAL_ACTOR_SHARE or others >= 1.0:
            continue
        if mean_gap > max(SERIAL_GAP_S, 0.1 * run.busy / run.calls):
            continue
        owner = run.function.rsplit(".", 1)[0]
        found.append(Finding(
            f"One actor serializes the work: {owner} ({actor_id[:12]})",
            f"its {run.calls} calls ran back to back (mean gap {mean_gap * 1000:.1f} ms) and "
            f"kept it busy {share:.0%} of the run, while all other calls together kept "
            f"{others:.1f} processes busy on average",
            "spread the work over several actors (ray.util.ActorPool), move stateless work "
            "into tasks, or let calls that wait on I/O overlap (async methods, "
            "max_concurrency)",
            "serializing_actor", owner,
        ))  # fmt: skip
    return found


def _other_findings(tally: Tally) -> list[Finding]:
    found = []
    if tally.busy:
        ratio, function = tally.busiest
        found.append(Finding(
            f"CPU oversubscription: {function}",
            f"{tally.busy} call(s) kept more than one CPU busy (up to {ratio:.1f} CPUs: their "
            "process's CPU time over their wall time): a library's threads, on a node where "
            "Ray counts each task as the CPUs it asked for (1 by default)",
            "limit the library's threads to the CPUs asked for (OMP_NUM_THREADS, "
            "MKL_NUM_THREADS, torch.set_num_threads) or ask for as many CPUs (num_cpus=)",
            "cpu_oversubscription", function,
        ))  # fmt: skip
    retried = sorted(
        ((a.retries, f) for f, a in tally.functions.items() if a.retries), reverse=True
    )
    if retried:
        names = ", ".join(f"{f} ({count})" for count, f in retried[:5])
        more = f" and {len(retried) - 5} more" if len(retried) > 5 else ""
        found.append(Finding(
            f"Retries hide flaky functions: {retried[0][1]}"
            + (f" and {len(retried) - 1} more" if len(retried) > 1 else ""),
            f"{sum(c for c, _ in retried)} call(s) succeeded only after a retry: {names}{more}",
            "find why the first attempts fail: open_session().calls(function=..., "
            "status='error') and their tracebacks (or raytrace-kit events --status error)",
            "flaky_retries", retried[0][1],
        ))  # fmt: skip
    return found


def _deaths(session: Session, tally: Tally) -> list[Finding]:
    """Why the processes of calls without an end died, from Ray's records.

    Each row gets ``state`` (``died``, or ``running``: its process is alive) and
    ``cause``; the dead get findings.
    """
    if not tally.interrupted_count:
        return []
    logs = find_ray_logs(session.root)
    rows = tally.interrupted
    deaths = worker_deaths(logs, (row["worker_id"] for row in rows)) if logs else {}
    by_kind: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for row in rows:
        death = deaths.get(row["worker_id"] or "")
        if death is not None:  # weighed against the memory its process held
            death = replace(death, held=row.get("rss_start_bytes"))
        running = death is None and still_running(row["pid"], row["started"])
        row["state"] = "running" if running else "died"
        row["cause"] = death.cause if death else ("still running, no end yet" if running else None)
        row["exit_type"] = death.exit_type if death else None
        row["fix"] = death.fix if death else None
        if not running:  # one finding per cause: a small process killed is not a big one
            key = (death.kind, death.little_memory) if death else ("unknown", False)
            by_kind.setdefault(key, []).append(row)
    found = []
    for (kind, _), group in by_kind.items():
        functions = ", ".join(sorted({row["function"] for row in group}))
        title, evidence, fix = death_finding(kind, len(group), functions, group[0], logs)
        found.append(Finding(title, evidence, fix, f"death_{kind}", functions))
    return found


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
    tally = Tally(start, end, waited=driver.wanted)
    line = StartLine()
    for files in distinct_processes(session.files):
        tally.process(iter_calls(files, line), line)
    span = seconds(tally.last) - seconds(tally.first) if tally.last else 0.0
    tally.interrupted.sort(key=lambda i: i["started"])
    deaths = _deaths(session, tally)
    running = sum(row.get("state") == "running" for row in tally.interrupted)
    slowest, spreads = _slowest(tally, span)
    overview = {
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
        "source": str(session.root),
        "files": len(session.files),
    }
    return Report(
        overview=overview,
        failures=_failures(tally),
        interrupted=tally.interrupted,
        slowest=slowest,
        memory=_memory(tally),
        findings=[
            *driver.findings(tally.waited),
            *_tiny_tasks(tally),
            *_stragglers(tally),
            *_one_at_a_time(tally),
            *_serializing_actors(tally, span),
            *tally.leaks,
            *deaths,
            *_other_findings(tally),
        ],
        charts=_charts(tally, span, spreads),
        driver=driver.overview() if driver.runs or driver.waits else {},
    )


def _charts(tally: Tally, span: float, spreads: list[dict[str, Any]]) -> dict[str, Any]:
    """What the pictures draw: each process's lane over time, each function's spread."""
    rule = f"at least {STRAGGLER_RATIO:g}x its median and {STRAGGLER_EXCESS_S:g} s over it"
    if not tally.last:
        return {"span_s": 0.0, "lanes": [], "lanes_not_drawn": 0, "spreads": spreads,
                "straggler_rule": rule}  # fmt: skip
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
