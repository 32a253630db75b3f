"""How a :class:`~raytrace_kit.StuckReport` reads: text for terminals, HTML for notebooks.

Both from one list of parts, most urgent first: deadlocks, calls that can never run,
calls stuck past their threshold, stragglers, what the drivers wait on, then the pending
calls grouped by why, and every call in flight.
"""

from __future__ import annotations

import html
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from raytrace_kit._html import card, pre, table
from raytrace_kit._reports.run.blocked import FIX as BLOCKED_FIX
from raytrace_kit._reports.run.render import stack_text
from raytrace_kit._reports.stuck.waitfor import DEADLOCK_FIX, Flight

if TYPE_CHECKING:
    from raytrace_kit._reports.stuck.report import StuckReport

__all__ = ["headline", "html_card", "text"]

SHOWN = 40  # calls listed in the table of calls in flight (all are in to_dict())
_STACK_FRAMES = 8  # a stack shown: its innermost frames
Part = tuple[str, list[str], list[str]]  # a title, its lines of text, the stacks under them


def headline(report: StuckReport) -> str:
    """One line: how many calls are in flight, and the worst of what was found."""
    running, pending = len(report.running), len(report.pending)
    worst = []
    if report.deadlocks:
        worst.append(f"{len(report.deadlocks)} deadlock(s)")
    if report.infeasible:
        worst.append(f"{len(report.infeasible)} call(s) no node can run")
    if report.stuck:
        worst.append(f"{len(report.stuck)} stuck call(s)")
    if report.stragglers:
        worst.append(f"{len(report.stragglers)} straggler(s)")
    if report.held_loops:
        worst.append(f"{len(report.held_loops)} event loop(s) held by a call")
    unmoved = report.unmoved()
    if unmoved:
        worst.append(f"{len(unmoved)} call(s) that have not moved")
    found = "; ".join(worst) if worst else "no deadlock, nothing infeasible, nothing stuck"
    return f"{running + pending} call(s) in flight ({running} running, {pending} pending): {found}"


def _place(flight: Flight) -> str:
    where = f" at {flight.where}" if flight.where else ""
    host = f" on node {flight.node_id[:12]}, pid {flight.pid}" if flight.node_id else ""
    verb = "submitted" if flight.state == "pending" else "now"
    return f"{flight.name()}, {flight.status()}{host}{where and f', {verb}{where}'}"


def _groups(report: StuckReport) -> list[tuple[str, int, str]]:
    """Pending calls by why: (kind, how many, the first one's words)."""
    counts = Counter(f.reason for f in report.pending)
    first: dict[str, str] = {}
    for flight in report.pending:
        first.setdefault(flight.reason, f"{flight.name()}: {flight.why}")
    return [(reason, count, first[reason]) for reason, count in counts.most_common()]


def _sampled(report: StuckReport, flight: Flight) -> str:
    """The line ``samples: in the last 10 s, ...`` under a call sampled lately (or nothing)."""
    found = report.sampled(flight)
    return f"\n     samples: {found['text']}" if found else ""


def parts(report: StuckReport) -> list[Part]:
    """The output's parts: (title, lines of text, stacks shown under them)."""
    said: set[str] = set()  # the calls a part named already: the unmoved part skips them
    found = _deadlocks(report, said)
    found.extend(_urgent(report, said))
    unmoved = [f for f in report.unmoved() if f.key not in said]
    if unmoved:
        found.append(
            (
                "Calls that have not moved (their recent samples at one line, not in ray.get)",
                [f"{_place(f)}{_sampled(report, f)}" for f in unmoved],
                [],
            )
        )
    found.extend(_waiting(report))
    return found


def _deadlocks(report: StuckReport, said: set[str]) -> list[Part]:
    """One part per deadlock: its calls in the cycle's order, and the fix."""
    found: list[Part] = []
    for number, cycle in enumerate(report.deadlocks, 1):
        lines = [
            f"{index}. {_place(f)}\n     {f.why}{_sampled(report, f)}"
            for index, f in enumerate(cycle, 1)
        ]
        said.update(f.key for f in cycle)
        lines.append(f"Fix: {DEADLOCK_FIX}.")
        title = f"Deadlock {number}: {len(cycle)} calls wait on each other"
        found.append((title, lines, [stack_text(f.stack, _STACK_FRAMES) for f in cycle if f.stack]))
    return found


def _urgent(report: StuckReport, said: set[str]) -> list[Part]:
    """The calls no node can run, the stuck ones, the stragglers: alike calls once."""
    found: list[Part] = []
    for title, which in (
        ("Calls no node can run (infeasible)", "infeasible"),
        ("Stuck calls (running past their stuck_after)", "stuck"),
        ("Stragglers (far beyond their function's usual duration)", "stragglers"),
    ):
        grouped = report.grouped(which)
        said.update(f.key for f in getattr(report, which))
        if grouped:
            found.append(
                (
                    title,
                    [
                        f"{_many(count)}{_place(f)}\n     {f.why}{_sampled(report, f)}"
                        for f, count in grouped
                    ],
                    [stack_text(f.stack, _STACK_FRAMES) for f, _ in grouped if f.stack],
                )
            )
    return found


