"""``Explanation``: what an error means, its likely causes, what to check, and the fix."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from raytrace_kit._html import card, pre
from raytrace_kit._output.schema import Call
from raytrace_kit._reports.explain.frame_locals import traceback_with_locals

__all__ = ["Explanation", "reproduce"]


@dataclass(frozen=True)
class Explanation:
    """What an error means: ``what`` happened, likely ``causes``, what to ``check``, ``fix``.

    ``call`` is the failing call's record, when the session has it.
    """

    kind: str
    what: str
    causes: tuple[str, ...] = ()
    check: tuple[str, ...] = ()
    fix: tuple[str, ...] = ()
    call: Call | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def _sections(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return (("Likely causes", self.causes), ("Check", self.check), ("Fix", self.fix))

    def __str__(self) -> str:
        lines = [f"{self.kind}: {self.what}"]
        for title, items in self._sections():
            if items:
                lines.append(f"{title}:")
                lines.extend(f"  - {item}" for item in items)
        call = self.call
        if call is not None:
            where = f"node {(call.node_id or '?')[:12]}, pid {call.pid}"
            lines.append(f"The call: {call.function} ({call.status}, {where}, call {call.call_id})")
            if call.traceback:  # with its frames' locals under them, when recorded
                lines.append(traceback_with_locals(call.traceback, call.frames_locals).rstrip())
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``, not the fields."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        parts = [f"<div>{html.escape(self.what)}</div>"]
        for title, items in self._sections():
            if items:
                entries = "".join(f"<li>{html.escape(item)}</li>" for item in items)
                parts.append(f"<div><b>{title}</b></div><ul>{entries}</ul>")
        call = self.call
        if call is not None:
            where = f"node {(call.node_id or '?')[:12]}, pid {call.pid}"
            parts.append(
                f"<div><b>The call</b>: {html.escape(call.function)} ({html.escape(call.status)}"
                f", {html.escape(where)}, call {html.escape(call.call_id)})</div>"
            )
            if call.traceback:
                parts.append(
                    pre(traceback_with_locals(call.traceback, call.frames_locals).rstrip())
                )
        return card(self.kind, "", *parts)


_LOCAL = "reproduce it in this process: with raytrace_kit.local_mode(post_mortem=True)"


def reproduce(call: Call | None) -> tuple[str, ...]:
    """How to run a failed call again: its replay, when its arguments were kept; local mode."""
    if call is None:
        return (_LOCAL,)
    if call.replay_path:
        ident = (call.task_id or call.call_id)[:16]
        return (f"replay it here, with its own arguments: raytrace-kit replay {ident}", _LOCAL)
    return (
        _LOCAL,
        "to replay the failing call with its own arguments, run again with raytrace-kit run "
        "--capture failures (or @debuggable(capture='failures')), then raytrace-kit replay "
        "TASK_ID (raytrace-kit events --status error lists them)",
    )
