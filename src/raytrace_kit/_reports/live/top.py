"""What ``raytrace-kit top`` shows: the nodes' live views merged, as text, HTML and data.

Each node sends counts per function, a histogram of durations, its oldest calls in
flight, its latest failures and processes (``aggregates.py``); :func:`merge` adds them up. A
function's pending calls are those submitted and not yet started (their ``call.submit``
and ``call.start`` may be on two nodes: counts add up where ids would not have to
travel); stragglers are calls, running or finished, far beyond their function's median
(the report's rule: ``rules.straggler_floor``).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from html import escape
from typing import Any

from raytrace_kit._html import card, table
from raytrace_kit._reports.live.aggregates import medians_of, percentile
from raytrace_kit._reports.live.samples import merge_hot_lines
from raytrace_kit._reports.run.rules import straggler_floor

__all__ = ["TopView", "merge"]

_ROWS = 15  # rows of each table shown (all are in to_dict())


@dataclass
class TopView:
    """One refresh of the live view of a cluster (see :func:`raytrace_kit.top`)."""

    source: str
    time: float
    functions: list[dict[str, Any]] = field(default_factory=list)
    oldest: list[dict[str, Any]] = field(default_factory=list)
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0
    events_per_s: float | None = None
    behind_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    medians: dict[str, float] = field(default_factory=dict)
    # Ray Data's operators whose UDFs ran: batches in flight, done, failed, per second.
    operators: list[dict[str, Any]] = field(default_factory=list)
    # The failures alike (one function, one error type) once: how many, and the latest.
    failure_groups: list[dict[str, Any]] = field(default_factory=list)
    # The lines most running samples are at so far (sample=), each with the call's function.
    hot_lines: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain data (JSON-ready)."""
        return asdict(self)

    def __str__(self) -> str:
        return text(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        return html(self)


def merge(
    source: str, states: list[dict[str, Any]], before: TopView | None, problems: list[str]
) -> TopView:
    """The nodes' views (``LiveTally.snapshot`` and the reader's own figures) as one."""
    totals: dict[str, list[Any]] = {}
    bins: dict[str, dict[int, int]] = {}
    flying: list[dict[str, Any]] = []
    finished: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    events = behind = 0
    operators: dict[str, str] = {}
    kinds: dict[tuple[str, str], list[Any]] = {}
    for state in states:
        operators.update(state.get("operators") or {})
        for function, error_type, count, latest in state.get("failure_kinds") or ():
            kind = kinds.setdefault((function, error_type), [0, latest])
            kind[0] += count
            if latest["ended"] > kind[1]["ended"]:
                kind[1] = latest
        events += state["events"]
        behind += state.get("behind", 0)
        for name, (running, submitted, started, done, failed, died, hist, slowest) in state[
            "functions"
        ].items():
            row = totals.setdefault(name, [0, 0, 0, 0, 0, 0, 0.0])
            for i, value in enumerate((running, submitted, started, done, failed, died)):
                row[i] += value
            row[6] = max([row[6], *(call["running_s"] for call in slowest)])
            merged = bins.setdefault(name, {})
            for k, count in hist.items():
                merged[k] = merged.get(k, 0) + count
            finished.extend(slowest)
        flying.extend(state["oldest"])
        failures.extend(state["failures"])
        nodes.append(_node_row(state))
    medians = medians_of(bins)
    view = TopView(source=source, time=max((s["time"] for s in states), default=0.0))
    view.functions = sorted(
        (_function_row(name, row, bins[name]) for name, row in totals.items()),
        key=lambda r: (-(r["running"] + r["pending"]), r["function"]),
    )
    view.oldest = sorted(flying, key=lambda c: -c["running_s"])[:_ROWS]
    view.stragglers = _stragglers(flying, finished, medians)
    view.failures = sorted(failures, key=lambda f: f["ended"], reverse=True)[:_ROWS]
    view.nodes = sorted(nodes, key=lambda n: n["node_id"])
    view.events, view.behind_bytes, view.problems, view.medians = events, behind, problems, medians
    if before is not None and view.time > before.time:
        view.events_per_s = max(events - before.events, 0) / (view.time - before.time)
    view.operators = _operators(view, operators, before)
    view.hot_lines = merge_hot_lines(state.get("hot_lines") or [] for state in states)
    view.failure_groups = sorted(
        (
            {"function": f, "error_type": t, "count": n, "example": latest}
            for (f, t), (n, latest) in kinds.items()
        ),
        key=lambda g: g["example"]["ended"],
        reverse=True,
    )[:_ROWS]
    return view


def _operators(
    view: TopView, operators: dict[str, str], before: TopView | None
) -> list[dict[str, Any]]:
    """One row per Ray Data operator: its UDFs' batches in flight, done, failed, rate."""
    done_before = {row["operator"]: row["done"] for row in (before.operators if before else [])}
    elapsed = view.time - before.time if before is not None and view.time > before.time else 0
    rows: dict[str, dict[str, Any]] = {}
    for function in view.functions:
        operator = operators.get(function["function"])
        if operator is None or function["function"].endswith(".__init__"):
            continue
        row = rows.setdefault(operator, {
            "operator": operator, "functions": [], "in_flight": 0, "done": 0, "failed": 0,
            "p50_s": function["p50_s"], "per_s": None,
        })  # fmt: skip
        row["functions"].append(function["function"])
        row["in_flight"] += function["running"]
        row["done"] += function["done"]
        row["failed"] += function["failed"]
    for row in rows.values():
        if elapsed and row["operator"] in done_before:
            row["per_s"] = max(row["done"] - done_before[row["operator"]], 0) / elapsed
    return sorted(rows.values(), key=lambda r: r["operator"])


def _function_row(name: str, row: list[Any], bins: dict[int, int]) -> dict[str, Any]:
    running, submitted, started, done, failed, died, longest = row
    return {
        "function": name, "running": running, "pending": max(submitted - started, 0),
        "done": done, "failed": failed + died, "died": died,
        "p50_s": percentile(bins, 0.5), "p95_s": percentile(bins, 0.95),
        "max_s": longest if bins else None,
    }  # fmt: skip


def _node_row(state: dict[str, Any]) -> dict[str, Any]:
    processes = state["processes"]
    return {
        "node_id": state.get("node_id") or "?",
        "processes": len(processes),
        "rss_bytes": sum(p["rss_bytes"] or 0 for p in processes),
        "largest_rss_bytes": max((p["rss_bytes"] or 0 for p in processes), default=0),
        "running": sum(row[0] for row in state["functions"].values()),
        "reader_cpu": state.get("cpu_share"),
    }


def _stragglers(
    flying: list[dict[str, Any]], finished: list[dict[str, Any]], medians: dict[str, float]
) -> list[dict[str, Any]]:
    """Calls, running or finished, far beyond their function's median (the report's rule)."""
    found = []
    for call in [*flying, *finished]:
        median = medians.get(call["function"])
        if median is not None and call["running_s"] >= straggler_floor(median):
            found.append({**call, "median_s": median})
    found.sort(key=lambda c: -c["running_s"] / max(c["median_s"], 1e-6))
    return found[:_ROWS]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f}s"
    return f"{value:.3f}s" if value < 10 else f"{value:.1f}s"


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f} MiB"