def _waiting(report: StuckReport) -> list[Part]:
    """Event loops held by a call, threads waiting on calls, the pending calls by why."""
    found: list[Part] = []
    if report.held_loops:
        found.append(
            (
                "Event loops held by one call (an async def that blocks: the actor's other "
                "calls wait)",
                [_held(held) for held in report.held_loops],
                [stack_text(h["stack"], _STACK_FRAMES) for h in report.held_loops if h["stack"]],
            )
        )
    if report.waits:
        found.append(
            (
                "Threads outside calls, waiting on calls (a driver in ray.get)",
                [
                    f"{w['process']} pid {w['pid']}, thread {w['thread']}"
                    f"{' at ' + w['where'] if w['where'] else ''}: waiting in "
                    f"{w['waiting_in']} on {', '.join(w['on'][:3]) or str(w['refs']) + ' ref(s)'}"
                    for w in report.waits
                ],
                [],
            )
        )
    groups = _groups(report)
    if groups:
        found.append(
            (
                "Pending calls, by why",
                [f"{count} {reason}: e.g. {example}" for reason, count, example in groups],
                [],
            )
        )
    return found


def _many(count: int) -> str:
    """``19 calls like `` before an example of several alike calls; nothing for one."""
    return f"{count} calls like " if count > 1 else ""


def _held(held: dict[str, Any]) -> str:
    what = (held["function"] or "a callback that is no instrumented call").rsplit(".", 2)
    where = f" at {held['stack'][-1][0]}:{held['stack'][-1][1]}" if held["stack"] else ""
    return (
        f"{'.'.join(what[-2:])} (call {held['call_id'] or '?'}) has held its event loop for "
        f"{held['held_s']:.1f} s{where}, pid {held['pid']} on node {(held['node_id'] or '?')[:12]}"
        f"\n     Fix: {BLOCKED_FIX}"
    )


def _rows(report: StuckReport) -> list[tuple[str, ...]]:
    return [
        (
            f.state,
            f"{f.age_s:.1f}s",
            f.name() + (f" and {count - 1} more like it" if count > 1 else ""),
            (f.node_id or "")[:12],
            "" if f.pid is None else str(f.pid),
            _short_where(f.where),
            f.why,
        )
        for f, count in report.grouped("calls")[:SHOWN]
    ]


_COLUMNS = ("state", "age", "call", "node", "pid", "where", "why")


def _short_where(where: str | None) -> str:
    """``file.py:12`` of a ``/long/path/file.py:12`` (the full path is in to_dict())."""
    return "" if not where else os.path.basename(where)


def text(report: StuckReport) -> str:
    """The report for a terminal (rich, no colours)."""
    from rich import box  # noqa: PLC0415 -- rich loads on first render
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    with open(os.devnull, "w") as sink:
        console = Console(width=140, record=True, file=sink, color_system=None, force_jupyter=False)
        console.print(f"Stuck? {headline(report)}", markup=False, highlight=False, soft_wrap=True)
        for problem in report.problems:
            console.print(f"Not read: {problem}", markup=False, highlight=False, soft_wrap=True)
        for title, lines, stacks in parts(report):
            console.print(f"\n{title}", markup=False, highlight=False, style="bold")
            for line in lines:
                console.print(line, markup=False, highlight=False, soft_wrap=True)
            for stack in stacks:
                console.print(stack, markup=False, highlight=False, soft_wrap=True)
        if report.flights:
            shown = Table(title=_title(report), title_justify="left", box=box.SIMPLE)
            for column in _COLUMNS:
                shown.add_column(column, overflow="fold")
            for row in _rows(report):
                shown.add_row(*row)
            console.print(shown)
        return console.export_text()


def _title(report: StuckReport) -> str:
    more = len(report.grouped("calls")) - SHOWN
    suffix = f" (the oldest {SHOWN} kinds; {more} more in to_dict())" if more > 0 else ""
    return f"Calls in flight{suffix}"


def html_card(report: StuckReport) -> str:
    """The report for a notebook: the same parts, escaped."""
    shown: list[str] = []
    for problem in report.problems:
        shown.append(f"<div>Not read: {html.escape(problem)}</div>")
    for title, lines, stacks in parts(report):
        shown.append(f"<div><b>{html.escape(title)}</b></div>")
        shown.append(pre("\n".join(lines)))
        shown.extend(pre(stack) for stack in stacks)
    if report.flights:
        shown.append(f"<div><b>{html.escape(_title(report))}</b></div>")
        shown.append(table(_COLUMNS, _rows(report)))
    return card("Stuck?", f"{report.source}: {headline(report)}", *shown)
