"""What the in-flight records add to a report: time in queue, calls never started, stuck calls.

A ``call.submit`` (written by the submitting process) and the ``call.start`` of the same
task (written by the process that ran it) give the call's time in queue; a submission
with no start by the end of the records is a call that never started; a ``call.stuck``
says where a call was when it ran past its ``stuck_after``, which stays known after the
job or the worker is killed. Kept while the report streams: per submission and per first
start, one hash and one float (the join waits for the end, since either side may be read
first); the last stuck event of each call.
"""

from __future__ import annotations

import itertools
import mmap
import statistics
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from raytrace_kit._output.schema import Stuck
from raytrace_kit._reports.columns import (
    Clock,
    Stamps,
    column_called,
    column_loops,
    decode_submission,
    grouped,
    joined,
)
from raytrace_kit._reports.finding import Finding, loop_title, most_first

__all__ = [
    "MAX_LISTED",
    "QUEUE_FINDING_S",
    "Queues",
    "behind",
    "flights",
    "has_submissions",
    "loops_of",
]

MAX_LISTED = 1000  # calls never started, stuck calls: enough to act on
KEEP_TASK_IDS = 4 * MAX_LISTED  # submissions whose task id a report keeps (the first read)
QUEUE_FINDING_S = 1.0  # a function whose calls wait this long (median) in queue...
QUEUE_FINDING_RATIO = 2.0  # ...and longer than this many times they run: a finding
LOOP_MIN = 5  # calls of one line of the driver, each after the one before ended: a loop
_STUCK = msgspec.json.Decoder(Stuck).decode


class _Cancel(msgspec.Struct, gc=False):
    task_id: str | None = None
    force: bool = False


_CANCEL = msgspec.json.Decoder(_Cancel).decode


_HEAD = 256 * 1024  # a submitting process writes its first records early: looked at first


def has_submissions(files: list[Path]) -> bool:
    """Whether any of these event files holds a ``call.submit`` (a byte search, no decoding).

    The start of every file is searched before the rest of any: the driver's file, or a
    parent's, has one near its start, so a session with submissions is known at once.
    """
    for whole in (False, True):
        for file in files:
            try:
                with (
                    file.open("rb") as handle,
                    mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
                ):
                    if whole and len(data) <= _HEAD:
                        continue  # searched whole already
                    if data.find(_SUBMIT_MARK, 0, len(data) if whole else _HEAD) >= 0:
                        return True
            except (OSError, ValueError):  # empty (mmap refuses), or gone
                continue
    return False


_SUBMIT_MARK = b'"event":"call.submit"'


