"""What a report keeps while it streams over a session's calls: aggregates, not the calls.

:class:`Tally` takes each process's calls once, in the order its files have them, and
keeps counts, per-function durations (8 bytes a call), the largest figures, the state
of the findings that need an order (a process's memory run, an actor's queue), and each
process's lane over time for the pictures (bounded: ``lanes.py``).
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call, Named
from raytrace_kit._reports.calls import first_line
from raytrace_kit._reports.lanes import Lane, seconds

__all__ = ["MAX_LISTED", "ActorRun", "Finding", "Function", "Tally", "seconds"]

LEAK_MIN_CALLS = 5  # a process whose RSS rose over at least this many calls in a row...
LEAK_MIN_BYTES = 32 * 2**20  # ...by at least this much in all: the leak signature
_GREW = 2**20  # a call that grew its process by less is not named as growing it
_BUSY_MIN_S = 0.05  # CPU against wall time means something only for calls this long
MAX_LISTED = 1000  # task ids per failure group, interrupted calls: enough to act on


@dataclass(frozen=True)
class Finding:
    """One problem the records show: what, the evidence, and the fix.

    ``kind`` names the rule for machines (``tiny_tasks``, ``one_at_a_time``,
    ``serializing_actor``, ``leak``, ``cpu_oversubscription``, ``flaky_retries``, and
    ``death_<cause>``); ``subject`` is the function, actor or process it is about.
    """

    title: str
    evidence: str
    fix: str
    kind: str = ""
    subject: str = ""


class Function:
    """One function's aggregates: its durations (8 bytes a call) and largest figures."""

    __slots__ = ("durations", "growth", "private", "retries", "slowest", "task")

    def __init__(self) -> None:
        self.durations: array[float] = array("d")
        self.slowest: Call | None = None  # the one call a straggler finding names
        self.growth: int | None = None
        self.private: int | None = None
        self.retries = 0
        self.task = False


