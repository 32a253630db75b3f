"""How a :class:`~raytrace_kit.Report` looks: rich text for terminals, HTML for notebooks.

Both renderings are built from one list of sections (title, columns, rows), so the
terminal and the notebook always show the same things; the HTML adds the pictures
(``charts.py``) between the findings and the tables.
"""

from __future__ import annotations

import html
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from raytrace_kit._html import card, cell_name, page, pre, table
from raytrace_kit._reports.explain.frame_locals import traceback_with_locals
from raytrace_kit._reports.run.charts import pictures
from raytrace_kit._reports.run.data_findings import data_section

if TYPE_CHECKING:
    from raytrace_kit._reports.run.sections import Report

__all__ = ["driver_line", "html_card", "html_page", "sections", "stack_text", "text"]

# A table: its title, columns and rows, and what is shown under it (caption, text).
Section = tuple[str, tuple[str, ...], list[tuple[str, ...]], list[tuple[str, str]]]


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MiB"


def headline(report: Report) -> str:
    o = report.overview
    if not o["calls"]:
        return (
            f"no calls in {o.get('files', 0)} event file(s) of {o.get('source', '?')}: no "
            "debuggable call ran in that window, or these are not raytrace_kit event files"
        )
    failed = f"{o['failed']} failed"
    if o.get("failed_tasks") is not None and o["failed_tasks"] != o["failed"]:
        failed += f" ({o['failed_tasks']} tasks failed in the end)"
    running = f", {o['running']} still running" if o.get("running") else ""
    return (
        f"{o['calls']} calls, {failed}, {o['interrupted']} interrupted{running}, "
        f"{o['retried']} retries; {o['nodes']} node(s), {o['processes']} process(es), "
        f"{o['span_s']:.3f} s"
    )


def driver_line(report: Report) -> str:
    """What the driver did: each run, its end, and how long it blocked (empty without one)."""
    driver = report.driver
    if not driver:
        return ""
    said = []
    for run in driver.get("runs", []):
        ended = (
            "still running, or killed" if run.get("duration_s") is None
            else f"ran {run['duration_s']:.2f} s, exit status {run.get('exit_status', '?')}"
        )  # fmt: skip
        if run.get("error_type"):
            ended += f" ({run['error_type']})"
        said.append(f"{run.get('script') or '?'} (pid {run.get('pid')}): {ended}")
    runs = "; ".join(said) or "no run record"
    total = sum(run.get("duration_s") or 0.0 for run in driver.get("runs", []))
    share = f" ({driver['blocked_s'] / total:.0%} of its run)" if total else ""
    return (
        f"{runs}; it blocked {driver.get('blocked_s', 0.0):.2f} s{share} in "
        f"{driver.get('waits', 0)} ray.get/ray.wait call(s)"
    )


_TRACE_LINES, _LINE_CHARS = 60, 300  # a traceback shown: its last lines, each this long
_LISTED = 20  # rows of the in-flight sections shown (all are in to_dict())
_STACKS = 5  # stuck calls whose stacks are shown
_QUEUE_SHOWN_S = 0.1  # functions whose calls waited this long in queue, at most


def _clock(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%H:%M:%S.%f")[:12]


def stack_text(stack: list[list[Any]], frames: int = 12) -> str:
    """A stack's frames as a traceback prints them, outermost first (cells as In [n])."""
    lines = []
    for frame in stack[-frames:]:
        filename, number, function = frame[0], frame[1], frame[2]
        cell = cell_name(str(filename))
        place = f"Cell {cell}" if cell is not None else f'File "{filename}"'
        lines.append(f"  {place}, line {number}, in {function}")
        if len(frame) > 3 and frame[3]:
            lines.append(f"    {frame[3]}")
    return "\n".join(lines)


def _shown(trace: str, frames_locals: list[Any] | None = None) -> str:
    """A traceback as the report shows it: its frames' locals under them, its last lines."""
    trace = traceback_with_locals(trace, frames_locals)
    lines = [
        line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 3] + "..."
        for line in trace.rstrip().splitlines()
    ]
    if len(lines) > _TRACE_LINES:
        lines = [f"... ({len(lines) - _TRACE_LINES} lines above)", *lines[-_TRACE_LINES:]]
    return "\n".join(lines)


