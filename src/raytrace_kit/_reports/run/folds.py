"""The folds of a report's one pass: each takes the calls of one process and keeps one concern.

A :class:`~.tally.Tally` hands every call of a process, in the order its files have them,
to each fold that needs it (``Tally.process``): the call ids by function, the queue and
stuck records' side of each call, the window and its first and last, the failures and the
calls without an end, each function's durations and largest figures, memory (growth, the
leak run), CPU busyness, the timings of children and actor calls, and the lane the
pictures draw. Each writes into the tally's records (``sums.py``); none reads another's.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import msgspec

from raytrace_kit._reports.reading.columns import seconds
from raytrace_kit._reports.reading.driver import Waited
from raytrace_kit._reports.run.lanes import Lane
from raytrace_kit._reports.run.leaks import LeakRun
from raytrace_kit._reports.run.names import PACK_EVERY, CallNames
from raytrace_kit._reports.run.packing import task_key
from raytrace_kit._reports.run.sums import MAX_LISTED, ActorRun, Children, FailureGroup, Function

if TYPE_CHECKING:
    from raytrace_kit._output.schema import Call
    from raytrace_kit._reports.reading.calls import StartLine
    from raytrace_kit._reports.run.queues import Queues
    from raytrace_kit._reports.run.sums import RunSums

__all__ = [
    "BUSY_MIN_S",
    "Busy",
    "Functions",
    "Ids",
    "Lanes",
    "Memory",
    "Outcomes",
    "Queued",
    "StuckStatus",
    "Timings",
    "WaitedOn",
    "Window",
]

BUSY_MIN_S = 0.05  # CPU against wall time means something only for calls this long


class Ids:
    """Every call's id under its function, whatever the window (a parent may be outside it)."""

    __slots__ = ("ids_of", "pack", "pending", "seen")

    def __init__(self, names: CallNames) -> None:
        self.pending, self.ids_of, self.pack, self.seen = names.pending, names.ids_of, names.pack, 0

    def take(self, call: Call) -> None:
        (self.pending.get(call.function) or self.ids_of(call.function)).append(call.call_id)
        self.seen += 1
        if self.seen == PACK_EVERY:  # packed every PACK_EVERY calls, in C
            self.pack()
            self.seen = 0


class Queued:
    """Each task's first start and last end, and an actor's calls, for the queue join."""

    __slots__ = ("idle_from", "queues")

    def __init__(self, queues: Queues) -> None:
        self.queues = queues
        self.idle_from: str | None = None  # the end of this process's last call read so far

    def take(self, call: Call) -> None:
        if not call.task_id:
            return
        ended, idle_from = call.ended, self.idle_from
        self.queues.start(call.task_id, call.started or ended or "", ended, call.attempt, idle_from)
        if ended and (idle_from is None or ended > idle_from):
            self.idle_from = ended
        if call.actor_id:
            self.queues.actor_call(
                call.actor_id, call.task_id, call.kind, call.attempt, call.started, ended
            )


class StuckStatus:
    """How each call that reported itself stuck ended."""

    __slots__ = ("status", "stuck")

    def __init__(self, sums: RunSums, queues: Queues) -> None:
        self.stuck, self.status = queues.stuck, sums.stuck_status

    def take(self, call: Call) -> None:
        if self.stuck and call.call_id in self.stuck:
            self.status[call.call_id] = call.status


class WaitedOn:
    """The calls the driver's long waits named: each one's end (the last attempt's), arguments."""

    __slots__ = ("start_line", "waited")

    def __init__(self, waited: dict[str, Waited | None], start_line: StartLine | None) -> None:
        self.waited, self.start_line = waited, start_line

    def take(self, call: Call) -> None:
        ended = call.ended
        if not ended or call.task_id not in self.waited:
            return
        known = self.waited[call.task_id or ""]
        if known is not None and known.ended >= ended:
            return
        arguments = ""
        line = self.start_line.line if self.start_line is not None else None
        if line is not None and b'"args"' in line:
            with contextlib.suppress(msgspec.DecodeError):
                start = msgspec.json.decode(line)
                arguments = f"{start.get('args', [])} {start.get('kwargs', {})}"
        self.waited[call.task_id or ""] = Waited(ended, call, arguments)


class Window:
    """The calls that started within the report's window: how many, the first and last stamps."""

    __slots__ = ("count", "first", "last", "nodes", "since", "until")

    def __init__(self, sums: RunSums, since: str | None, until: str | None) -> None:
        self.since, self.until, self.nodes = since, until, sums.nodes
        self.first, self.last, self.count = sums.first, sums.last, 0

    def take(self, call: Call) -> str | None:
        """The call's start (or end) if it is in the window, else ``None``."""
        ended = call.ended
        begun = call.started or ended or ""
        since, until = self.since, self.until
        if (since is not None and begun < since) or (until is not None and begun >= until):
            return None
        self.count += 1
        if begun and begun < self.first:
            self.first = begun
        if ended and ended > self.last:
            self.last = ended
        if call.node_id:
            self.nodes.add(call.node_id)
        return begun

    def reach(self, stamp: str) -> None:
        """A call without an end: its start is as late as the run is known to go."""
        self.last = max(self.last, stamp)

    def close(self, sums: RunSums) -> None:
        sums.first, sums.last = self.first, self.last


