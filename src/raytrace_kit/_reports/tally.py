"""What a report keeps while it streams over a session's calls: aggregates, not the calls.

:class:`Tally` takes each process's calls once, in the order its files have them, and
keeps counts, per-function durations (8 bytes a call), each call's id by its function (8
bytes a call: ``names.py``), the largest figures, the state of the findings that need an
order (a process's memory run: ``leaks.py``; an actor's queue), and each process's lane
over time for the pictures (bounded: ``lanes.py``). Nothing is read twice.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Iterator
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.calls import StartLine
from raytrace_kit._reports.driver import Waited
from raytrace_kit._reports.finding import Finding
from raytrace_kit._reports.lanes import Lane, seconds
from raytrace_kit._reports.leaks import LeakRun
from raytrace_kit._reports.names import PACK_EVERY, CallNames
from raytrace_kit._reports.queues import Queues

__all__ = ["MAX_LISTED", "ActorRun", "Function", "Tally", "seconds"]

_BUSY_MIN_S = 0.05  # CPU against wall time means something only for calls this long
MAX_LISTED = 1000  # task ids per failure group, interrupted calls: enough to act on


class Function:
    """One function's aggregates: its durations (8 bytes a call) and largest figures."""

    __slots__ = ("durations", "growth", "private", "retries", "slowest", "slowest_start", "task")

    def __init__(self) -> None:
        self.durations: array[float] = array("d")
        self.slowest: Call | None = None  # the one call a straggler finding names...
        self.slowest_start: bytes | None = None  # ...and its call.start line, kept as it went
        self.growth: int | None = None
        self.private: int | None = None
        self.retries = 0
        self.task = False

    def start_event(self) -> dict[str, Any] | None:
        """The slowest call's ``call.start`` as a dict (its ``args`` where recorded)."""
        line = self.slowest_start
        if line is None:
            return None
        with contextlib.suppress(msgspec.DecodeError):
            event = msgspec.json.decode(line)
            if isinstance(event, dict) and event.get("event") == "call.start":
                return event
        return None


class Tally:
    """What a report keeps while it streams over the calls: aggregates, not the calls.

    Per call it keeps one duration (8 bytes, for the percentiles and medians) and its id
    under its function (8 bytes, to name parents); calls with a parent or on an actor add
    their start and end times.
    """

    def __init__(
        self,
        since: str | None = None,
        until: str | None = None,
        waited: dict[str, Waited | None] | None = None,
        queues: Queues | None = None,
    ) -> None:
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
        self.children: dict[str, array[float]] = {}  # by parent call id: starts and ends
        self.names = CallNames()  # every call's id, by its function
        self.busy = 0
        self.busiest: tuple[float, str] = (0.0, "")
        self.actors: dict[str, ActorRun] = {}
        self.leaks: list[Finding] = []
        self.lanes: list[Lane] = []  # what the pictures draw of each process
        # The tasks the driver's long waits named, filled with their calls' ends.
        self.waited = waited
        self.queues = queues or Queues()  # submissions, first starts, stuck (see .queues)
        self.stuck_status: dict[str, str] = {}  # how each call reported stuck ended

    def process(  # noqa: PLR0912, PLR0915 -- the hot loop
        self, calls: Iterator[Call], start_line: StartLine | None = None
    ) -> None:
        """Take in one process's calls, in the order its files have them.

        ``start_line`` holds each call's ``call.start`` line as it goes by (``iter_calls``):
        the slowest calls' are kept, for their arguments.
        """
        functions, nodes = self.functions, self.nodes
        pending, ids_of, pack, seen = self.names.pending, self.names.ids_of, self.names.pack, 0
        leak, lane = LeakRun(), Lane()
        first, last, count = self.first, self.last, 0
        # The sums of the lane's next point, kept here: a local costs a fraction of a slot.
        point_calls, point_ran, point_failed, point_peak, stride, closing = 0, 0.0, 0, -1, 1, None
        since, until, waited = self.since, self.until, self.waited
        queues = self.queues
        started = queues.start if queues.joined else None
        idle_from: str | None = None  # the end of this process's last call read so far
        stuck = queues.stuck
        for call in calls:
            function, status, ended = call.function, call.status, call.ended
            if waited is not None and ended and call.task_id in waited:
                self._waited_on(call, ended, start_line)
            if started is not None and call.task_id:
                started(call.task_id, call.started or ended or "", ended, call.attempt, idle_from)
                if ended and (idle_from is None or ended > idle_from):
                    idle_from = ended
                if call.actor_id:
                    queues.actor_call(
                        call.actor_id, call.task_id, call.kind, call.attempt, call.started, ended
                    )
            if stuck and call.call_id in stuck:
                self.stuck_status[call.call_id] = status
            # Every call's id, whatever the window (a parent may be outside it); packed
            # every PACK_EVERY calls, in C.
            (pending.get(function) or ids_of(function)).append(call.call_id)
            seen += 1
            if seen == PACK_EVERY:
                pack()
                seen = 0
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
            if call.attempt and call.kind != "actor_init":  # an actor_init's: a restart
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
                aggregate.slowest_start = start_line.line if start_line is not None else None
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
                elif (
                    rss <= leak.last_rss
                    and leak.run is None
                    and len(leak.short) == 1
                    and leak.best is None  # after a run that grew: each call is counted
                ):
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
        pack()
        if closing is not None and point_calls:
            lane.close(closing, point_calls, point_ran, point_failed, point_peak)
        if count:
            self.calls += count
            self.processes += 1
            lane.name(call)
            self.lanes.append(lane)
        finding = leak.finding()
        if finding is not None:
            self.leaks.append(finding)
            lane.leak = finding.title

    def _waited_on(self, call: Call, ended: str, start_line: StartLine | None) -> None:
        """A call the driver's long wait named: its end (the last attempt's), its arguments."""
        assert self.waited is not None  # noqa: S101 -- only called when it is set
        known = self.waited[call.task_id or ""]
        if known is not None and known.ended >= ended:
            return
        arguments = ""
        line = start_line.line if start_line is not None else None
        if line is not None and b'"args"' in line:
            with contextlib.suppress(msgspec.DecodeError):
                start = msgspec.json.decode(line)
                arguments = f"{start.get('args', [])} {start.get('kwargs', {})}"
        self.waited[call.task_id or ""] = Waited(ended, call, arguments)

    def names_of(self, call_ids: list[str]) -> dict[str, str]:
        """The functions of calls, by their ids (an id itself where no such call was read)."""
        found = self.names.names_of(call_ids)
        return {call_id: found.get(call_id, call_id) for call_id in call_ids}

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
                "last": "", "traceback": None, "frames_locals": None, "task_ids": [],
                "nodes": set(),
            }  # fmt: skip
        group["count"] += 1
        group["first"] = min(group["first"], stamp)
        if stamp >= group["last"]:
            group["last"], group["traceback"] = stamp, call.traceback
            group["frames_locals"] = call.frames_locals  # the latest's, with its traceback
        if call.task_id and len(group["task_ids"]) < MAX_LISTED:
            group["task_ids"].append(call.task_id)
        if call.node_id:
            group["nodes"].add(call.node_id)


_INTERRUPTED_KEYS = (
    "function", "call_id", "task_id", "node_id", "worker_id", "pid", "started",
    "rss_start_bytes",
)  # fmt: skip


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
