"""The report's sums as records that merge: per function, actor, parent, failure, and the run.

Each record has one :meth:`merge` (``a.merge(b)``: ``a`` now holds what both held, ``b``
read after ``a``), the one place its combining rules live. A report of files fills them in
one pass (``tally.py``); a node's share ships them (``partial.py``) and a cluster's report
merges them in the order a report of the collected files reads them (``merge.py``), so
the merged records are the ones that report would fill: the same counts, the same
durations bit for bit, the same first and largest, ties broken the same way.

Per-call numbers travel packed (``packing.py``): a record's pickle holds its durations or
spans packed exactly, so what a node sends is a third of a byte a call, not eight.
"""

from __future__ import annotations

import contextlib
import itertools
from array import array
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call
from raytrace_kit._reports.run.finding import Finding
from raytrace_kit._reports.run.packing import pack_floats, unpack_floats

__all__ = [
    "MAX_LISTED",
    "ActorRun",
    "Children",
    "FailureGroup",
    "Function",
    "LaneTotal",
    "RunSums",
]

MAX_LISTED = 1000  # task ids per failure group, interrupted calls: enough to act on
_OVERLAP_S = 1e-4  # children closer than this count as one after the other (rules.py)


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

    def merge(self, other: Function) -> None:
        """Add ``other``'s calls: durations, the slowest (the first read wins ties), largest."""
        self.durations.extend(other.durations)
        known, slowest = self.slowest, other.slowest
        if slowest is not None and (
            known is None or (slowest.duration_s or 0.0) > (known.duration_s or 0.0)
        ):
            self.slowest, self.slowest_start = slowest, other.slowest_start
        if other.growth is not None and (self.growth is None or other.growth > self.growth):
            self.growth = other.growth
        if other.private is not None and (self.private is None or other.private > self.private):
            self.private = other.private
        self.retries += other.retries
        self.task = self.task or other.task

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

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__slots__}
        state["durations"] = pack_floats(self.durations)  # sorted: their order is not used
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self.durations = unpack_floats(state["durations"])


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
        """One more call of the actor, ``start`` to ``end`` (epoch seconds)."""
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

    def merge(self, other: ActorRun) -> None:
        """Continue where ``other``'s run (read later: a restarted actor's) takes over."""
        if self.calls:
            gap = other.first - self.last
            self.overlapped = self.overlapped or gap < -1e-3
            self.gaps += max(gap, 0.0) + other.gaps
        else:
            self.first, self.gaps = other.first, other.gaps
        self.calls += other.calls
        self.busy += other.busy
        self.last = max(self.last, other.last)
        self.overlapped = self.overlapped or other.overlapped


class Children:
    """A parent's task calls: how many, and their spans (start, end, ...) while none overlap.

    Where some overlapped (known where they were read together), ``overlapped`` says so
    and the spans are dropped: the one-at-a-time rule would pass the parent over.
    """

    __slots__ = ("count", "overlapped", "times")

    def __init__(self) -> None:
        self.count = 0
        self.times: array[float] = array("d")  # each child's start and end, in end order
        self.overlapped = False

    def add(self, start: float, end: float) -> None:
        """One more child, ``start`` to ``end`` (epoch seconds)."""
        self.count += 1
        self.times.append(start)
        self.times.append(end)

    def spans(self) -> list[tuple[float, float]]:
        """The children's spans, in order of start."""
        times = self.times
        return sorted(zip(times[::2], times[1::2], strict=True))

    def one_at_a_time(self) -> bool:
        """Whether each child started after the one before had ended."""
        return not self.overlapped and all(
            later[0] >= earlier[1] - _OVERLAP_S
            for earlier, later in itertools.pairwise(self.spans())
        )

    def merge(self, other: Children) -> None:
        """Add ``other``'s children (the same parent's, read elsewhere)."""
        self.count += other.count
        self.overlapped = self.overlapped or other.overlapped
        if not self.overlapped:
            self.times.extend(other.times)

    def __getstate__(self) -> tuple[int, bytes | None]:
        if self.overlapped or not self.one_at_a_time():
            return self.count, None
        return self.count, pack_floats([t for span in self.spans() for t in span], keep_order=True)

    def __setstate__(self, state: tuple[int, bytes | None]) -> None:
        self.count, packed = state
        self.overlapped = packed is None
        self.times = unpack_floats(packed) if packed is not None else array("d")


