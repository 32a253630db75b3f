"""A node's live aggregates, from the lines its event files grew by (:mod:`.cursor`).

:class:`LiveTally` turns those lines into
what ``raytrace-kit top`` shows of the node: per function the calls running, submitted,
started, done and failed, a histogram of durations (mergeable: percentiles to about 6 %),
the calls in flight with their age, the latest failures, each process's memory. Both live
in the node's reader (an actor: ``_driver/live.py``) between refreshes; nothing here
needs Ray.
"""

from __future__ import annotations

import heapq
import math
import re
import time
from collections import deque
from typing import Any

import msgspec

from raytrace_kit._reports.explain.linking import still_running
from raytrace_kit._reports.run.rules import STRAGGLER_MIN_CALLS

__all__ = [
    "BINS_PER_DECADE",
    "LiveEvent",
    "LiveTally",
    "bin_value",
    "percentile",
]


BINS_PER_DECADE = 40  # a duration's bin spans a factor of 10 ** (1 / 40): 6 %
OLDEST = 10  # calls in flight a node sends, the oldest first...
OLDEST_PER_FUNCTION = 3  # ...and each function's oldest (its stragglers are among them)
FAILURES = 10  # the latest failures a node keeps
SLOWEST = 3  # each function's slowest finished calls a node keeps (stragglers among them)
_SHORTEST = 1e-6
_ERROR_CHARS = 200


class LiveEvent(msgspec.Struct, gc=False):
    """What a live view reads of a ``call.start`` or ``call.end`` (the rest is skipped).

    The node and the process are those of the file the line is in (its name says them).
    """

    timestamp: str = ""
    function: str = ""
    call_id: str = ""
    task_id: str | None = None
    status: str | None = None
    duration_s: float | None = None
    attempt: int | None = None
    rss_bytes: int | None = None
    error_type: str | None = None
    error: str | None = None


class _Stuck(msgspec.Struct, gc=False):
    call_id: str = ""
    stack: list[list[Any]] = msgspec.field(default_factory=list)


class _Named(msgspec.Struct, gc=False):
    function: str = ""


_EVENT = msgspec.json.Decoder(LiveEvent).decode
_STUCK = msgspec.json.Decoder(_Stuck).decode
_NAMED = msgspec.json.Decoder(_Named).decode
_FUNCTION = b'"function":"'
_OPERATOR = b'"operator":"'
_BAD = (msgspec.DecodeError, msgspec.ValidationError)


_FILE = re.compile(r"^events-(?P<node>[^-]+)-(?P<pid>\d+)(?:\.\d+)?\.jsonl$")


def _writer(name: str) -> tuple[str | None, int | None]:
    """The node (its id's first 12 characters) and pid an event file's name says."""
    found = _FILE.match(name)
    return (found["node"], int(found["pid"])) if found else (None, None)


def _submitted(line: bytes) -> str | None:
    """A ``call.submit``'s function, read in place (the line is not decoded)."""
    at = line.find(_FUNCTION)
    close = line.find(b'"', at + 12) if at >= 0 else -1
    if close > at + 12 and b"\\" not in line[at + 12 : close]:
        return line[at + 12 : close].decode("utf-8", "replace")
    try:
        return _NAMED(line).function
    except _BAD:
        return None


def bin_value(seconds: float) -> int:
    """A duration's histogram bin (``10 ** (k / BINS_PER_DECADE)`` seconds and up)."""
    return math.floor(math.log10(max(seconds, _SHORTEST)) * BINS_PER_DECADE)


def percentile(bins: dict[int, int], share: float) -> float | None:
    """The ``share`` quantile of a histogram, at the middle of its bin (``None``: empty)."""
    total = sum(bins.values())
    if not total:
        return None
    rank, seen = share * (total - 1), 0
    for k in sorted(bins):
        seen += bins[k]
        if seen > rank:
            return float(10 ** ((k + 0.5) / BINS_PER_DECADE))
    return None


class _Function:
    __slots__ = ("bins", "died", "done", "failed", "slowest", "started", "submitted")

    def __init__(self) -> None:
        self.submitted = self.started = self.done = self.failed = self.died = 0
        self.bins: dict[int, int] = {}
        # its slowest finished calls, a min-heap: (seconds, call id, what top shows of it)
        self.slowest: list[tuple[float, str, dict[str, Any]]] = []


