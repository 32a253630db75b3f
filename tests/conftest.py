"""Shared fixtures: one Ray instance for the whole session, and event helpers."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import ray

import raytrace_kit
from raytrace_kit import testing
from raytrace_kit._output import state as output_state

# Workers inherit the environment of the ray.init() that starts the local cluster; a
# developer's own override must not redirect the files these tests look for.
os.environ.pop("RAYTRACE_LOG_DIR", None)


def start_shared_ray() -> None:
    """Start the session's Ray instance if it is not running (it is shared by tests)."""
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


@pytest.fixture
def ray_session() -> None:
    """A running Ray instance, shared by every test that asks for it.

    Started once; restarted only after a test that needed its own cluster shut it down.
    """
    start_shared_ray()


@pytest.fixture
def no_ray() -> None:
    """Ray is not initialized (the shared instance is shut down; later tests restart it)."""
    if ray.is_initialized():
        ray.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the unit tier (tests/unit, no Ray) first: it finishes in seconds, before Ray starts."""
    items.sort(key=lambda item: "unit" not in item.path.parts)


@pytest.fixture(scope="session", autouse=True)
def _shutdown_ray_at_exit() -> Iterator[None]:
    yield
    if ray.is_initialized():
        ray.shutdown()


_test_started = ""


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    """Each test starts with raytrace_kit's process state reset and a new event window."""
    global _test_started  # noqa: PLW0603 -- the window events_of() reads
    testing.reset()
    _test_started = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    yield
    fallback = output_state.state.fallback_dir  # made by this test (Ray not initialized)
    testing.reset()
    if fallback is not None:
        shutil.rmtree(fallback, ignore_errors=True)


def events_of(function: Any, event: str | None = None) -> list[dict[str, Any]]:
    """Events of one debuggable written during the current test.

    Matched by qualified name (the function, or the methods of a class), optionally of
    one event type. Tests share one Ray session and its log directory, so events of
    earlier tests are left out by time.
    """
    name = f"{function.__module__}.{function.__qualname__}"
    return [
        e
        for e in raytrace_kit.read_events()
        if e["timestamp"] >= _test_started
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
