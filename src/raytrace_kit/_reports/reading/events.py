"""``read_events()``: parse event files back into dicts (a shortcut to a session's events)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from raytrace_kit._output import paths
from raytrace_kit._reports.reading.session import Session, flush_own
from raytrace_kit.exceptions import EventsNotFoundError

__all__ = ["read_events"]


def read_events(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Parse raytrace_kit event files into a list of dicts, sorted by time.

    A shortcut for ``open_session(path).events()`` (see :func:`raytrace_kit.open_session`
    for calls joined, filters, and other sources).

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
    flush_own()
    root = Path(path) if path is not None else paths.log_dir()
    if not root.exists():
        msg = (
            f"read_events({str(root)!r}): no such file or directory. Pass an event file or a "
            "directory of them (raytrace_kit.log_dir() on the node that wrote them)."
        )
        raise EventsNotFoundError(msg)
    files = [root] if root.is_file() else sorted(root.rglob("events-*.jsonl"))
    return Session(root, files).events()
