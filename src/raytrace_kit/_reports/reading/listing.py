"""How lists of events and calls show: short, a table in notebooks, lines in IPython.

They are lists (of dicts, of :class:`Call`), so everything a list does works; only their
display is shorter than a list's: the first rows, and how many more.
"""

from __future__ import annotations

from typing import Any, cast

from raytrace_kit._html import card, table
from raytrace_kit._output.lines import readable
from raytrace_kit._output.schema import Call

__all__ = ["Calls", "Events"]

SHOWN = 20


class _Short:
    """The display of a list subclass: the first :data:`SHOWN` rows, and how many more."""

    title = ""
    noun = ""  # what one item is: "a list of <noun>"
    headers: tuple[str, ...] = ()

    def _items(self) -> list[Any]:
        return cast("list[Any]", self)  # every subclass is also a list

    def _cells(self, item: Any) -> tuple[str, ...]:
        raise NotImplementedError

    def _line(self, item: Any) -> str:
        return "  ".join(self._cells(item))

    def _repr_html_(self) -> str:
        items = self._items()
        parts = [table(self.headers, [self._cells(item) for item in items[:SHOWN]])]
        if len(items) > SHOWN:
            parts.append(f"<div>... and {len(items) - SHOWN} more (a list of {self.noun})</div>")
        return card(self.title, f"{len(items)} {self.title.lower()[:-1]}(s)", *parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if cycle:
            printer.text(f"{self.title}(...)")
            return
        items = self._items()
        lines = [f"{len(items)} {self.title.lower()[:-1]}(s), a list of {self.noun}:"]
        lines.extend(self._line(item) for item in items[:SHOWN])
        if len(items) > SHOWN:
            lines.append(f"... and {len(items) - SHOWN} more")
        printer.text("\n".join(lines))


class Events(_Short, list[dict[str, Any]]):  # _Short first: IPython looks it up by MRO
    """Events as a list of dicts, shown short: a table in notebooks, lines in IPython."""

    title, noun = "Events", "dicts"
    headers = ("time", "level", "event", "function", "outcome", "node", "pid")

    def _cells(self, item: Any) -> tuple[str, ...]:
        return _row(item)

    def _line(self, item: Any) -> str:
        return readable(item)


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


class Calls(_Short, list[Call]):
    """Calls as a list of :class:`Call`, shown short: a table in notebooks, lines in IPython."""

    title, noun = "Calls", "Call"
    headers = ("started", "function", "status", "seconds", "node", "pid", "call")

    def _cells(self, item: Any) -> tuple[str, ...]:
        return _call_row(item)


def _call_row(call: Call) -> tuple[str, ...]:
    status = call.status + (f" {call.error_type}" if call.error_type else "")
    seconds = "" if call.duration_s is None else f"{call.duration_s:.3f}"
    return (
        call.started[:26].replace("T", " "), call.function, status, seconds,
        (call.node_id or "")[:12], str(call.pid or ""), call.call_id,
    )  # fmt: skip