class LiveTally:
    """What ``top`` shows of one node, kept up to date from its new lines (see the module)."""

    def __init__(self) -> None:
        self.functions: dict[str, _Function] = {}
        # call id -> [function, started, node, pid, task id, attempt, where]
        self.running: dict[str, list[Any]] = {}
        self.failures: deque[dict[str, Any]] = deque(maxlen=FAILURES)
        self.processes: dict[int | None, tuple[int, str, str | None]] = {}  # rss, stamp, node
        self.events = 0
        self.operators: dict[str, str] = {}  # a Ray Data UDF's function -> its operator
        # (function, error type) -> [failures, the latest]: nineteen alike failures, one row
        self.failure_kinds: dict[tuple[str, str], list[Any]] = {}

    def _aggregate(self, name: str) -> _Function:
        found = self.functions.get(name)
        if found is None:
            found = self.functions[name] = _Function()
        return found

    def take(self, lines: list[bytes], name: str = "") -> None:  # noqa: PLR0912, PLR0915 -- hot loop
        """Take in the new lines of the event file ``name``, in order.

        A line cut short is skipped; lines the kit did not write as call events (another
        writer's spacing, a user's event) count as events and nothing else.
        """
        self.events += len(lines)
        node, pid = _writer(name)
        running, processes, functions = self.running, self.processes, self.functions
        for line in lines:
            at = line.find(b'"event":"call.', 0, 120) + 14
            if at == 13:
                continue
            kind = line[at : at + 4]
            if kind == b'end"':
                try:
                    event = _EVENT(line)
                except _BAD:
                    continue
                entry = running.pop(event.call_id, None)
                aggregate = functions.get(event.function) or self._aggregate(event.function)
                if event.status == "error":
                    aggregate.failed += 1
                    failure = _failure(event, node, pid)
                    self.failures.append(failure)
                    alike = self.failure_kinds.setdefault(
                        (event.function, event.error_type or "?"), [0, failure]
                    )
                    alike[0] += 1
                    alike[1] = failure
                else:
                    aggregate.done += 1
                if event.rss_bytes is not None:
                    processes[pid] = (event.rss_bytes, event.timestamp, node)
                duration = event.duration_s
                if duration is not None:
                    k = bin_value(duration)
                    bins = aggregate.bins
                    bins[k] = bins.get(k, 0) + 1
                    slowest = aggregate.slowest
                    if len(slowest) < SLOWEST or duration > slowest[0][0]:
                        _keep_slowest(slowest, event, duration, entry, node, pid)
            elif kind == b"star":
                try:
                    event = _EVENT(line)
                except _BAD:
                    continue
                if not event.attempt:
                    aggregate = functions.get(event.function) or self._aggregate(event.function)
                    aggregate.started += 1
                    if event.function not in self.operators and _OPERATOR in line:
                        self._operator(event.function, line)
                running[event.call_id] = [
                    event.function, event.timestamp, node, pid, event.task_id,
                    event.attempt or 0, None,
                ]  # fmt: skip
                if pid not in processes and event.rss_bytes is not None:
                    processes[pid] = (event.rss_bytes, event.timestamp, node)
            elif kind == b"subm":
                function = _submitted(line)
                if function is not None:
                    self._aggregate(function).submitted += 1
            elif kind == b"stuc":
                try:
                    stuck = _STUCK(line)
                except _BAD:
                    continue
                if stuck.call_id in running and stuck.stack and len(stuck.stack[-1]) > 1:
                    frame = stuck.stack[-1]
                    running[stuck.call_id][6] = f"{frame[0]}:{frame[1]}"

    def _operator(self, function: str, line: bytes) -> None:
        """The operator a Ray Data UDF's ``call.start`` names (read in place)."""
        at = line.find(_OPERATOR) + len(_OPERATOR)
        close = line.find(b'"', at)
        if close > at and b"\\" not in line[at:close]:
            self.operators[function] = line[at:close].decode("utf-8", "replace")

    def reap(self) -> None:
        """Calls whose process died are no longer running: counted as died."""
        checked: dict[int | None, bool] = {}
        for call_id, entry in list(self.running.items()):
            pid = entry[3]
            alive = checked.get(pid)
            if alive is None:
                alive = checked[pid] = still_running(pid, entry[1])
            if not alive:
                del self.running[call_id]
                self._aggregate(entry[0]).died += 1

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """This node's view now, as plain data (what travels to the caller each refresh)."""
        now = time.time() if now is None else now
        counts: dict[str, int] = {}
        for entry in self.running.values():
            counts[entry[0]] = counts.get(entry[0], 0) + 1
        functions = {
            name: [
                counts.get(name, 0),
                f.submitted,
                f.started,
                f.done,
                f.failed,
                f.died,
                f.bins,
                [call for _, _, call in f.slowest],
            ]
            for name, f in self.functions.items()
        }
        return {
            "time": now,
            "events": self.events,
            "functions": functions,
            "oldest": [_flying(call_id, entry, now) for call_id, entry in self._oldest()],
            "failures": list(self.failures),
            "operators": dict(self.operators),
            "failure_kinds": [[*key, n, latest] for key, (n, latest) in self.failure_kinds.items()],
            "processes": [
                {"pid": pid, "rss_bytes": rss, "last": last, "node_id": node}
                for pid, (rss, last, node) in self.processes.items()
            ],
        }

    def _oldest(self) -> list[tuple[str, list[Any]]]:
        """The oldest calls in flight, and each function's oldest few."""
        by_start = lambda item: item[1][1]  # noqa: E731 -- a key, named once
        chosen = dict(heapq.nsmallest(OLDEST, self.running.items(), key=by_start))
        per: dict[str, list[tuple[str, list[Any]]]] = {}
        for item in self.running.items():
            per.setdefault(item[1][0], []).append(item)
        for items in per.values():
            chosen.update(heapq.nsmallest(OLDEST_PER_FUNCTION, items, key=by_start))
        return sorted(chosen.items(), key=by_start)

    def forget_processes(self, older_than: str) -> None:
        """Drop processes whose last record is older than ``older_than`` and run nothing."""
        busy = {entry[3] for entry in self.running.values()}
        for pid in [p for p, (_, last, _) in self.processes.items() if last < older_than]:
            if pid not in busy:
                del self.processes[pid]


