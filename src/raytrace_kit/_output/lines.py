"""An event as one readable line: what the CLI prints, ``echo()`` shows, notebooks list."""

from __future__ import annotations

from typing import Any

__all__ = ["readable"]

# What every event carries: a line shows the rest (a get_logger() event's own fields).
_CONTEXT = frozenset({
    "timestamp", "level", "event", "schema", "call_id", "parent_call_id", "parent_task_id",
    "function", "kind", "mode", "task_id", "task_name", "actor_id", "job_id", "node_id",
    "worker_id", "pid", "attempt",
})  # fmt: skip
_VALUE_CHARS = 80
_ERROR_CHARS = 200  # one line each: the message's first line, this long at most


def readable(event: dict[str, Any]) -> str:
    """One event, readable: time, level, event, function, then what matters for it."""
    parts = [
        str(event.get("timestamp", ""))[:26].replace("T", " "),
        f"{event.get('level', ''):<7}",
        str(event.get("event", "")),
    ]
    if event.get("function"):
        parts.append(str(event["function"]))
    if event.get("event") == "call.end":
        duration = event.get("duration_s")
        parts.append(str(event.get("status")))
        if isinstance(duration, int | float):
            parts.append(f"{duration:.3f}s")
        if event.get("error_type"):
            message = f"{event['error_type']}: {event.get('error', '')}".split("\n")[0]
            parts.append(message if len(message) <= _ERROR_CHARS else message[:197] + "...")
    elif not str(event.get("event", "")).startswith("call."):
        for key, value in event.items():
            if key not in _CONTEXT:
                shown = value if isinstance(value, str) else repr(value)
                if len(shown) > _VALUE_CHARS:
                    shown = shown[: _VALUE_CHARS - 3] + "..."
                parts.append(f"{key}={shown}")
    if str(event.get("event", "")).startswith("call.") and event.get("task_id"):
        # Enough of the task id for `raytrace-kit explain --task` (it takes a prefix).
        parts.append(f"task={str(event['task_id'])[:16]} attempt={event.get('attempt', 0)}")
    node = event.get("node_id")
    if node:
        parts.append(f"node={str(node)[:12]} pid={event.get('pid')}")
    return "  ".join(parts)