def sections(report: Report) -> list[Section]:
    """The report's tables, each only when it has rows."""
    found: list[Section] = []
    if report.failures:
        found.append((
            "Failures", ("function", "error", "count", "nodes", "first (UTC)", "last (UTC)"),
            [(f["function"], f["error_type"], str(f["count"]), str(len(f["nodes"])),
              f["first"][11:23], f["last"][11:23]) for f in report.failures],
            _tracebacks(report),
        ))  # fmt: skip
    if report.stuck:
        found.append((
            "Calls reported stuck (they ran past their stuck_after)",
            ("function", "call", "ran", "where", "waiting in", "then"),
            [(s["function"], s["call_id"], f"{s['running_s']:.1f}s", s["where"] or "?",
              s["waiting_in"] or "", s["outcome"]) for s in report.stuck],
            [(f"{s['function']} (call {s['call_id']}), its stack when last reported:",
              stack_text(s["stack"])) for s in report.stuck if s["stack"]][:_STACKS],
        ))  # fmt: skip
    if report.interrupted:
        found.append((
            "Calls without an end (their process died, or still runs)",
            ("function", "node", "pid", "started (UTC)", "rss at start", "why (Ray's records)"),
            [(i["function"], (i["node_id"] or "?")[:12], str(i["pid"]), i["started"][11:23],
              _mib(i["rss_start_bytes"]), i.get("cause") or "no record")
             for i in report.interrupted], [],
        ))  # fmt: skip
    if report.never_started:
        found.append((
            "Submitted, never started (by the end of the records)",
            ("function", "submitted (UTC)", "where", "task"),
            [(n["function"], _clock(n["submitted"]), n["site"] or "?", (n["task_id"] or "")[:16])
             for n in report.never_started[:_LISTED]], [],
        ))  # fmt: skip
    queued = [q for q in report.queued if q["max_s"] >= _QUEUE_SHOWN_S][:_LISTED]
    if queued:
        found.append((
            "Time in queue (from .remote() to the call's start)",
            ("function", "calls", "p50", "p95", "max"),
            [(q["function"], str(q["count"]), f"{q['p50_s']:.3f}s", f"{q['p95_s']:.3f}s",
              f"{q['max_s']:.3f}s") for q in queued], [],
        ))  # fmt: skip
    sites = report.driver.get("sites")
    if sites:
        found.append((
            "Where the driver waited (ray.get / ray.wait in its code)",
            ("where", "in", "call", "times", "blocked", "longest"),
            [(s["where"], s["function"], s["call"], str(s["count"]), f"{s['blocked_s']:.2f}s",
              f"{s['longest_s']:.2f}s") for s in sites], [],
        ))  # fmt: skip
    if report.slowest:
        found.append((
            _top("Slowest functions", len(report.slowest), report.overview.get("functions")),
            ("function", "calls", "p50", "p95", "max", "total", "share"),
            [(s["function"] + (f" ({s['hot_line']})" if s.get("hot_line") else ""),
              str(s["count"]), f"{s['p50_s']:.3f}s", f"{s['p95_s']:.3f}s",
              f"{s['max_s']:.3f}s", f"{s['total_s']:.2f}s", f"{s['share']:.0%}")
             for s in report.slowest], [],
        ))  # fmt: skip
    if report.data_pipeline:
        found.append(data_section(report.data_pipeline))
    if report.memory:
        found.append((
            _top("Memory per call", len(report.memory), report.overview.get("functions")),
            ("function", "largest growth", "largest RSS-SHR"),
            [(m["function"], _mib(m["max_growth_bytes"]), _mib(m["max_private_bytes"]))
             for m in report.memory], [],
        ))  # fmt: skip
    return found


def _top(title: str, shown: int, of: int | None) -> str:
    return f"{title} (the top {shown} of {of})" if of and of > shown else title


def _tracebacks(report: Report) -> list[tuple[str, str]]:
    return [
        (
            f"{f['function']} ({f['error_type']}), the latest:",
            _shown(f["traceback"], f.get("frames_locals")),
        )
        for f in report.failures
        if f["traceback"]
    ]


def text(report: Report) -> str:
    """The report for a terminal (rich tables, no colours)."""
    from rich.console import Console  # noqa: PLC0415 -- rich loads on first render

    with open(os.devnull, "w") as sink:
        console = Console(
            width=110, record=True, file=sink, color_system=None, force_jupyter=False
        )  # not Jupyter: in a kernel rich would display the text as it prints
        _print(console, report)
        return console.export_text()


def _print(console: Any, report: Report) -> None:
    from rich.markup import escape  # noqa: PLC0415 -- rich loads on first render
    from rich.table import Table  # noqa: PLC0415

    console.print(f"[bold]Run report[/bold]: {escape(headline(report))}", soft_wrap=True)
    if report.driver:
        console.print(f"[bold]Driver[/bold]: {escape(driver_line(report))}", soft_wrap=True)
    if report.findings:
        console.print("\n[bold]Findings[/bold]")
        for finding in report.findings:  # soft-wrapped: one line each, whole for grep
            title, evidence = escape(finding.title), escape(finding.evidence)
            console.print(f"- [bold]{title}[/bold]: {evidence}", soft_wrap=True)
            console.print(f"  Fix: {finding.fix}", markup=False, highlight=False, soft_wrap=True)
    for title, columns, rows, under in sections(report):
        shown = Table(title=title, title_justify="left")
        for column in columns:
            shown.add_column(column)
        for row in rows:
            shown.add_row(*(escape(cell) for cell in row))
        console.print(shown)
        for caption, trace in under:  # tracebacks, stacks: under their table
            console.print(caption, markup=False, highlight=False, style="bold")
            console.print(trace, markup=False, highlight=False)


def html_card(report: Report) -> str:
    """The report for a notebook: its pictures, the same sections as HTML tables, escaped."""
    parts: list[str] = []
    if report.driver:
        parts.append(f"<div><b>Driver</b>: {html.escape(driver_line(report))}</div>")
    if report.findings:
        items = "".join(
            f"<li><b>{html.escape(f.title)}</b>: {html.escape(f.evidence)}<br>"
            f"<i>Fix:</i> {html.escape(f.fix)}</li>"
            for f in report.findings
        )
        parts.append(f"<div><b>Findings</b></div><ul>{items}</ul>")
    parts.extend(pictures(report.charts))
    for title, columns, rows, under in sections(report):
        parts.append(f"<div><b>{html.escape(title)}</b></div>")
        parts.append(table(columns, rows))
        for caption, trace in under:
            parts.append(f"<div>{html.escape(caption)}</div>{pre(trace)}")
    return card("Run report", headline(report), *parts)


def html_page(report: Report) -> str:
    """One self-contained page (no scripts, no network, inline SVG) for ``save_html()``."""
    return page("raytrace_kit run report", html_card(report))
