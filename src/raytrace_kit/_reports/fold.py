"""The nodes' tallies folded into one: counts, failures, functions, actors, children.

What each node counted (``partial.NodeReport.tally``) added up in the order a report of
the collected files reads them (by node), so the tally is the one that report fills: the
same counts, durations bit for bit, the same first and largest (see :mod:`.merge`).
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.packing import unpack_floats, unpack_keys
from raytrace_kit._reports.rules import SERIAL_MIN_CHILDREN
from raytrace_kit._reports.tally import MAX_LISTED as LISTED
from raytrace_kit._reports.tally import ActorRun, Function, Tally

__all__ = ["tally_of"]


def tally_of(partials: list[dict[str, Any]], since: str | None, until: str | None) -> Tally:
    """The nodes' tallies as one, each node's taken whole, in order."""
    tally = Tally(since, until)
    for part in partials:
        calls, failed, interrupted, retried, processes, busy = part["counts"]
        tally.calls += calls
        tally.failed += failed
        tally.interrupted_count += interrupted
        tally.retried += retried
        tally.processes += processes
        tally.busy += busy
        tally.nodes.update(part["nodes"])
        tally.first, tally.last = min(tally.first, part["first"]), max(tally.last, part["last"])
        tally.busiest = max(tally.busiest, tuple(part["busiest"]))
        _failures(tally, part["failures"])
        tally.failed_tasks.update(f"{key:016x}" for key in unpack_keys(part["failed_tasks"]))
        tally.recovered.update(f"{key:016x}" for key in unpack_keys(part["recovered"]))
        room = LISTED - len(tally.interrupted)
        tally.interrupted.extend(part["interrupted"][: max(room, 0)])
        _functions(tally, part["functions"])
        _actors(tally, part["actors"])
        tally.leaks.extend(part["leaks"])
        tally.stuck_status.update(part["stuck_status"])
    tally.children = _children(partials)
    return tally


def _failures(tally: Tally, groups: list[dict[str, Any]]) -> None:
    for group in groups:
        key = (group["function"], group["error_type"])
        known = tally.failures.get(key)
        if known is None:
            tally.failures[key] = {**group, "task_ids": list(group["task_ids"])}
            continue
        known["count"] += group["count"]
        known["first"] = min(known["first"], group["first"])
        if group["last"] >= known["last"]:  # ties: the later read wins, as in one pass
            known["last"], known["traceback"] = group["last"], group["traceback"]
            known["frames_locals"] = group.get("frames_locals")  # a node of an older kit: none
        known["task_ids"].extend(group["task_ids"][: max(LISTED - len(known["task_ids"]), 0)])
        known["nodes"] |= group["nodes"]


def _functions(tally: Tally, functions: dict[str, tuple[Any, ...]]) -> None:
    for name, (durations, slowest, start, growth, private, retries, task) in functions.items():
        aggregate = tally.functions.get(name)
        if aggregate is None:
            aggregate = tally.functions[name] = Function()
        aggregate.durations.extend(unpack_floats(durations))
        known: Call | None = aggregate.slowest
        if slowest is not None and (
            known is None or (slowest.duration_s or 0.0) > (known.duration_s or 0.0)
        ):
            aggregate.slowest, aggregate.slowest_start = slowest, start
        if growth is not None and (aggregate.growth is None or growth > aggregate.growth):
            aggregate.growth = growth
        if private is not None and (aggregate.private is None or private > aggregate.private):
            aggregate.private = private
        aggregate.retries += retries
        aggregate.task = aggregate.task or task


def _actors(tally: Tally, actors: dict[str, tuple[Any, ...]]) -> None:
    """Each actor's run, continued where another node's left off (a restarted actor)."""
    for actor, (function, calls, busy, gaps, first, last, overlapped) in actors.items():
        run = tally.actors.get(actor)
        if run is None:
            run = tally.actors[actor] = ActorRun(function)
            run.first, run.gaps = first, gaps
        else:
            gap = first - run.last
            run.overlapped = run.overlapped or gap < -1e-3
            run.gaps += max(gap, 0.0) + gaps
        run.calls += calls
        run.busy += busy
        run.last = max(run.last, last)
        run.overlapped = run.overlapped or overlapped


def _children(partials: list[dict[str, Any]]) -> dict[str, array[float]]:
    """The parents that may have waited on their children one at a time, with all spans.

    A parent whose children overlapped on some node did not; one with fewer children
    than the rule asks is not named: both are left out, as the rule would leave them.
    """
    kids: Counter[str] = Counter()
    overlapped: set[str] = set()
    for part in partials:
        for parent, (count, spans) in part["children"].items():
            kids[parent] += count
            if spans is None:
                overlapped.add(parent)
    wanted = {p for p, n in kids.items() if n >= SERIAL_MIN_CHILDREN and p not in overlapped}
    merged: dict[str, array[float]] = {}
    for part in partials:
        for parent, (_, spans) in part["children"].items():
            if parent in wanted:
                merged.setdefault(parent, array("d")).extend(unpack_floats(spans))
    return merged