def _clock(stamp: str) -> str:
    return stamp[11:23]


def headline(view: TopView) -> str:
    """The first line: where, when, how much, how fast."""
    moment = datetime.fromtimestamp(view.time or 0, timezone.utc).strftime("%H:%M:%S UTC")
    rate = "-" if view.events_per_s is None else f"{view.events_per_s:,.0f}"
    running = sum(f["running"] for f in view.functions)
    pending = sum(f["pending"] for f in view.functions)
    behind = (
        f", catching up ({view.behind_bytes / 2**20:.0f} MiB to read)" if view.behind_bytes else ""
    )
    return (
        f"{view.source}: {len(view.nodes)} node(s), {running} running, {pending} pending, "
        f"{view.events:,} events ({rate}/s), {moment}{behind}"
    )


def sections(view: TopView) -> list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]:
    """The view's tables (title, columns, rows), each only when it has rows."""
    found: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]] = []
    found.append((
        "Functions", ("function", "running", "pending", "done", "failed", "p50", "p95"),
        [(f["function"], str(f["running"]), str(f["pending"]), str(f["done"]), str(f["failed"]),
          _seconds(f["p50_s"]), _seconds(f["p95_s"])) for f in view.functions[:_ROWS]],
    ))  # fmt: skip
    if view.operators:
        found.append((
            "Ray Data operators (their UDFs' batches)",
            ("operator", "in flight", "done", "failed", "p50", "batches/s"),
            [(o["operator"], str(o["in_flight"]), str(o["done"]), str(o["failed"]),
              _seconds(o["p50_s"]), "-" if o["per_s"] is None else f"{o['per_s']:.1f}")
             for o in view.operators[:_ROWS]],
        ))  # fmt: skip
    if view.hot_lines:
        found.append((
            "Hottest lines (running samples so far)",
            ("line", "in", "for a call of", "samples", "share"),
            [(f"{os.path.basename(h['file'])}:{h['line']}", h["name"], h["function"] or "no call",
              f"{h['seconds']:.1f}s", f"{h['share']:.0%}") for h in view.hot_lines],
        ))  # fmt: skip
    if view.stragglers:
        found.append((
            "Stragglers (far beyond their function's median)",
            ("function", "state", "took", "median", "node", "pid", "where"),
            [(s["function"], s["state"], _seconds(s["running_s"]), _seconds(s["median_s"]),
              (s["node_id"] or "?")[:12], str(s["pid"]), s.get("where") or "")
             for s in view.stragglers],
        ))  # fmt: skip
    if view.oldest:
        found.append((
            "Oldest calls in flight", ("function", "age", "node", "pid", "task", "where"),
            [(c["function"], _seconds(c["running_s"]), (c["node_id"] or "?")[:12], str(c["pid"]),
              (c["task_id"] or "")[:16], c.get("where") or "") for c in view.oldest],
        ))  # fmt: skip
    if view.failure_groups:  # alike failures once: the latest, and how many
        found.append((
            "Latest failures", ("latest (UTC)", "function", "times", "node", "pid", "error"),
            [(_clock(g["example"]["ended"]), g["function"], str(g["count"]),
              (g["example"]["node_id"] or "?")[:12], str(g["example"]["pid"]),
              g["example"]["error"]) for g in view.failure_groups],
        ))  # fmt: skip
    elif view.failures:
        found.append((
            "Latest failures", ("time (UTC)", "function", "node", "pid", "error"),
            [(_clock(f["ended"]), f["function"], (f["node_id"] or "?")[:12], str(f["pid"]),
              f["error"]) for f in view.failures],
        ))  # fmt: skip
    found.append((
        "Nodes", ("node", "processes", "running", "memory (RSS)", "largest", "reader CPU"),
        [(n["node_id"][:12], str(n["processes"]), str(n["running"]), _mib(n["rss_bytes"]),
          _mib(n["largest_rss_bytes"]),
          "-" if n["reader_cpu"] is None else f"{n['reader_cpu']:.1%}") for n in view.nodes],
    ))  # fmt: skip
    return found