class Queues:
    """Submissions, first starts and last ends by task, and the last stuck event of each call.

    ``joined``: whether first starts are kept (only when the files hold submissions: a run
    without them costs nothing more per call). Kept as columns (a task's hash, a stamp's
    bytes, a name's number), joined in :meth:`results` with numpy: a third of a million
    submissions cost 30 MB and a second less than dicts of tuples.
    """

    def __init__(
        self, *, joined: bool = True, since: str | None = None, until: str | None = None
    ) -> None:
        self.joined = joined
        self.since, self.until = since, until  # the report's window, on submission times
        self.clock = Clock()
        # Submissions, one row each, in reading order: the task, when, the names' numbers
        # (function, site, actor: -1 for none), whether the driver submitted it.
        self.submit_keys = array("q")
        self.submit_stamps = Stamps()
        self.submit_names = array("q")  # three per row
        self.by_driver = bytearray()
        self.first_task_ids: dict[str, None] = {}  # the first tasks' ids (a report lists a few)
        self.names: dict[str, int] = {}  # each function, site, actor, numbered once
        self.start_keys = array("q")  # each task's first attempt's start(s)
        self.start_stamps = Stamps()
        self.end_keys = array("q")  # every attempt's end: a task's last, for a loop's calls
        self.end_stamps = Stamps()
        self.stuck: dict[str, Stuck] = {}
        self.shared: dict[str, str] = {}  # each function, site, actor's one copy (joins)
        self.killed: set[str] = set()  # tasks ray.cancel(force=True) ended: their workers
        self.ready: dict[str, list[float]] = {}  # actor -> the ends of its __init__ calls
        self.actor_last: dict[str, float] = {}  # actor -> its last call's end, as read
        self.before: dict[int, float] = {}  # method task -> its actor's last end at its start

    def line(self, raw: bytes) -> None:
        """Take one ``call.submit`` or ``call.stuck`` line (``iter_calls``' others)."""
        try:
            if b'"event":"call.submit"' in raw[:120]:
                record = decode_submission(raw)
                stamp = record.timestamp
                if (self.since is not None and stamp < self.since) or (
                    self.until is not None and stamp >= self.until
                ):
                    return
                task = record.task_id
                if task and stamp and self.submit_stamps.add(stamp):
                    if len(self.first_task_ids) < KEEP_TASK_IDS:  # the first tasks read
                        self.first_task_ids.setdefault(task)
                    self.submit_keys.append(hash(task))
                    names, number = self.names, self._number
                    site = record.site
                    self.submit_names.extend((
                        names.get(record.function) or number(record.function),
                        names.get(site) or number(site) if site else -1,
                        number(record.actor_id)
                        if record.kind == "actor_method" and record.actor_id else -1,
                    ))  # fmt: skip
                    self.by_driver.append(record.parent_call_id is None)
            elif b'"event":"call.stuck"' in raw[:120]:
                event = _STUCK(raw)
                if event.call_id in self.stuck or len(self.stuck) < MAX_LISTED:
                    self.stuck[event.call_id] = event
            elif b'"event":"call.cancel"' in raw[:120]:
                cancel = _CANCEL(raw)
                if cancel.force and cancel.task_id and len(self.killed) < MAX_LISTED:
                    self.killed.add(cancel.task_id)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # a line cut short by a killed process

    def _number(self, name: str) -> int:
        """A name's number (the first name is 0: ``names.get(...) or`` lands here for it)."""
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = len(self.names)
        return found

    def start(self, task_id: str, begun: str, ended: str | None, attempt: int | None) -> None:
        """A call's first attempt's start (the queue ends there), and its task's last end."""
        key = hash(task_id)
        if not attempt and begun and self.start_stamps.add(begun):
            self.start_keys.append(key)
        if ended and self.end_stamps.add(ended):
            self.end_keys.append(key)

    def actor_call(
        self, actor_id: str, task_id: str, kind: str | None, attempt: int | None, ended: str | None
    ) -> None:
        """A call of an actor, in the order its process ran them (see :func:`behind`)."""
        last = self.actor_last
        if kind == "actor_method" and not attempt and actor_id in last:
            self.before.setdefault(self._key(task_id), last[actor_id])
        if ended:
            when = last[actor_id] = self._time(ended)
            if kind == "actor_init":
                self.ready.setdefault(actor_id, []).append(when)

    def _key(self, task_id: str) -> int:
        """A task's key in these tables (:class:`joins.NodeQueues`: alike in every process)."""
        return hash(task_id)

    def _time(self, stamp: str) -> float:
        """A stamp in these tables' unit: seconds (:class:`joins.NodeQueues`: microseconds)."""
        return self.clock(stamp)

    def results(self, ended: Callable[[str], str | None]) -> dict[str, Any]:
        """Time in queue per function, calls never started, stuck calls (for the report).

        ``ended`` gives a call's status by its id (``None`` if it never ended).
        """
        if not self.submit_keys:
            return flights({}, [], 0, self.stuck.values(), ended, [], {})
        import numpy  # noqa: PLC0415 -- only for a session with submissions (150 ms)

        keys = numpy.frombuffer(self.submit_keys, dtype=numpy.int64)
        rows = numpy.sort(numpy.unique(keys, return_index=True)[1])  # a task's first
        keys = keys[rows]
        when = self.submit_stamps.seconds(numpy)[rows]
        named = numpy.frombuffer(self.submit_names, dtype=numpy.int64).reshape(-1, 3)[rows]
        function, site, actor = named[:, 0], named[:, 1], named[:, 2]
        driver = numpy.frombuffer(self.by_driver, dtype=numpy.uint8)[rows].astype(bool)
        begun = joined(numpy, keys, self.start_keys, self.start_stamps, last=False)
        ends = joined(numpy, keys, self.end_keys, self.end_stamps, last=True)
        names = list(self.names)
        started = ~numpy.isnan(begun)
        # Time in queue: each function's, in the order the functions were first started.
        waited = numpy.where(begun > when, begun - when, 0.0)[started]
        waits = {
            names[number]: values
            for number, values in grouped(numpy, function[started], waited).items()
        }
        ids = list(self.first_task_ids)  # the n-th is the n-th row's: both first reads
        never = [
            {"function": names[function[row]], "submitted": float(when[row]),
             "site": names[site[row]] if site[row] >= 0 else None,
             "task_id": ids[row] if row < len(ids) else None}
            for row in numpy.flatnonzero(~started)[:MAX_LISTED].tolist()
        ]  # fmt: skip
        lined = driver & (site >= 0)
        loops = column_loops(numpy, site[lined], when[lined], ends[lined], names, LOOP_MIN)
        called = column_called(numpy, site[lined], function[lined], names)
        actors: dict[str, list[float]] = {}
        for row in numpy.flatnonzero(started & (actor >= 0)).tolist():
            name = names[actor[row]]
            actors.setdefault(name, []).append(behind(
                float(when[row]), float(begun[row]), self.before.get(int(keys[row])),
                self.ready.get(name),
            ))  # fmt: skip
        longest = {name: (len(values), max(values)) for name, values in actors.items()}
        return flights(
            waits, never, int((~started).sum()), self.stuck.values(), ended, loops, longest,
            called=called,
        )  # fmt: skip

    def findings(
        self, found: dict[str, Any], durations: dict[str, float], said: set[str]
    ) -> list[Finding]:
        """The driver's ray.get loops, calls that queued longer than they ran, stuck calls.

        ``said``: the subjects of findings made already (the driver's record names its
        loops by line too: each is said once).
        """
        made = []
        for loop in found["loops"]:
            if loop["site"] in said:
                continue
            called = most_first(found["called"].get(loop["site"], {}))
            made.append(Finding(
                loop_title(loop["site"], loop["calls"], called),
                f"{loop['serial']} of the {loop['calls']} calls submitted at {loop['site']} "
                "were each submitted after the one before had ended: the driver waited on "
                "each before submitting the next, so they ran one at a time",
                "submit them all first, then ray.get the list: refs = [f.remote(x) for x in "
                "xs]; ray.get(refs). If each call needs the one before, pass the ObjectRef "
                "on instead of its value (x = f.remote(x))",
                "driver_loop", loop["site"], called,
            ))  # fmt: skip
        for row in found["queued"]:
            ran = durations.get(row["function"])
            wait = row["p50_s"]
            if ran is None or wait < QUEUE_FINDING_S or wait < QUEUE_FINDING_RATIO * ran:
                continue
            made.append(Finding(
                f"Calls waited in queue longer than they ran: {row['function']}",
                f"{row['count']} calls waited {wait:.2f} s between .remote() and their start "
                f"(median; up to {row['max_s']:.2f} s) and ran {ran:.2f} s (median): more "
                "was submitted at once than there were CPUs (or actor slots) to run it",
                "ask for fewer resources per call or add nodes if the queue is the CPUs; "
                "for one actor running its calls one at a time, spread them over several "
                "actors (ray.util.ActorPool) or let them overlap (async methods, "
                "max_concurrency); raytrace-kit stuck shows a queue while it is there",
                "queued", row["function"],
            ))  # fmt: skip
        if found["stuck"]:
            first = found["stuck"][0]
            where = f" at {first['where']}" if first["where"] else ""
            made.append(Finding(
                f"Calls ran past their stuck_after: {first['function']}"
                + (f" and {len(found['stuck']) - 1} more" if len(found["stuck"]) > 1 else ""),
                f"{len(found['stuck'])} call(s) reported themselves stuck; the first, "
                f"{first['function']} (call {first['call_id']}), was{where} after "
                f"{first['running_s']:.1f} s ({first['outcome']})"
                + (f", waiting in {first['waiting_in']}" if first["waiting_in"] else ""),
                "read each one's stack below (the line it was blocked on); while a job "
                "hangs, raytrace-kit stuck names what each call waits on and any deadlock",
                "stuck_calls", first["function"],
            ))  # fmt: skip
        return made


