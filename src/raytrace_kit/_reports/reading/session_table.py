"""The sessions listed: the table of ``raytrace-kit sessions`` and its first line.

Apart from the header line (``header.py``) so that ``session_list.py`` renders its own list
without importing what reads sessions.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING

from raytrace_kit._html import card, table
from raytrace_kit._reports.reading import running

if TYPE_CHECKING:
    from raytrace_kit._reports.reading.session_list import SessionList, SessionSummary

__all__ = [
    "PREFIX",
    "driver_shown",
    "plural",
    "sessions_html",
    "sessions_line",
    "sessions_table",
    "shown_time",
]

PREFIX = "raytrace-kit: "


def shown_time(when: datetime | None) -> str:
    """A time as the line shows it: this machine's local time, to the second."""
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S") if when is not None else "?"


def plural(n: int, noun: str) -> str:
    """``1 call``, ``2 calls``: a count and its noun."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def driver_shown(summary: SessionSummary) -> str:
    """``pipeline.py`` (``+N more`` drivers), or the pid: a script is known while it runs."""
    drivers = summary.drivers
    if not drivers:
        return ""
    script = summary.script
    first = running.shown_script(script) if script else f"pid {drivers[0].pid}"
    return first + (f" +{len(drivers) - 1} more" if len(drivers) > 1 else "")


def sessions_line(listing: SessionList) -> str:
    """The line ``raytrace-kit sessions`` prints first: what was found, and the default."""
    runs = sum(1 for s in listing if s.running)
    said = f"{PREFIX}{listing.root}: {plural(len(listing), 'session')} with kit records"
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
        driver_shown(summary),
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