class FailureGroup:
    """The failures of one function with one error type: how many, when, the latest's text."""

    __slots__ = (
        "count",
        "error_type",
        "first",
        "frames_locals",
        "function",
        "last",
        "nodes",
        "task_ids",
        "traceback",
    )

    def __init__(self, function: str, error_type: str, first: str) -> None:
        self.function, self.error_type = function, error_type
        self.count = 0
        self.first, self.last = first, ""
        self.traceback: str | None = None
        self.frames_locals: Any = None
        self.task_ids: list[str] = []
        self.nodes: set[str] = set()

    @classmethod
    def of(cls, call: Call) -> FailureGroup:
        """The group of one failed call."""
        stamp = call.ended or call.started
        group = cls(call.function, call.error_type or "?", stamp)
        group.count, group.last = 1, stamp
        group.traceback, group.frames_locals = call.traceback, call.frames_locals
        if call.task_id:
            group.task_ids.append(call.task_id)
        if call.node_id:
            group.nodes.add(call.node_id)
        return group

    def merge(self, other: FailureGroup) -> None:
        """Add ``other``'s failures: the latest's traceback wins (ties: the later read)."""
        self.count += other.count
        self.first = min(self.first, other.first)
        if other.last >= self.last:
            self.last, self.traceback = other.last, other.traceback
            self.frames_locals = other.frames_locals  # the latest's, with its traceback
        self.task_ids.extend(other.task_ids[: max(MAX_LISTED - len(self.task_ids), 0)])
        self.nodes |= other.nodes

    def copy(self) -> FailureGroup:
        """A group of its own (merging into it leaves this one as it is)."""
        made = FailureGroup(self.function, self.error_type, self.first)
        made.merge(self)
        return made

    def row(self) -> dict[str, Any]:
        """The report's row: task ids and nodes sorted."""
        return {
            "function": self.function,
            "error_type": self.error_type,
            "count": self.count,
            "first": self.first,
            "last": self.last,
            "traceback": self.traceback,
            "frames_locals": self.frames_locals,
            "task_ids": sorted(set(self.task_ids)),
            "nodes": sorted(self.nodes),
        }


class LaneTotal:
    """What a lane weighs in the choice of the lanes drawn: marked (leak, failure, kill), calls."""

    __slots__ = ("marked", "total")

    def __init__(self, marked: bool, total: int) -> None:
        self.marked, self.total = marked, total

    def __getstate__(self) -> tuple[bool, int]:
        return self.marked, self.total

    def __setstate__(self, state: tuple[bool, int]) -> None:
        self.marked, self.total = state


class RunSums:
    """The whole run's sums, and its records by function, actor, parent and failure."""

    __slots__ = (
        "actors",
        "busiest",
        "busy",
        "calls",
        "children",
        "failed",
        "failed_tasks",
        "failures",
        "first",
        "functions",
        "interrupted",
        "interrupted_count",
        "last",
        "leaks",
        "nodes",
        "processes",
        "recovered",
        "retried",
        "stuck_status",
    )

    def __init__(self) -> None:
        self.calls = self.failed = self.interrupted_count = self.retried = 0
        self.processes = self.busy = 0
        self.busiest: tuple[float, str] = (0.0, "")  # the most CPUs a call kept busy, its function
        self.nodes: set[str] = set()
        self.first, self.last = "~", ""
        self.failures: dict[tuple[str, str], FailureGroup] = {}
        self.failed_tasks: set[int] = set()  # tasks with a failed attempt (packing.task_key)...
        self.recovered: set[int] = set()  # ...and tasks a retry saved
        self.interrupted: list[dict[str, Any]] = []
        self.functions: dict[str, Function] = {}
        self.actors: dict[str, ActorRun] = {}
        self.children: dict[str, Children] = {}  # by parent call id
        self.leaks: list[Finding] = []
        self.stuck_status: dict[str, str] = {}  # how each call reported stuck ended

    def sums(self) -> RunSums:
        """These sums alone, as they travel (a :class:`~.tally.Tally` is more)."""
        made = RunSums.__new__(RunSums)
        for name in RunSums.__slots__:
            setattr(made, name, getattr(self, name))
        return made

    def merge(self, other: RunSums) -> None:
        """Add ``other``'s run (read after this one) to this one, record by record."""
        self.calls += other.calls
        self.failed += other.failed
        self.interrupted_count += other.interrupted_count
        self.retried += other.retried
        self.processes += other.processes
        self.busy += other.busy
        self.busiest = max(self.busiest, other.busiest)
        self.nodes |= other.nodes
        self.first, self.last = min(self.first, other.first), max(self.last, other.last)
        for key, group in other.failures.items():
            known = self.failures.get(key)
            if known is None:
                self.failures[key] = group.copy()
            else:
                known.merge(group)
        self.failed_tasks |= other.failed_tasks
        self.recovered |= other.recovered
        self.interrupted.extend(other.interrupted[: max(MAX_LISTED - len(self.interrupted), 0)])
        for name, function in other.functions.items():
            self.functions.setdefault(name, Function()).merge(function)
        for actor, run in other.actors.items():
            self.actors.setdefault(actor, ActorRun(run.function)).merge(run)
        for parent, children in other.children.items():
            self.children.setdefault(parent, Children()).merge(children)
        self.leaks.extend(other.leaks)
        self.stuck_status.update(other.stuck_status)
