"""The hottest lines of a node's samples files so far, for ``raytrace-kit top``.

:class:`LiveSamples` lives in the node's reader (``_driver/readers.py``) beside the live
tally: each refresh it reads only the whole lines the samples files grew by
(:class:`~.cursor.Cursor`), feeds them to each file's :class:`~.samples.SamplesReader`,
and sends the node's hottest lines; :func:`merge_hot_lines` adds the nodes' up. A line is
the innermost frame of the user's code (:func:`~.samples.user_leaf`) of running samples,
with the call's function it ran for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raytrace_kit._reports.live.cursor import Cursor
from raytrace_kit._reports.profiles.samples import SampleRow, SamplesReader, user_leaf

__all__ = ["HOT_LINES", "SAMPLE_FILE", "LiveSamples", "hot_lines", "merge_hot_lines"]

HOT_LINES = 10  # lines a node sends, and top shows
SAMPLE_FILE = re.compile(r"^samples-.+\.jsonl$")


class LiveSamples:
    """One node directory's samples files, followed (see the module)."""

    def __init__(self, root: Path) -> None:
        self.cursor = Cursor(root, files=SAMPLE_FILE)
        self.readers: dict[str, SamplesReader] = {}

    def look(self) -> list[dict[str, Any]]:
        """The node's hottest lines over every sample written so far."""
        for name, lines in self.cursor.read():
            reader = self.readers.get(name)
            if reader is None:
                reader = self.readers[name] = SamplesReader(Path(name))
            reader.feed(lines)
        return hot_lines(row for reader in self.readers.values() for row in reader.rows())


def _whose(row: SampleRow) -> str | None:
    if row.function is not None:
        return row.function
    return f"driver ({Path(row.driver).name})" if row.driver is not None else None


def hot_lines(rows: Iterable[SampleRow], top: int = HOT_LINES) -> list[dict[str, Any]]:
    """The lines most running samples of ``rows`` are at, the most first.

    Each: ``file``, ``line``, ``name`` (the frame's function), ``function`` (the call's,
    a driver's script, or ``None``: no call), ``seconds``, ``share`` of ``total_s`` (all
    running samples).
    """
    seconds: dict[tuple[str, int, str, str | None], float] = {}
    total = 0.0
    for row in rows:
        if row.waiting:
            continue
        total += row.seconds
        leaf = user_leaf(row.stack)
        if leaf is not None:
            key = (leaf.file, leaf.line, leaf.name, _whose(row))
            seconds[key] = seconds.get(key, 0.0) + row.seconds
    return _ranked(seconds, total, top)


def _ranked(
    seconds: dict[tuple[str, int, str, str | None], float], total: float, top: int
) -> list[dict[str, Any]]:
    ranked = sorted(seconds.items(), key=lambda item: -item[1])[:top]
    return [
        {
            "file": file,
            "line": line,
            "name": name,
            "function": function,
            "seconds": round(spent, 3),
            "share": round(spent / total, 4) if total else 0.0,
            "total_s": round(total, 3),
        }
        for (file, line, name, function), spent in ranked
    ]


def merge_hot_lines(nodes: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The nodes' hottest lines as the cluster's (each node's share of its own total)."""
    seconds: dict[tuple[str, int, str, str | None], float] = {}
    total = 0.0
    for lines in nodes:
        if lines:
            total += lines[0]["total_s"]
        for hot in lines:
            key = (hot["file"], hot["line"], hot["name"], hot["function"])
            seconds[key] = seconds.get(key, 0.0) + hot["seconds"]
    return _ranked(seconds, total, HOT_LINES)