def _flying(call_id: str, entry: list[Any], now: float) -> dict[str, Any]:
    function, started, node, pid, task, attempt, where = entry
    return {
        "function": function, "call_id": call_id, "task_id": task, "node_id": node, "pid": pid,
        "attempt": attempt, "started": started, "running_s": max(now - _epoch(started), 0.0),
        "where": where, "state": "running",
    }  # fmt: skip


def _epoch(stamp: str) -> float:
    from datetime import datetime  # noqa: PLC0415 -- a few calls per refresh

    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return time.time()


def _keep_slowest(  # noqa: PLR0917 -- its one caller's
    slowest: list[tuple[float, str, dict[str, Any]]],
    event: LiveEvent,
    duration: float,
    entry: list[Any] | None,
    node: str | None,
    pid: int | None,
) -> None:
    """Keep a finished call among its function's :data:`SLOWEST` slowest."""
    call = {
        "function": event.function, "call_id": event.call_id, "task_id": event.task_id,
        "node_id": node, "pid": pid, "running_s": duration,
        "ended": event.timestamp, "state": "finished", "where": entry[6] if entry else None,
    }  # fmt: skip
    if len(slowest) < SLOWEST:
        heapq.heappush(slowest, (duration, event.call_id, call))
    else:
        heapq.heappushpop(slowest, (duration, event.call_id, call))


def _failure(event: LiveEvent, node: str | None, pid: int | None) -> dict[str, Any]:
    line = f"{event.error_type or '?'}: {event.error or ''}".split("\n")[0]
    return {
        "function": event.function, "call_id": event.call_id, "task_id": event.task_id,
        "node_id": node, "pid": pid, "ended": event.timestamp,
        "error": line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 3] + "...",
    }  # fmt: skip


def medians_of(functions: dict[str, Any]) -> dict[str, float]:
    """Each function's median from a merged histogram (enough calls to judge stragglers)."""
    found = {}
    for name, bins in functions.items():
        if sum(bins.values()) >= STRAGGLER_MIN_CALLS:
            median = percentile(bins, 0.5)
            if median is not None:
                found[name] = median
    return found