def behind(
    submitted: float, begun: float, before: float | None, ready: list[float] | None
) -> float:
    """How long an actor's method call waited behind the actor's other calls.

    From when it could have run (submitted, and the actor created: the last end of its
    ``__init__`` before the call) until the call before it in the actor ended (``before``,
    the actor's last end when this call started). A call submitted before its actor was
    created waited for the creation first (a worker process to start, ``__init__`` to run);
    a call submitted after the one before had ended waited for Ray to deliver it: neither
    is waiting behind other calls. In seconds, or whole microseconds, as its arguments are.
    """
    if before is None:
        return 0.0
    created = max((end for end in ready or () if end <= begun), default=0.0)
    return max(min(begun, before) - max(submitted, created), 0.0)


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
) -> dict[str, Any]:
    """The report's in-flight sections from the joined records (see :meth:`Queues.results`).

    ``waits``: each function's times in queue; ``never``: the first calls never started,
    in the order their submissions were read; ``loops``: the driver's lines that are
    ray.get loops (:func:`loops_of`); ``actors``: each actor's calls' count and longest
    time in queue; ``called``: each line of the driver's code, its calls by function
    (what a ray.get loop at that line waited on).
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
    rows = [_stuck_row(event, ended(event.call_id)) for event in stuck]
    rows.sort(key=lambda row: row["timestamp"])
    longest = {actor: most for actor, (count, most) in actors.items() if count >= LOOP_MIN}
    return {"queued": queued, "never_started": never, "never_started_count": never_count,
            "stuck": rows, "loops": loops, "actor_queues": longest,
            "called": dict(called or {})}  # fmt: skip


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


def _stuck_row(event: Stuck, status: str | None) -> dict[str, Any]:
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