class Outcomes:
    """Failures, grouped by function and error type, and calls without an end (listed)."""

    __slots__ = ("sums",)

    def __init__(self, sums: RunSums) -> None:
        self.sums = sums

    def failure(self, call: Call) -> None:
        sums = self.sums
        sums.failed += 1
        if call.task_id:
            sums.failed_tasks.add(task_key(call.task_id))
        group = FailureGroup.of(call)
        known = sums.failures.get((group.function, group.error_type))
        if known is None:
            sums.failures[group.function, group.error_type] = group
        else:
            known.merge(group)

    def interrupted(self, call: Call) -> None:
        sums = self.sums
        sums.interrupted_count += 1
        if len(sums.interrupted) < MAX_LISTED:
            sums.interrupted.append({k: getattr(call, k) for k in _INTERRUPTED_KEYS})


_INTERRUPTED_KEYS = (
    "function",
    "call_id",
    "task_id",
    "node_id",
    "worker_id",
    "pid",
    "started",
    "rss_start_bytes",
)


class Functions:
    """Each function's retries, durations, slowest call (its start line kept) and kind."""

    __slots__ = ("functions", "start_line", "sums")

    def __init__(self, sums: RunSums, start_line: StartLine | None) -> None:
        self.sums, self.functions, self.start_line = sums, sums.functions, start_line

    def take(self, call: Call) -> Function:
        aggregate = self.functions.get(call.function)
        if aggregate is None:
            aggregate = self.functions[call.function] = Function()
        if call.attempt and call.kind != "actor_init":  # an actor_init's: a restart
            self.sums.retried += 1
            if call.status == "ok":
                aggregate.retries += 1
                if call.task_id:
                    self.sums.recovered.add(task_key(call.task_id))
        duration = call.duration_s
        if duration is None:
            return aggregate
        aggregate.durations.append(duration)
        slowest = aggregate.slowest
        if slowest is None or duration > (slowest.duration_s or 0.0):
            aggregate.slowest = call
            line = self.start_line
            aggregate.slowest_start = line.line if line is not None else None
        if call.kind == "task":
            aggregate.task = True
        return aggregate


class Memory:
    """Each function's largest growth and private memory, and the process's leak run."""

    __slots__ = ("leak",)

    def __init__(self) -> None:
        self.leak = LeakRun()

    def take(self, call: Call, aggregate: Function) -> None:
        leak = self.leak
        if call.profile_path and call.profile_path.endswith(".bin"):
            leak.seen(call.profile_path)  # memray's: its leaks view, for that finding
        rss = call.rss_end_bytes
        if rss is None:
            return
        start = call.rss_start_bytes
        if start is not None and (aggregate.growth is None or rss - start > aggregate.growth):
            aggregate.growth = rss - start
        private = call.rss_minus_shr_end_bytes
        if private is not None and (aggregate.private is None or private > aggregate.private):
            aggregate.private = private
        if not call.ended:
            return
        if (
            rss <= leak.last_rss
            and leak.run is None
            and len(leak.short) == 1
            and leak.best is None  # after a run that grew: each call is counted
        ):
            leak.short[0], leak.last_rss = call, rss  # flat memory: no call, no list
        else:
            leak.add(call, rss)

    def close(self, sums: RunSums, lane: Lane) -> None:
        finding = self.leak.finding()
        if finding is not None:
            sums.leaks.append(finding)
            lane.leak = finding.title


class Busy:
    """The calls that kept more than one CPU busy (every thread's CPU against wall time)."""

    __slots__ = ("sums",)

    def __init__(self, sums: RunSums) -> None:
        self.sums = sums

    def take(self, call: Call, duration: float) -> None:
        cpu = call.process_cpu_s or 0.0  # a library's thread pool shows here
        if duration > BUSY_MIN_S and cpu > 1.5 * duration:
            self.sums.busy += 1
            self.sums.busiest = max(self.sums.busiest, (cpu / duration, call.function))


class Timings:
    """The spans of each parent's task calls, and of each actor's method calls."""

    __slots__ = ("sums",)

    def __init__(self, sums: RunSums) -> None:
        self.sums = sums

    def take(self, call: Call, ended: str, duration: float) -> None:
        end = seconds(ended)
        parent = call.parent_call_id
        if parent and call.kind == "task":  # an actor's calls queue by design
            children = self.sums.children.get(parent)
            if children is None:
                children = self.sums.children[parent] = Children()
            children.add(end - duration, end)
        if call.actor_id and call.kind == "actor_method":
            run = self.sums.actors.get(call.actor_id)
            if run is None:
                run = self.sums.actors[call.actor_id] = ActorRun(call.function)
            run.add(end - duration, end)


class Lanes:
    """The process's lane: the sums of its next point, closed every ``stride`` calls."""

    __slots__ = ("calls", "closing", "failed", "lane", "peak", "ran", "stride")

    def __init__(self) -> None:
        self.lane = Lane()
        self.calls, self.ran, self.failed, self.peak, self.stride = 0, 0.0, 0, -1, 1
        self.closing: Call | None = None

    def failure(self, call: Call) -> None:
        self.lane.failure(call)
        self.failed += 1

    def take(self, call: Call, duration: float) -> None:
        rss = call.rss_end_bytes
        if rss is not None and rss > self.peak:
            self.peak = rss
        self.calls, self.ran, self.closing = self.calls + 1, self.ran + duration, call
        if self.calls >= self.stride:
            self.lane.close(call, self.calls, self.ran, self.failed, self.peak)
            self.calls, self.ran, self.failed, self.peak = 0, 0.0, 0, -1
            self.stride = self.lane.stride

    def close(self) -> Lane:
        if self.closing is not None and self.calls:
            self.lane.close(self.closing, self.calls, self.ran, self.failed, self.peak)
        return self.lane
