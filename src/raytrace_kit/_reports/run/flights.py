"""A report's in-flight sections from the joined records: queues, calls never started, loops.

What :class:`~raytrace_kit._reports.run.queues.Queues` (one pass) and the cluster's merge
(:mod:`.merge`, of the nodes' parts) both end with: each function's time in queue, the
calls never started, the stuck calls, the driver's ``ray.get`` loops by line, and how long
a call waited behind an actor's earlier calls.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from raytrace_kit._output.schema import Stuck

__all__ = ["LOOP_MIN", "behind", "flights", "loops_of", "stuck_row"]

LOOP_MIN = 5  # calls of one line of the driver, each after the one before ended: a loop


def behind(
    submitted: float,
    begun: float,
    before: tuple[float, float] | None,
    ready: list[float] | None,
) -> float:
    """How long an actor's method call waited behind the actor's other calls.

    From when it could have run (submitted, the actor created: the last end of its
    ``__init__`` before the call, and the actor busy: the start of the stretch of calls
    it ran back to back until this one) until the call before it in the actor ended
    (``before``: the actor's last end when this call started, and that stretch's start).
    A call submitted before its actor was created waited for the creation first (a worker
    process to start, ``__init__`` to run); a call submitted after the one before had
    ended waited for Ray to deliver it; a call queued behind one that waited for its own
    arguments waited while the actor idled: none of these is waiting behind other calls.
    In seconds, or whole microseconds, as its arguments are.
    """
    if before is None:
        return 0.0
    last_end, busy_since = before
    created = max((end for end in ready or () if end <= begun), default=0.0)
    return max(min(begun, last_end) - max(submitted, created, busy_since), 0.0)


def flights(  # noqa: PLR0917 -- one argument per part of the joined records
    waits: Mapping[str, Sequence[float]],
    never: list[dict[str, Any]],
    never_count: int,
    stuck: Iterable[Stuck],
    ended: Callable[[str], str | None],
    loops: list[dict[str, Any]],
    actors: dict[str, tuple[int, float]],
    *,
    called: Mapping[str, Mapping[str, int]] | None = None,
    made: Mapping[str, dict[str, Any]] | None = None,
    backlog: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """The report's in-flight sections from the joined records (see :meth:`Queues.results`).

    ``waits``: each function's times in queue; ``never``: the first calls never started,
    in the order their submissions were read; ``loops``: the driver's lines that are
    ray.get loops (:func:`loops_of`); ``actors``: each actor's calls' count and longest
    time in queue; ``called``: each line of the driver's code, its calls by function
    (what a ray.get loop at that line waited on); ``made``: each actor's ``async`` and
    ``max_concurrency``, from its creation's record; ``backlog``: each function's times
    in queue while the worker that ran each call idled (see :meth:`Queues.results`).
    """
    queued: list[dict[str, Any]] = []
    for function, values in waits.items():
        ordered = sorted(values)
        queued.append({
            "function": function, "count": len(ordered),
            "p50_s": statistics.median(ordered),
            "p95_s": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "max_s": ordered[-1],
        })  # fmt: skip
    queued.sort(key=lambda row: -row["p50_s"])
    never.sort(key=lambda row: row["submitted"])
    rows = [stuck_row(event, ended(event.call_id)) for event in stuck]
    rows.sort(key=lambda row: row["timestamp"])
    longest = {actor: most for actor, (count, most) in actors.items() if count >= LOOP_MIN}
    return {"queued": queued, "never_started": never, "never_started_count": never_count,
            "stuck": rows, "loops": loops, "actor_queues": longest,
            "called": dict(called or {}), "actors_made": dict(made or {}),
            "backlog": {function: _summary(values) for function, values in (backlog or {}).items()},
            }  # fmt: skip


def _summary(values: Sequence[float]) -> dict[str, Any]:
    """A function's times in queue: how many, the median, the longest."""
    ordered = sorted(values)
    return {"count": len(ordered), "p50_s": statistics.median(ordered), "max_s": ordered[-1]}


def loops_of(sites: dict[str, list[tuple[float, float | None]]]) -> list[dict[str, Any]]:
    """Lines of the driver whose calls were each submitted after the one before ended.

    What ``for x in xs: ray.get(f.remote(x))`` leaves: its calls ran one at a time, each
    waited on by the driver before it submitted the next.
    """
    found: list[dict[str, Any]] = []
    for site, calls in sites.items():
        if len(calls) < LOOP_MIN:
            continue
        calls.sort(key=_submitted_then_ended)  # not by the tuples: None < float raises
        serial = sum(
            1
            for (_, ended), (next_submitted, _) in itertools.pairwise(calls)
            if ended is not None and ended <= next_submitted
        )
        if serial >= LOOP_MIN - 1 and 2 * serial >= len(calls):
            found.append({"site": site, "calls": len(calls), "serial": serial})
    found.sort(key=lambda row: -row["serial"])
    return found


def _submitted_then_ended(call: tuple[float, float | None]) -> tuple[float, float]:
    """A line's call in order: submitted, then its end, a call that never ended first.

    Two calls of one line can carry the same stamp (a coarse clock, a tight loop); a
    never-ended call sorts before an ended one then, as ``joins`` packs them (-1).
    """
    when, ended = call
    return (when, -1.0 if ended is None else ended)


def stuck_row(event: Stuck, status: str | None) -> dict[str, Any]:
    stack = event.stack
    where = f"{stack[-1][0]}:{stack[-1][1]}" if stack and len(stack[-1]) > 1 else None
    waiting = event.waiting_on or {}
    outcome = {None: "never ended: killed, or still running", "interrupted": "its process died"}
    return {
        "function": event.function, "call_id": event.call_id, "task_id": event.task_id,
        "node_id": event.node_id, "pid": event.pid, "timestamp": event.timestamp,
        "running_s": event.running_s, "reports": event.report, "where": where,
        "stack": stack, "waiting_in": waiting.get("what"),
        "waiting_on": waiting.get("task_ids") or [],
        "outcome": outcome.get(status, f"it ended later ({status})"),
    }  # fmt: skip