def renderable(view: TopView) -> Any:
    """The view as one rich renderable (what the terminal's live display redraws)."""
    from rich.console import Group  # noqa: PLC0415 -- rich loads on first render
    from rich.markup import escape  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    parts: list[Any] = [Text(headline(view), style="bold")]
    parts.extend(Text(f"! {problem}", style="yellow") for problem in view.problems)
    for title, columns, rows in sections(view):
        shown = Table(title=title, title_justify="left", expand=False)
        for column in columns:
            shown.add_column(column, overflow="fold")
        for row in rows:
            shown.add_row(*(escape(cell) for cell in row))
        parts.append(shown)
    return Group(*parts)


def text(view: TopView, width: int = 120) -> str:
    """The view for a terminal or a pipe (rich tables, no colours)."""
    from rich.console import Console  # noqa: PLC0415

    with open(os.devnull, "w") as sink:
        console = Console(
            width=width, record=True, file=sink, color_system=None, force_jupyter=False
        )
        console.print(renderable(view))
        return console.export_text()


def html(view: TopView) -> str:
    """The view for a notebook: the same tables, escaped."""
    parts = [f"<div>{escape(problem)}</div>" for problem in view.problems]
    for title, columns, rows in sections(view):
        parts.append(f"<div><b>{escape(title)}</b></div>")
        parts.append(table(columns, rows))
    return card("raytrace-kit top", headline(view), *parts)