class Tally:
    """What a report keeps while it streams over the calls: aggregates, not the calls.

    Per call it keeps one duration (8 bytes, for the percentiles and medians) and its id
    with its function's name (to name parents); calls with a parent or on an actor add
    their start and end times.
    """

    def __init__(self, since: str | None = None, until: str | None = None) -> None:
        self.since, self.until = since, until  # a window of start times (ISO 8601, UTC)
        self.calls = self.failed = self.interrupted_count = self.retried = 0
        self.nodes: set[str] = set()
        self.processes = 0
        self.first, self.last = "~", ""
        self.failures: dict[tuple[str, str], dict[str, Any]] = {}
        self.failed_tasks: set[str] = set()  # tasks with a failed attempt...
        self.recovered: set[str] = set()  # ...and tasks a retry saved
        self.interrupted: list[dict[str, Any]] = []
        self.functions: dict[str, Function] = {}
        self.children: dict[str, array[float]] = {}
        self.names: dict[str, str] = {}  # of parents, where known before their children
        self.files_of: dict[str, list[Path]] = {}  # a process's files, by its call ids' prefix
        self.busy = 0
        self.busiest: tuple[float, str] = (0.0, "")
        self.actors: dict[str, ActorRun] = {}
        self.leaks: list[Finding] = []
        self.lanes: list[Lane] = []  # what the pictures draw of each process

    def process(  # noqa: PLR0912, PLR0915 -- the hot loop
        self, calls: Iterator[Call], files: list[Path]
    ) -> None:
        """Take in one process's calls (its ``files``, in the order they have them)."""
        functions, names, nodes, children = self.functions, self.names, self.nodes, self.children
        leak, lane = LeakRun(), Lane()
        first, last, count = self.first, self.last, 0
        # The sums of the lane's next point, kept here: a local costs a fraction of a slot.
        point_calls, point_ran, point_failed, point_peak, stride, closing = 0, 0.0, 0, -1, 1, None
        since, until = self.since, self.until
        for call in calls:
            function, status, ended = call.function, call.status, call.ended
            begun = call.started or ended or ""
            if (since is not None and begun < since) or (until is not None and begun >= until):
                continue
            count += 1
            if begun and begun < first:
                first = begun
            if ended and ended > last:
                last = ended
            if call.node_id:
                nodes.add(call.node_id)
            if call.call_id in children:  # a parent seen before it: named now, cheaply
                names[call.call_id] = function
            if status == "error":
                self._failure(call)
                lane.failure(call)
                point_failed += 1
            elif status == "interrupted":
                self._interrupted(call)
                lane.kill(call)
                last = max(last, begun)
                continue
            aggregate = functions.get(function)
            if aggregate is None:
                aggregate = functions[function] = Function()
            if call.attempt:
                self.retried += 1
                if status == "ok":
                    aggregate.retries += 1
                    if call.task_id:
                        self.recovered.add(call.task_id)
            duration = call.duration_s
            if duration is None:
                continue
            aggregate.durations.append(duration)
            slowest = aggregate.slowest
            if slowest is None or duration > (slowest.duration_s or 0.0):
                aggregate.slowest = call
            if call.kind == "task":
                aggregate.task = True
            if call.profile_path and call.profile_path.endswith(".bin"):
                leak.seen(call.profile_path)  # memray's: its leaks view, for that finding
            rss = call.rss_end_bytes
            if rss is not None:
                point_peak = rss if rss > point_peak else point_peak  # max() is a call
                start = call.rss_start_bytes
                if start is not None and (
                    aggregate.growth is None or rss - start > aggregate.growth
                ):
                    aggregate.growth = rss - start
                private = call.rss_minus_shr_end_bytes
                if private is not None and (
                    aggregate.private is None or private > aggregate.private
                ):
                    aggregate.private = private
                if not ended:
                    pass
                elif rss <= leak.last_rss and leak.run is None and len(leak.short) == 1:
                    leak.short[0], leak.last_rss = call, rss  # flat memory: no call, no list
                else:
                    leak.add(call, rss)
            cpu = call.process_cpu_s  # every thread's: a library's thread pool shows here
            if cpu and duration > _BUSY_MIN_S and cpu > 1.5 * duration:
                self.busy += 1
                self.busiest = max(self.busiest, (cpu / duration, function))
            if (call.parent_call_id or call.actor_id) and ended and call.mode != "local":
                self._timing(call, seconds(ended), duration)
            point_calls, point_ran, closing = point_calls + 1, point_ran + duration, call
            if point_calls >= stride:
                lane.close(call, point_calls, point_ran, point_failed, point_peak)
                point_calls, point_ran, point_failed, point_peak = 0, 0.0, 0, -1
                stride = lane.stride
        self.first, self.last = first, last
        if closing is not None and point_calls:
            lane.close(closing, point_calls, point_ran, point_failed, point_peak)
        if count:
            self.calls += count
            self.processes += 1
            self.files_of[_prefix(call.call_id)] = files
            lane.name(call)
            self.lanes.append(lane)
        finding = leak.finding()
        if finding is not None:
            self.leaks.append(finding)
            lane.leak = finding.title

    def name_of(self, call_id: str) -> str:
        """The function of a call, by its id: read again from its process's files if need be.

        Parents are named as they stream by only when a child came first; for the few a
        finding names, the call id's prefix (one per process) says which files to search.
        """
        name = self.names.get(call_id)
        if name is not None:
            return name
        line = first_line(self.files_of.get(_prefix(call_id), []), call_id)
        if line is not None:
            with contextlib.suppress(msgspec.DecodeError):
                name = self.names[call_id] = _NAMED(line).function
                return name
        return call_id

    def start_event(self, call_id: str) -> dict[str, Any] | None:
        """A call's ``call.start`` as a dict (its ``args`` where recorded), read again."""
        # A process writes a call's start before its end: the first line is the start.
        line = first_line(self.files_of.get(_prefix(call_id), []), call_id)
        if line is None:
            return None
        with contextlib.suppress(msgspec.DecodeError):
            event = msgspec.json.decode(line)
            if isinstance(event, dict) and event.get("event") == "call.start":
                return event
        return None

    def _timing(self, call: Call, end: float, duration: float) -> None:
        parent = call.parent_call_id
        if parent and call.kind == "task":  # an actor's calls queue by design
            times = self.children.get(parent)
            if times is None:
                times = self.children[parent] = array("d")
            times.append(end - duration)
            times.append(end)
        if call.actor_id and call.kind == "actor_method":
            run = self.actors.get(call.actor_id)
            if run is None:
                run = self.actors[call.actor_id] = ActorRun(call.function)
            run.add(end - duration, end)

    def _interrupted(self, call: Call) -> None:
        self.interrupted_count += 1
        if len(self.interrupted) < MAX_LISTED:
            self.interrupted.append({k: getattr(call, k) for k in _INTERRUPTED_KEYS})

    def _failure(self, call: Call) -> None:
        self.failed += 1
        if call.task_id:
            self.failed_tasks.add(call.task_id)
        key = (call.function, call.error_type or "?")
        stamp = call.ended or call.started
        group = self.failures.get(key)
        if group is None:
            group = self.failures[key] = {
                "function": key[0], "error_type": key[1], "count": 0, "first": stamp,
                "last": "", "traceback": None, "task_ids": [], "nodes": set(),
            }  # fmt: skip
        group["count"] += 1
        group["first"] = min(group["first"], stamp)
        if stamp >= group["last"]:
            group["last"], group["traceback"] = stamp, call.traceback
        if call.task_id and len(group["task_ids"]) < MAX_LISTED:
            group["task_ids"].append(call.task_id)
        if call.node_id:
            group["nodes"].add(call.node_id)


_NAMED = msgspec.json.Decoder(Named).decode


