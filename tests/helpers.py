"""Plain functions the tests share: the shared Ray instance, the current test's events, HTML.

Fixtures are in the conftest files; this module holds what tests call themselves.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray

import raytrace_kit


def start_shared_ray() -> None:
    """Start the session's Ray instance if it is not running (it is shared by tests)."""
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


class _Window:
    """When the current test started: what was written before belongs to earlier tests."""

    started = ""


def open_window() -> None:
    """Start the current test's window (the conftest's autouse fixture calls this)."""
    _Window.started = datetime.now(timezone.utc).isoformat(timespec="microseconds")


def window_start() -> str:
    """When the current test started (UTC, ISO 8601), as event timestamps are written."""
    return _Window.started


def events_of(function: Any, event: str | None = None) -> list[dict[str, Any]]:
    """Events of one debuggable written during the current test.

    Matched by qualified name (the function, or the methods of a class), optionally of
    one event type. Tests share one Ray session and its log directory, so events of
    earlier tests are left out by time.
    """
    name = f"{function.__module__}.{function.__qualname__}"
    since = window_start()
    return [
        e
        for e in raytrace_kit.read_events()
        if e["timestamp"] >= since
        and (e.get("function") == name or str(e.get("function")).startswith(name + "."))
        and (event is None or e["event"] == event)
    ]


def wait_for_start(target: object, function_suffix: str) -> None:
    """Wait until a call of ``target`` ending in ``function_suffix`` has started."""
    deadline = time.monotonic() + 30
    while not any(e["function"].endswith(function_suffix) for e in events_of(target, "call.start")):
        assert time.monotonic() < deadline, f"{function_suffix} never started"
        time.sleep(0.05)


def listening_sockets(pid: int) -> set[str]:
    """The TCP sockets process ``pid`` listens on (from /proc, no psutil needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(fields[1])
    return found


def table_rows(markup: str) -> list[list[str]]:
    """The text of each table row's cells in an HTML fragment, as a notebook shows them."""
    from html.parser import HTMLParser  # noqa: PLC0415

    rows: list[list[str]] = []

    class _Rows(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag == "tr":
                rows.append([])
            elif tag in {"td", "th"}:
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in {"td", "th"} and self.cell is not None and rows:
                rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    _Rows(convert_charrefs=True).feed(markup)
    return rows
