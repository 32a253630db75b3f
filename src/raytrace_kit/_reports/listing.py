"""How lists of events and calls show: short, a table in notebooks, lines in IPython.

They are lists (of dicts, of :class:`Call`), so everything a list does works; only their
display is shorter than a list's: the first rows, and how many more.
"""

from __future__ import annotations

from typing import Any

from raytrace_kit._html import card, table
from raytrace_kit._output.lines import readable
from raytrace_kit._reports.calls import Call

__all__ = ["Calls", "Events"]

SHOWN = 20


class Events(list[dict[str, Any]]):
    """Events as a list of dicts, shown short: a table in notebooks, lines in IPython."""

    shown = SHOWN

    def _repr_html_(self) -> str:
        rows = [_row(event) for event in self[: self.shown]]
        more = len(self) - len(rows)
        parts = [table(("time", "level", "event", "function", "outcome", "node", "pid"), rows)]
        if more > 0:
            parts.append(f"<div>... and {more} more (a list of dicts: index or filter it)</div>")
        return card("Events", f"{len(self)} event(s)", *parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if cycle:
            printer.text("Events(...)")
            return
        lines = [f"{len(self)} event(s), a list of dicts:"]
        lines.extend(readable(event) for event in self[: self.shown])
        if len(self) > self.shown:
            lines.append(f"... and {len(self) - self.shown} more")
        printer.text("\n".join(lines))


def _row(event: dict[str, Any]) -> tuple[str, ...]:
    outcome = ""
    if event.get("event") == "call.end":
        duration = event.get("duration_s")
        outcome = f"{event.get('status')}" + (
            f" {duration:.3f}s" if isinstance(duration, int | float) else ""
        )
        if event.get("error_type"):
            message = (str(event.get("error", "")).splitlines() or [""])[0]
            outcome += f" {event['error_type']}: {message}"
    return (
        str(event.get("timestamp", ""))[:26].replace("T", " "),
        str(event.get("level", "")),
        str(event.get("event", "")),
        str(event.get("function") or ""),
        outcome,
        str(event.get("node_id") or "")[:12],
        str(event.get("pid") or ""),
    )


class Calls(list[Call]):
    """Calls as a list of :class:`Call`, shown short: a table in notebooks, lines in IPython."""

    def _repr_html_(self) -> str:
        rows = [_call_row(call) for call in self[:SHOWN]]
        parts = [table(("started", "function", "status", "seconds", "node", "pid", "call"), rows)]
        if len(self) > SHOWN:
            parts.append(f"<div>... and {len(self) - SHOWN} more (a list of Call)</div>")
        return card("Calls", f"{len(self)} call(s)", *parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if cycle:
            printer.text("Calls(...)")
            return
        lines = [f"{len(self)} call(s), a list of Call:"]
        lines.extend("  ".join(_call_row(call)) for call in self[:SHOWN])
        if len(self) > SHOWN:
            lines.append(f"... and {len(self) - SHOWN} more")
        printer.text("\n".join(lines))


def _call_row(call: Call) -> tuple[str, ...]:
    status = call.status + (f" {call.error_type}" if call.error_type else "")
    seconds = "" if call.duration_s is None else f"{call.duration_s:.3f}"
    return (
        call.started[:26].replace("T", " "), call.function, status, seconds,
        (call.node_id or "")[:12], str(call.pid or ""), call.call_id,
    )  # fmt: skip