def _prefix(call_id: str) -> str:
    """The part of a call id that names its process (see ``_process.new_call_id``)."""
    return call_id[:-6]


_INTERRUPTED_KEYS = (
    "function", "call_id", "task_id", "node_id", "worker_id", "pid", "started",
    "rss_start_bytes",
)  # fmt: skip


class _Run:
    """Calls in a row of one process, each ending with more RSS than the one before."""

    __slots__ = ("first", "functions", "grown", "length", "rss_from", "some", "top")

    def __init__(self, calls: list[Call]) -> None:
        first = calls[0]
        self.first = first
        self.rss_from = first.rss_start_bytes or first.rss_end_bytes or 0
        self.length = 0
        self.grown = 0
        self.functions: set[str] = set()
        self.some: set[str] = set()
        self.top: list[tuple[int, str, str]] = []
        for call in calls:
            self.extend(call, call.rss_end_bytes or 0)

    def extend(self, call: Call, rss: int) -> None:
        self.length += 1
        self.grown = rss - self.rss_from
        growth = call.rss_growth_bytes or 0
        if growth >= _GREW:  # the functions whose calls grew it...
            self.functions.add(call.function)
        elif growth > 0:  # ...or, for a slow leak of many small steps, grew it at all
            self.some.add(call.function)
        self.top.append((call.rss_growth_bytes or 0, call.call_id, call.function))
        if len(self.top) > 3:  # keep the three calls that grew the process most
            self.top.sort(reverse=True)
            del self.top[3:]


class LeakRun:
    """A process's runs of calls, each ending with more RSS than the last: the worst.

    The worst is the one that grew most among those at least :data:`LEAK_MIN_CALLS` long;
    shorter runs cost a list.
    """

    __slots__ = ("best", "capture", "last_path", "last_rss", "run", "short")

    def __init__(self) -> None:
        self.capture: str | None = None  # the process's memray capture, if it has one
        self.last_path = ""
        self.short: list[Call] = []  # the current run while shorter than LEAK_MIN_CALLS
        self.run: _Run | None = None  # the current run once long enough
        self.best: _Run | None = None
        self.last_rss = -1

    def seen(self, path: str) -> None:
        """A call's capture: the process's once two calls share it (a per-call one is not)."""
        if path == self.last_path:
            self.capture = path
        self.last_path = path

    def add(self, call: Call, rss: int) -> None:
        if rss > self.last_rss and (self.short or self.run is not None):
            if self.run is not None:
                self.run.extend(call, rss)
            else:
                self.short.append(call)
                if len(self.short) >= LEAK_MIN_CALLS:
                    self.run, self.short = _Run(self.short), []
        else:
            self._close()
            self.short = [call]
        self.last_rss = rss

    def _close(self) -> None:
        run = self.run
        if run is not None and (self.best is None or run.grown > self.best.grown):
            self.best = run
        self.run = None

    def finding(self) -> Finding | None:
        self._close()
        best = self.best
        if best is None or best.grown < LEAK_MIN_BYTES:
            return None
        grew = ", ".join(
            f"{function.rsplit('.', 1)[-1]} call {call_id} +{growth / 2**20:.0f} MiB"
            for growth, call_id, function in sorted(best.top, reverse=True)
            if growth >= _GREW  # only the calls that grew it are named
        )
        first = best.first
        if self.capture:
            fix = (
                "see what is still allocated at the end of that process's memray capture: "
                f"python -m memray flamegraph --leaks {self.capture}"
            )
        else:
            fix = (
                "capture that actor's whole life: @debuggable(profile='memray', "
                "profile_scope='actor'), then python -m memray flamegraph --leaks on its "
                "capture (the calls' profile_path) shows what is still allocated at the end"
            )
        return Finding(
            f"Memory grows call after call: pid {first.pid} on node {(first.node_id or '?')[:12]}",
            f"RSS rose over {best.length} calls in a row, by {best.grown / 2**20:.0f} MiB in "
            f"all, in calls of {', '.join(sorted(best.functions or best.some))}"
            + (f" (most: {grew})" if grew else "")
            + ": something keeps what each call makes",
            fix,
            "leak",
            ", ".join(sorted(best.functions or best.some)),
        )


class ActorRun:
    """One actor's calls, in end order: how busy it was and how closely its calls followed."""

    __slots__ = ("busy", "calls", "first", "function", "gaps", "last", "overlapped")

    def __init__(self, function: str) -> None:
        self.function = function
        self.calls = 0
        self.busy = self.gaps = 0.0
        self.first = self.last = 0.0
        self.overlapped = False

    def add(self, start: float, end: float) -> None:
        if self.calls:
            gap = start - self.last
            if gap < -1e-3:
                self.overlapped = True  # an async or threaded actor: calls run together
            self.gaps += max(gap, 0.0)
        else:
            self.first = start
        self.calls += 1
        self.busy += end - start
        self.last = max(self.last, end)
