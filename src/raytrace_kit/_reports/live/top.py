"""What ``raytrace-kit top`` shows: the nodes' merged live view (``top_merge.py``), read.

:class:`TopView` is the view as data; its headline and tables are the same in a terminal
(rich tables) and a notebook (escaped HTML).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from html import escape
from typing import Any

from raytrace_kit._html import card, table

__all__ = ["ROWS", "TopView", "renderable"]

ROWS = 15  # rows of each table shown (all are in to_dict())


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


# A table of tables: each laid out as it reads, a row's cells on one line (fmt: skip).
def sections(view: TopView) -> list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]:
    """The view's tables (title, columns, rows), each only when it has rows."""
    found: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]] = []
    found.append((
        "Functions", ("function", "running", "pending", "done", "failed", "p50", "p95"),
        [(f["function"], str(f["running"]), str(f["pending"]), str(f["done"]), str(f["failed"]),
          _seconds(f["p50_s"]), _seconds(f["p95_s"])) for f in view.functions[:ROWS]],
    ))  # fmt: skip
    if view.operators:
        found.append((
            "Ray Data operators (their UDFs' batches)",
            ("operator", "in flight", "done", "failed", "p50", "batches/s"),
            [(o["operator"], str(o["in_flight"]), str(o["done"]), str(o["failed"]),
              _seconds(o["p50_s"]), "-" if o["per_s"] is None else f"{o['per_s']:.1f}")
             for o in view.operators[:ROWS]],
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
