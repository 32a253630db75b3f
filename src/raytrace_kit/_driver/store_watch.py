"""The driver's look at what its refs hold: a ``store.held`` record when they hold the store.

A thread of the driver (started with its record, under ``raytrace-kit run`` or
``instrument()``) reads the driver's reference table every :data:`LOOK_S` (or less often
when a look is costly: never more than 1% of one core). When the objects its refs keep
alive reach :data:`~raytrace_kit._reports.run.store_refs.FULL` of the object store's capacity,
or some of them were spilled to disk, and more than at the last record, it writes one
``store.held`` record to the driver's file: the bytes held, the capacity, and the objects
grouped by the line of code that made them (joined here with this process's
``call.submit`` records), from which the report makes its finding.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import ray

from raytrace_kit import _process, _registry
from raytrace_kit._driver import record
from raytrace_kit._output import encode, paths, submissions
from raytrace_kit._reports.run import FULL, group, sites_of
from raytrace_kit._worker import held

__all__ = ["GROUPS_KEPT", "LOOK_S", "look", "start"]

LOOK_S = 1.0  # between two looks at least
GROWTH = 1.25  # a new record only when the refs hold this much more than at the last one
GROUPS_KEPT = 20  # lines named per record, most bytes first
_COST_SHARE = 100  # wait at least this many times what the last look cost


class _State:
    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        stop = getattr(self, "stop", None)
        if stop is not None:
            stop.set()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.recorded = 0  # bytes held at the last store.held record
        self.capacity: tuple[object, int] | None = None  # (connection, bytes)


state = _State()
_registry.register(state.clear, state.clear, layer=_registry.LOCAL)


def start() -> None:
    """Start the driver's look at its refs (once per process)."""
    if state.thread is not None:
        return
    state.thread = threading.Thread(
        target=_run, args=(state.stop,), name="raytrace-kit-store", daemon=True
    )
    state.thread.start()


def _run(stop: threading.Event) -> None:
    wait = LOOK_S
    while not stop.wait(wait):
        began = time.perf_counter()
        with contextlib.suppress(Exception):  # a look lost, never the program
            look()
        wait = max(LOOK_S, _COST_SHARE * (time.perf_counter() - began))


def _capacity() -> int:
    identity = _process.process_identity()
    if state.capacity is None or state.capacity[0] is not identity:
        total = ray.cluster_resources().get("object_store_memory", 0)
        state.capacity = (identity, int(total))
    return state.capacity[1]


def look() -> dict[str, Any] | None:
    """Write a ``store.held`` record if the driver's refs hold the store now; return it."""
    if not ray.is_initialized():
        return None
    table = held.table()
    rows = table["rows"]
    held_bytes = sum(row["bytes"] for row in rows)
    spilled = sum(row["spilled_bytes"] for row in rows)
    capacity = _capacity()
    if not capacity or (held_bytes < FULL * capacity and not spilled):
        return None
    if held_bytes <= GROWTH * state.recorded:
        return None
    state.recorded = held_bytes
    submissions.flush()  # this process's submissions: in its file before it is read
    identity = _process.process_identity()
    own = paths.log_dir() / paths.event_file_name(identity.node_id, identity.pid)
    wanted = {row["task_id"] for row in rows if row["task_id"]}
    groups = group([table], sites_of([own], wanted))
    fields = {
        "timestamp": encode.now(), "level": "info", "event": "store.held",
        "held_bytes": held_bytes, "capacity_bytes": capacity, "spilled_bytes": spilled,
        "objects": sum(row["count"] for row in rows),
        "groups": [g.__dict__ for g in groups[:GROUPS_KEPT]],
    }  # fmt: skip
    record.write(encode.event_line(fields))
    return fields
