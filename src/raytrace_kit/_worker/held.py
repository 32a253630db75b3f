"""What this process's refs hold in the object store, by the task or ``ray.put`` that made it.

Ray's reference table (:mod:`raytrace_kit._ray_compat.objects`) says which objects a
process keeps alive, their sizes and why (a ref in its Python objects, a pending task's
argument, or only inside another object). An object of a task carries the task's id (an
``ObjectID`` is the ``TaskID`` and an index), which the ``call.submit`` records join to
the line that called ``.remote()``; a ``ray.put``'s object carries the putting task's id,
shared by all its puts, so the put hook (:func:`hook_put`) keeps each put's line here.
Rows are grouped by task (a few per task with ``num_returns``), never one per object.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import ray

from raytrace_kit import _ray_compat
from raytrace_kit._ray_compat import objects
from raytrace_kit._worker import state as worker_state

__all__ = ["MAX_PUTS", "MAX_ROWS", "REFERENCE_TYPES", "hook_put", "table"]

MAX_PUTS = 100_000  # put lines kept; past it the oldest go (their objects are most likely gone)
MAX_ROWS = 2_000  # rows a table keeps, largest first: the ones worth naming
TASK_ID_HEX = 48  # an ObjectID's hex: its task's id (24 bytes), then its index
_PUT_KEY = "put#held"

# What keeps an object alive, in the words of `ray memory` (most binding first).
REFERENCE_TYPES = ("used by pending task", "local ref", "captured in object")


def _reference_type(held: objects.HeldObject) -> str:
    if held.submitted:
        return REFERENCE_TYPES[0]
    if held.local:
        return REFERENCE_TYPES[1]
    return REFERENCE_TYPES[2]


def table() -> dict[str, Any]:
    """This process's held objects, grouped: ``{"pid", "rows": [...]}``, largest rows first.

    Each row: ``task_id`` (of the task that made the objects; ``None`` for a put whose line
    is known), ``site`` (the put's ``file:line``, else ``None``), ``type`` (what keeps them
    alive), ``count``, ``bytes``, ``spilled_bytes``.
    """
    puts = worker_state.state.put_sites
    rows: dict[tuple[str | None, str | None, str], list[int]] = {}
    for held in objects.held_objects():
        task: str | None = held.object_id[:TASK_ID_HEX]
        site = None
        if puts:
            put = puts.get(bytes.fromhex(held.object_id))
            if put is not None:
                task, site = None, f"{put[0]}:{put[1]}"
        row = rows.setdefault((task, site, _reference_type(held)), [0, 0, 0])
        row[0] += 1
        row[1] += held.size
        row[2] += held.size if held.spilled else 0
    made: list[dict[str, Any]] = [
        {"task_id": task, "site": site, "type": kind, "count": c, "bytes": b, "spilled_bytes": s}
        for (task, site, kind), (c, b, s) in rows.items()
    ]
    made.sort(key=lambda row: -row["bytes"])
    left_off = max(0, len(made) - MAX_ROWS)
    return {"pid": os.getpid(), "rows": made[:MAX_ROWS], "rows_left_off": left_off}


def hook_put() -> None:
    """Keep the line of each ``ray.put`` of this process (idempotent).

    The cost at each put: one frame read and one dict insert, beside Ray's own
    serialization and store write (tens of microseconds at least). Ray's result and
    exceptions pass through untouched.
    """
    if _ray_compat.patched(_PUT_KEY):
        return
    original = ray.put

    @functools.wraps(original)
    def put(value: Any, *args: Any, **kwargs: Any) -> Any:
        ref = original(value, *args, **kwargs)
        try:
            frame = sys._getframe(1)
            sites = worker_state.state.put_sites
            sites[ref.binary()] = (frame.f_code.co_filename, frame.f_lineno)
            if len(sites) > MAX_PUTS:
                del sites[next(iter(sites))]
        except Exception:  # noqa: S110 -- a line lost, never the user's put
            pass
        return ref

    _ray_compat.patch(_PUT_KEY, ray, "put", put)
