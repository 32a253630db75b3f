"""``report()``: a run's answers: what failed and where, what died, where time and memory went.

Sections appear only when they have something to say. Findings each carry their evidence
and a fix, from the debugging method of Ray's guides: tasks too small, calls submitted and
waited on one at a time, CPU oversubscription, retries hiding a flaky function, calls cut
off by a dying process. ``str()`` renders for a terminal (rich), ``_repr_html_()`` for
notebooks, ``to_dict()`` for machines, ``save_html()`` one file that renders offline.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._reports.calls import Call
from raytrace_kit._reports.session import Session, open_session

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["Finding", "Report", "report"]

TINY_SECONDS = 0.010  # a median call shorter than this: scheduling costs more than the work
TINY_MIN_CALLS = 20
SERIAL_MIN_CHILDREN = 5
LEAK_MIN_CALLS = 5  # a process whose RSS rose over at least this many calls in a row...
LEAK_MIN_BYTES = 32 * 2**20  # ...by at least this much in all: the leak signature


@dataclass(frozen=True)
class Finding:
    """One problem the records show: what, the evidence, and the fix."""

    title: str
    evidence: str
    fix: str


@dataclass
class Report:
    """The answers about one run (see :func:`report`)."""

    overview: dict[str, Any]
    failures: list[dict[str, Any]] = field(default_factory=list)
    interrupted: list[dict[str, Any]] = field(default_factory=list)
    slowest: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain data (JSON-ready)."""
        data = asdict(self)
        data["findings"] = [asdict(f) for f in self.findings]
        return data

    def _render(self, console: Console) -> None:
        o = self.overview
        console.print(
            f"[bold]Run report[/bold]: {o['calls']} calls, {o['failed']} failed, "
            f"{o['interrupted']} interrupted, {o['retried']} retries; {o['nodes']} node(s), "
            f"{o['processes']} process(es), {o['span_s']:.3f} s"
        )
        if self.findings:
            console.print("\n[bold]Findings[/bold]")
            for finding in self.findings:
                title, evidence = escape(finding.title), escape(finding.evidence)
                console.print(f"- [bold]{title}[/bold]: {evidence}")
                console.print(f"  Fix: {finding.fix}", markup=False, highlight=False)
        self._render_failures(console)
        self._render_tables(console)

    def _render_failures(self, console: Console) -> None:
        if not self.failures:
            return
        table = _table("Failures", ("function", "error", "count", "nodes", "first", "last"))
        for f in self.failures:
            table.add_row(
                escape(f["function"]), escape(f["error_type"]), str(f["count"]),
                str(len(f["nodes"])), f["first"][11:23], f["last"][11:23],
            )  # fmt: skip
        console.print(table)
        for f in self.failures:
            if f["traceback"]:
                name, error = escape(f["function"]), escape(f["error_type"])
                console.print(f"[bold]{name}[/bold] ({error}), one of them:")
                console.print(f["traceback"].rstrip(), markup=False, highlight=False)

    def _render_tables(self, console: Console) -> None:
        if self.interrupted:
            table = _table(
                "Interrupted calls (their process died)",
                ("function", "node", "pid", "started", "rss at start"),
            )
            for i in self.interrupted:
                table.add_row(
                    escape(i["function"]), (i["node_id"] or "?")[:12], str(i["pid"]),
                    i["started"][11:23], _mib(i["rss_start_bytes"]),
                )  # fmt: skip
            console.print(table)
        if self.slowest:
            table = _table(
                "Slowest functions", ("function", "calls", "p50", "p95", "max", "total", "share")
            )
            for s in self.slowest:
                table.add_row(
                    escape(s["function"]), str(s["count"]), f"{s['p50_s']:.3f}s",
                    f"{s['p95_s']:.3f}s", f"{s['max_s']:.3f}s", f"{s['total_s']:.2f}s",
                    f"{s['share']:.0%}",
                )  # fmt: skip
            console.print(table)
        if self.memory:
            table = _table("Memory per call", ("function", "largest growth", "largest RSS-SHR"))
            for m in self.memory:
                growth, private = _mib(m["max_growth_bytes"]), _mib(m["max_private_bytes"])
                table.add_row(escape(m["function"]), growth, private)
            console.print(table)

    def __str__(self) -> str:
        from rich.console import Console  # noqa: PLC0415 -- rich loads on first render

        console = Console(width=110, record=True, file=open(os.devnull, "w"), color_system=None)  # noqa: SIM115
        self._render(console)
        return console.export_text()

    def _repr_html_(self) -> str:
        from rich.console import Console  # noqa: PLC0415

        console = Console(width=110, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        self._render(console)
        return console.export_html(inline_styles=True)

    def save_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as one self-contained HTML file (renders offline)."""
        target = Path(path)
        target.write_text(self._repr_html_(), encoding="utf-8")
        return target


def escape(text: str) -> str:
    """Text shown as is by rich (no markup: ``[x]`` stays ``[x]``)."""
    from rich.markup import escape as rich_escape  # noqa: PLC0415 -- rich on first render

    return rich_escape(text)


def _table(title: str, columns: tuple[str, ...]) -> Table:
    from rich.table import Table  # noqa: PLC0415 -- rich loads on first render

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    return table


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MiB"


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _failures(calls: list[Call]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[Call]] = defaultdict(list)
    for call in calls:
        if call.status == "error":
            groups[(call.function, call.error_type or "?")].append(call)
    return [
        {
            "function": function,
            "error_type": error_type,
            "count": len(group),
            "first": group[0].ended or group[0].started,
            "last": group[-1].ended or group[-1].started,
            "traceback": group[-1].traceback,
            "task_ids": sorted({c.task_id for c in group if c.task_id}),
            "nodes": sorted({c.node_id for c in group if c.node_id}),
        }
        for (function, error_type), group in sorted(groups.items(), key=lambda g: -len(g[1]))
    ]


def _slowest(calls: list[Call], span: float) -> list[dict[str, Any]]:
    by_function: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        if call.duration_s is not None:
            by_function[call.function].append(call.duration_s)
    rows: list[dict[str, Any]] = []
    for function, durations in by_function.items():
        durations.sort()
        total = sum(durations)
        rows.append({
            "function": function,
            "count": len(durations),
            "p50_s": statistics.median(durations),
            "p95_s": durations[min(len(durations) - 1, int(0.95 * len(durations)))],
            "max_s": durations[-1],
            "total_s": total,
            "share": total / span if span > 0 else 0.0,
        })  # fmt: skip
    rows.sort(key=lambda r: -r["total_s"])
    return rows[:10]


def _memory(calls: list[Call]) -> list[dict[str, Any]]:
    growth: dict[str, int] = defaultdict(int)
    private: dict[str, int] = defaultdict(int)
    for call in calls:
        if call.rss_growth_bytes is not None:
            growth[call.function] = max(growth[call.function], call.rss_growth_bytes)
        if call.rss_minus_shr_end_bytes is not None:
            private[call.function] = max(private[call.function], call.rss_minus_shr_end_bytes)
    rows = [
        {"function": f, "max_growth_bytes": growth.get(f), "max_private_bytes": private.get(f)}
        for f in sorted(set(growth) | set(private), key=lambda f: -growth.get(f, 0))
    ]
    return rows[:10]


def _tiny_tasks(calls: list[Call]) -> list[Finding]:
    durations: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        if call.duration_s is not None and call.kind == "task":
            durations[call.function].append(call.duration_s)
    return [
        Finding(
            f"Tasks too small: {function}",
            f"{len(values)} calls, median {statistics.median(values) * 1000:.2f} ms: Ray's cost "
            "of scheduling a task (about a millisecond) outweighs the work",
            "batch the work: one task per chunk of items instead of one per item",
        )
        for function, values in durations.items()
        if len(values) >= TINY_MIN_CALLS and statistics.median(values) < TINY_SECONDS
    ]


def _one_at_a_time(calls: list[Call]) -> list[Finding]:
    children: dict[str, list[Call]] = defaultdict(list)
    for call in calls:  # local mode runs calls one at a time by design: not a finding
        if call.parent_call_id and call.ended and call.mode != "local":
            children[call.parent_call_id].append(call)
    names = {c.call_id: c.function for c in calls}
    found = []
    for parent, kids in children.items():
        if len(kids) < SERIAL_MIN_CHILDREN:
            continue
        kids.sort(key=lambda c: c.started)
        if all(
            _seconds(later.started) >= _seconds(earlier.ended or earlier.started)
            for earlier, later in itertools.pairwise(kids)
        ):
            found.append(Finding(
                f"Calls submitted and waited on one at a time by {names.get(parent, parent)}",
                f"its {len(kids)} calls never overlapped: each started after the previous "
                "ended (the ray.get-in-a-loop pattern)",
                "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
                "xs]; ray.get(refs)",
            ))  # fmt: skip
    return found


def _leaks(calls: list[Call]) -> list[Finding]:
    """Processes whose memory grows call after call: the leak signature."""
    by_process: dict[tuple[str | None, int | None], list[Call]] = defaultdict(list)
    for call in calls:
        if call.rss_end_bytes is not None and call.ended:
            by_process[(call.node_id, call.pid)].append(call)
    found = []
    for (node, pid), ordered in by_process.items():
        ordered.sort(key=lambda c: c.ended or "")
        run: list[Call] = ordered[:1]
        best: list[Call] = []
        for earlier, later in itertools.pairwise(ordered):
            if (later.rss_end_bytes or 0) > (earlier.rss_end_bytes or 0):
                run.append(later)
            else:
                run = [later]
            if len(run) > len(best):
                best = list(run)
        if len(best) < LEAK_MIN_CALLS:
            continue
        grown = (best[-1].rss_end_bytes or 0) - (
            best[0].rss_start_bytes or best[0].rss_end_bytes or 0
        )
        if grown < LEAK_MIN_BYTES:
            continue
        functions = sorted({c.function for c in best})
        found.append(Finding(
            f"Memory grows call after call: pid {pid} on node {(node or '?')[:12]}",
            f"RSS rose over {len(best)} calls in a row, by {grown / 2**20:.0f} MiB in all, in "
            f"calls of {', '.join(functions)}: something keeps what each call makes",
            "profile that actor for its whole life: @debuggable(profile='memray', "
            "profile_scope='actor'), then look at what is still allocated at the end",
        ))  # fmt: skip
    return found


def _other_findings(calls: list[Call]) -> list[Finding]:
    found = []
    busy = [c for c in calls if c.cpu_s and c.duration_s and c.cpu_s > 1.5 * c.duration_s]
    if busy:
        worst = max(busy, key=lambda c: (c.cpu_s or 0) / (c.duration_s or 1))
        found.append(Finding(
            f"CPU oversubscription: {worst.function}",
            f"{len(busy)} call(s) used more CPU time than wall time (up to "
            f"{(worst.cpu_s or 0) / (worst.duration_s or 1):.1f}x): several threads each",
            "limit the library's threads (OMP_NUM_THREADS) or ask for as many CPUs (num_cpus=)",
        ))  # fmt: skip
    retried: dict[str, int] = defaultdict(int)
    for call in calls:
        if call.status == "ok" and (call.attempt or 0) > 0:
            retried[call.function] += 1
    found.extend(
        Finding(
            f"Retries hide a flaky function: {function}",
            f"{count} call(s) succeeded only after a retry",
            "find why the first attempts fail: open_session().calls(function=...) and their "
            "tracebacks",
        )
        for function, count in retried.items()
    )
    interrupted = [c for c in calls if c.status == "interrupted"]
    if interrupted:
        found.append(Finding(
            "Processes died during calls",
            f"{len(interrupted)} call(s) never ended (see 'Interrupted calls'): most often the "
            "OOM killer (exit 137) or a native crash (exit 139)",
            "compare their rss at start with the node's memory; give tasks more memory or run "
            "fewer at once",
        ))  # fmt: skip
    return found


def report(source: str | os.PathLike[str] | Session | None = None) -> Report:
    """The answers about a run: overview, failures, interrupted calls, time, memory, findings.

    Args:
        source: What :func:`raytrace_kit.open_session` takes, or a session.
    """
    session = source if isinstance(source, Session) else open_session(source)
    calls = session.calls()
    stamps = [s for c in calls for s in (c.started, c.ended) if s]
    span = _seconds(max(stamps)) - _seconds(min(stamps)) if stamps else 0.0
    overview = {
        "calls": len(calls),
        "failed": sum(c.status == "error" for c in calls),
        "interrupted": sum(c.status == "interrupted" for c in calls),
        "retried": sum((c.attempt or 0) > 0 for c in calls),
        "nodes": len({c.node_id for c in calls if c.node_id}),
        "processes": len({(c.node_id, c.pid) for c in calls}),
        "span_s": span,
    }
    failures = _failures(calls)
    interrupted = [
        {k: getattr(c, k) for k in ("function", "node_id", "pid", "started", "rss_start_bytes")}
        for c in calls
        if c.status == "interrupted"
    ]
    return Report(
        overview=overview,
        failures=failures,
        interrupted=interrupted,
        slowest=_slowest(calls, span),
        memory=_memory(calls),
        findings=[
            *_tiny_tasks(calls),
            *_one_at_a_time(calls),
            *_leaks(calls),
            *_other_findings(calls),
        ],
    )
