"""``read_events()``: parse event files back into dicts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raytrace_kit._output import paths
from raytrace_kit.exceptions import EventsNotFoundError

__all__ = ["read_events"]


def read_events(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Parse raytrace_kit event files into a list of dicts, sorted by time.

    Args:
        path: An event file, or a directory searched recursively for ``events-*.jsonl``.
            Defaults to :func:`raytrace_kit.log_dir` (this node's files for the current
            session; on a single machine that includes every node of a local cluster).

    Raises:
        EventsNotFoundError: ``path`` does not exist (a ``FileNotFoundError``).

    Returns:
        Every event, oldest first. A truncated last line (a process killed while writing)
        is skipped, and so is any line that is not a JSON object.
    """
    root = Path(path) if path is not None else paths.log_dir()
    if not root.exists():
        msg = (
            f"read_events({str(root)!r}): no such file or directory. Pass an event file or a "
            "directory of them (raytrace_kit.log_dir() on the node that wrote them)."
        )
        raise EventsNotFoundError(msg)
    files: Iterable[Path] = [root] if root.is_file() else sorted(root.rglob("events-*.jsonl"))
    events: list[dict[str, Any]] = []
    for file in files:
        try:
            data = file.read_bytes()
        except OSError:
            continue  # removed or unreadable while we listed: nothing to report
        for line in data.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
    events.sort(key=lambda event: str(event.get("timestamp", "")))
    return events
